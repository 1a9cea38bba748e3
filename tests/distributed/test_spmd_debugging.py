"""torch_xla.distributed.spmd.debugging: a sharding drawn as a table of its blocks over the
first two dimensions, each labelled with the device holding it (or the devices, replicated)."""
import pytest
import rich.console
import torch

import torch_xla
from torch_xla.distributed.spmd.debugging import visualize_sharding, visualize_tensor_sharding


def _cells(table):
    """The table's labels, row by row."""
    console = rich.console.Console(width=200)
    with console.capture() as capture:
        console.print(table)
    lines = [line.strip("│┃ ") for line in capture.get().splitlines()]
    return [[c.strip() for c in line.split("│")] for line in lines if "CPU" in line]


def test_tiled_partially_replicated_and_replicated():
    assert _cells(visualize_sharding("{devices=[2,4]0,4,1,5,2,6,3,7}")) == [
        ["CPU 0", "CPU 4", "CPU 1", "CPU 5"], ["CPU 2", "CPU 6", "CPU 3", "CPU 7"]]
    assert _cells(visualize_sharding("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}")) == [
        ["CPU [0, 1]"], ["CPU [2, 3]"]]
    assert _cells(visualize_sharding("{devices=[2,1,2]0,2,1,3}")) == [  # past the 2nd dim
        ["CPU [0, 2]"], ["CPU [1, 3]"]]
    assert _cells(visualize_sharding("{devices=[4]0,1,2,3}")) == [["CPU 0"], ["CPU 1"], ["CPU 2"], ["CPU 3"]]
    assert _cells(visualize_sharding("{replicated}")) == [["CPU [0]"]]  # the one device here


def test_a_tensor_without_sharding_is_replicated_and_bad_specs_are_refused():
    t = torch.ones(4, 4, device=torch_xla.device())
    assert _cells(visualize_tensor_sharding(t)) == [["CPU [0]"]]
    with pytest.raises(ValueError, match="not organized as expected"):
        visualize_sharding("{devices=[2,2]0,1,2}")
