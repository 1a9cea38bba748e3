"""Collectives inside torch.compile: ops of the compiled graph, run in its one program over
the replicas; and `output=` tensors of another shape taking the result's. One replica here;
two spawned processes (one spawned run, each check reported alone) in
tests/distributed/_compiled_workers.py."""
import json

import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.xla_multiprocessing as xmp
from tests.distributed import _compiled_workers
from tests.compare import assert_same


def _all_reduce(t):
    return xm.all_reduce(xm.REDUCE_SUM, t)


def _captured(fn, *args):
    """fn's graph as dynamo captures it (fullgraph), and fn(*args) compiled for openxla."""
    from torch._dynamo.backends.registry import lookup_backend
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return lookup_backend("openxla")(gm, example_inputs)
    return graphs, torch.compile(fn, backend=backend, fullgraph=True)(*args)


def test_a_collective_in_a_compiled_function_is_an_op_of_its_graph(dev):
    x = torch.full((2, 3), 5.0, device=dev)
    met.clear_all()
    graphs, out = _captured(lambda t: _all_reduce(t) * 2, x)
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.ops.xla.all_reduce in targets, targets  # (dynamo records the packet)
    assert_same(out, torch.full((2, 3), 10.0))
    assert met.counter_value("DynamoExecute") == 1 and met.counter_value("DynamoLazyGraph") is None


def test_every_collective_of_xm_compiles_in_one_graph(dev):
    def step(x):
        y = xm.all_reduce("max", x, scale=2.0, groups=[[0]])
        y = xm.all_gather(y, dim=1)
        y = xm.reduce_scatter("sum", y, 0.5, 0, 1)
        y = xm.all_to_all(y, 1, 0, 1)
        return xm.collective_permute(y, [(0, 0)])
    x = torch.arange(6.0).reshape(2, 3)
    met.clear_all()
    graphs, out = _captured(step, x.to(dev))
    assert len(graphs) == 1
    assert_same(out, x)
    assert met.counter_value("DynamoLazyGraph") is None


def test_an_output_of_another_shape_takes_the_results_shape(dev):
    x = torch.arange(6.0, device=dev).reshape(2, 3)
    out = torch.zeros(5, 3, device=dev)
    assert xm.reduce_scatter(xm.REDUCE_SUM, x, 1.0, 0, 1, output=out) is out
    assert_same(out, torch.arange(6.0).reshape(2, 3))
    out = torch.zeros(1, device=dev)
    assert xm.all_gather(x, dim=1, output=out) is out
    assert_same(out, torch.arange(6.0).reshape(2, 3))


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory):
    """{check: [replica 0's error or None, replica 1's]} of one spawned run of every check."""
    out = tmp_path_factory.mktemp("compiled_collectives")
    xmp.spawn(_compiled_workers.replica, args=(str(out),), nprocs=2)
    results = [json.loads((out / f"{r}.json").read_text()) for r in range(2)]
    return {name: [res[name] for res in results] for name in _compiled_workers.CHECKS}


@pytest.mark.parametrize("check", list(_compiled_workers.CHECKS))
def test_on_two_processes(two_replicas, check):
    errors = two_replicas[check]
    assert errors == [None, None], "\n".join(e for e in errors if e)


def test_channel_id_and_global_device_ids_are_taken_as_torch_xla_takes_them(dev):
    x = torch.arange(4.0, device=dev).reshape(2, 2)
    gathered = xm.all_gather(x, dim=0, groups=[[0]], channel_id=1, use_global_device_ids=True)
    scattered = xm.reduce_scatter("sum", x, 0.5, 1, 1, groups=[[0]], channel_id=1,
                                  use_global_device_ids=True)
    assert_same(gathered, torch.arange(4.0).reshape(2, 2))
    assert_same(scattered, torch.arange(4.0).reshape(2, 2) * 0.5)
