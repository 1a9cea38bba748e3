"""DataParallel and ParallelLoader: one thread per device in one process."""
import gc
import threading

import pytest
import torch

import torch_xla.debug.metrics as met
import torch_xla.distributed.data_parallel as dp
import torch_xla.distributed.parallel_loader as pl
from tests.compare import assert_same
from tests.fresh_process import python


def test_collectives_and_training_on_2_and_4_threads():
    """Every collective (groups included) against CPU values, and DataParallel training on
    shards of each global batch giving the weights of plain SGD on the whole batch; two
    DataParallel instances, one after the other and at the same time, each train as alone;
    replicas differing by dead tensors in reference cycles still meet; `spawn_threads` runs
    a function on a thread per device, each its replica."""
    proc = python("-m", "tests.distributed._threads_main", env={"CPU_NUM_DEVICES": 4})
    assert proc.stdout.split() == ["ok", "2", "ok", "4", "ok", "two", "runs", "ok", "cycles",
                                   "ok", "spawn_threads"]


def test_a_class_needing_arguments_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"torch\.nn\.modules\.linear\.Linear.*lambda: torch\.nn\.Linear"):
        dp.DataParallel(torch.nn.Linear, device_ids=["xla:0"])
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        dp.DataParallel(lambda: 3, device_ids=["xla:0"])


def test_data_parallel_runs_the_loop_with_a_context(dev):
    model = dp.DataParallel(lambda: torch.nn.Linear(3, 1), device_ids=["xla:0"])

    def loop(model, loader, device, context):
        calls = context.getattr_or("calls", lambda: [0])
        calls[0] += 1
        return [model(x).sum().item() for x in loader], device, calls[0]

    data = [torch.ones(2, 3), torch.zeros(2, 3)]
    (out, device, calls), = model(loop, data)
    (_, _, calls2), = model(loop, data)
    w, b = model.models[0].weight.detach().cpu(), model.models[0].bias.detach().cpu()
    assert device == torch.device("xla:0") and (calls, calls2) == (1, 2)
    assert_same(torch.tensor(out), torch.stack([2 * (w.sum() + b[0]), 2 * b[0]]), device="cpu")


def test_loop_error_is_raised_in_the_caller():
    model = dp.DataParallel(torch.nn.Linear(3, 1), device_ids=["xla:0"])

    def loop(model, loader, device, context):
        raise KeyError("from the loop")
    with pytest.raises(KeyError, match="from the loop"):
        model(loop, [torch.ones(1, 3)])


def test_parallel_loader_moves_batches_and_ends_steps(dev):
    batches = [(torch.full((2,), float(i)), torch.tensor(i)) for i in range(5)]
    loader = pl.ParallelLoader(batches, [dev]).per_device_loader(dev)
    assert len(loader) == 5
    steps = met.counter_value("MarkStep") or 0
    seen = []
    for data, label in loader:
        assert data.device == dev and label.device == dev
        seen.append(label.item())
    assert seen == list(range(5))
    assert (met.counter_value("MarkStep") or 0) - steps >= 5
    mp = pl.MpDeviceLoader(batches, dev)
    assert len(mp) == 5 and [b[1].item() for b in mp] == list(range(5))


def test_parallel_loader_stops_early_without_hanging(dev):
    """A loop that breaks out leaves no loader thread running (a loader that kept reading
    its 1,000 batches, or waited on a full queue, would still be alive)."""
    big = [torch.ones(2) for _ in range(1000)]
    before = set(threading.enumerate())
    for k in range(3):
        for i, _ in enumerate(pl.ParallelLoader(big, [dev], device_prefetch_size=2).per_device_loader(dev)):
            if i == 2:
                break
    gc.collect()
    for t in set(threading.enumerate()) - before:
        t.join(timeout=600)
        assert not t.is_alive(), t


def test_parallel_loader_reraises_loader_errors(dev):
    def broken():
        yield torch.ones(1)
        raise OSError("disk gone")
    loader = pl.ParallelLoader(broken(), [dev]).per_device_loader(dev)
    next(loader)
    with pytest.raises(OSError, match="disk gone"):
        next(loader)
