"""Run in a subprocess with CPU_NUM_DEVICES=4 (the test process has one device): for 2 and 4
DataParallel threads, every collective, and training on shards == one device on the batch
(with the loss read on the host each step too); then two DataParallel instances on 2
devices each, run one after the other and at the same time, each training as it would
alone; then spawn_threads."""
import gc
import threading

import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.data_parallel as dp
import torch_xla.runtime as xr
from torch_xla._internal import pjrt
from tests.distributed import _workers as w
from tests.compare import assert_same


def main():
    expected = w.reference_weights()
    for n in (2, 4):
        devices = [f"xla:{i}" for i in range(n)]
        results = dp.DataParallel(torch.nn.Identity(), device_ids=devices)(
            lambda model, loader, device, context: w.collectives(device), [0] * n)
        for r, result in enumerate(results):
            assert len(result) == 28, sorted(result)  # every check ran
            w.assert_results(result)
        # dealt round-robin: round s gives device i shard i of global batch s
        shards = [w.shard(b, n, i) for b in w.global_batches() for i in range(n)]
        for read_loss in (False, True):
            weights = dp.DataParallel(w._model, device_ids=devices)(
                lambda model, loader, device, context: w.train_loop(model, loader, device,
                                                                    read_loss=read_loss), shards)
            for got in weights:
                assert_same(got, expected, device="cpu")
        print(f"ok {n}")
    two_runs(expected)
    print("ok two runs")
    dead_cycles()
    print("ok cycles")
    spawn_threads()
    print("ok spawn_threads")


def _train(shards, barrier=None):
    def loop(model, loader, device, context):
        context.getattr_or("calls", lambda: [0])[0] += 1
        if barrier is not None:
            barrier.wait(timeout=600)  # both runs are under way before either trains (a liveness bound)
        return w.train_loop(model, loader, device, read_loss=True), context.calls[0]
    return loop


def two_runs(expected):
    shards = [w.shard(b, 2, i) for b in w.global_batches() for i in range(2)]
    first = dp.DataParallel(w._model, device_ids=["xla:0", "xla:1"])
    second = dp.DataParallel(w._model, device_ids=["xla:2", "xla:3"])
    # one after the other, interleaved: each instance's own models and contexts
    for run, calls in ((first, 1), (second, 1), (first, 2)):
        for weights, n in run(_train(shards), shards):
            assert n == calls
            if calls == 1:
                assert_same(weights, expected, device="cpu")
    # at the same time, from two threads: each run's collectives meet its own replicas
    barrier = threading.Barrier(4)
    fresh = [dp.DataParallel(w._model, device_ids=ids) for ids in (["xla:0", "xla:1"], ["xla:2", "xla:3"])]
    results = [None, None]

    def drive(k):
        try:
            results[k] = fresh[k](_train(shards, barrier), shards)
        except BaseException as e:  # noqa: BLE001  (checked below)
            results[k] = e
            barrier.abort()
    threads = [threading.Thread(target=drive, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
        assert not t.is_alive(), "a run hangs"
    for result in results:
        assert not isinstance(result, BaseException), repr(result)
        for weights, _ in result:
            assert_same(weights, expected, device="cpu")
    # a device cannot be a replica of two runs at once
    started, checked = threading.Event(), threading.Event()

    def hold(model, loader, device, context):
        started.set()
        checked.wait(timeout=600)
    holder = threading.Thread(target=lambda: dp.DataParallel(w._model, device_ids=["xla:0", "xla:1"])(hold, [0, 0]),
                              daemon=True)
    holder.start()
    assert started.wait(timeout=600), "the holding run never started"
    try:
        with pytest.raises(RuntimeError, match=r"xla:\[1\] already run another run's replicas"):
            dp.DataParallel(w._model, device_ids=["xla:1", "xla:2"])(hold, [0, 0])
    finally:
        checked.set()
        holder.join(timeout=600)


def _step_with_a_cycle(device, freed_on, kept_on=()):
    """A step with an all-reduce, each replica holding a pending tensor in a reference cycle
    that is garbage on every replica but `kept_on`, and freed already on `freed_on` (as by
    the cyclic collector, run by another thread) alone. Returns the sum and whether the
    replica kept its cycle."""
    r = xr.global_ordinal()
    x = torch.full((3,), r + 1.0).to(device)
    cycle = [x * 2]
    cycle.append(cycle)
    if r in freed_on:
        cycle.clear()
    kept = cycle if r in kept_on else None
    del cycle
    total = xm.all_reduce(xm.REDUCE_SUM, x)
    xm.mark_step()
    return total.cpu(), kept is not None


def dead_cycles():
    """Replicas whose steps differ by dead tensors the collector freed on some of them alone
    run one program; replicas whose live tensors differ are told so."""
    devices = ["xla:0", "xla:1"]
    gc.disable()  # the cycles stay until a replica collects them
    try:
        run = dp.DataParallel(torch.nn.Identity(), device_ids=devices)
        for freed_on in ({0, 1}, {0}):  # the first also plans the ops (their first calls)
            for total, _ in run(lambda model, loader, device, context: _step_with_a_cycle(device, freed_on),
                                [0, 0]):
                assert_same(total, torch.full((3,), 3.0), device="cpu")
        with pytest.raises(RuntimeError, match="the replicas ran different graphs"):
            run(lambda model, loader, device, context: _step_with_a_cycle(device, {0}, kept_on={1}), [0, 0])
    finally:
        gc.enable()


def spawn_threads():
    """`_internal.pjrt.spawn_threads`: a thread per device, each its own `xla:N` and ordinal;
    tensors made there with `device=` (a factory's device in the graph) meet in one program."""
    seen = {}

    def replica(ordinal, scale):
        device = torch_xla.device()
        x = torch.full((2,), ordinal + 1.0, device=device) * scale
        seen[ordinal] = (str(device), xr.world_size(), xm.all_reduce(xm.REDUCE_SUM, x).cpu())
    pjrt.spawn_threads(replica, (2.0,))
    assert sorted(seen) == [0, 1, 2, 3]
    for ordinal, (device, world, total) in seen.items():
        assert (device, world) == (f"xla:{ordinal}", 4)
        assert_same(total, torch.full((2,), 20.0), device="cpu")


if __name__ == "__main__":
    main()
