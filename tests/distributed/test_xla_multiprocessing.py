"""xmp.spawn: one process per device, joined into one runtime (gloo between CPU processes).
Process start-up is slow on a small machine, so one spawned run checks many things."""

import time

import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr
from tests.distributed import _workers


def test_two_processes_collectives_and_training():
    """In each of 2 processes: ordinals, the coordinator listening on loopback only, every
    collective (groups included) against CPU values, and training on its shard of each global batch with xm.optimizer_step and with
    DistributedDataParallel ('xla' backend) giving plain SGD's weights on the whole batch."""
    xmp.spawn(_workers.spawn_replica, nprocs=2)


def test_a_failing_process_makes_spawn_raise_promptly():
    with pytest.raises(xmp.ProcessExitedException, match="ValueError: replica 1 fails on purpose") as info:
        xmp.spawn(_workers.spawn_failing, nprocs=2)
    assert info.value.error_index == 1
    assert "Traceback (most recent call last)" in str(info.value) and "spawn_failing" in str(info.value)


def test_a_killed_process_ends_spawn_promptly_with_its_signal(tmp_path):
    stamp = tmp_path / "killed_at"
    with pytest.raises(xmp.ProcessExitedException, match="Process 1 terminated with signal 9") as info:
        xmp.spawn(_workers.spawn_killed, args=(str(stamp),), nprocs=2)
    assert info.value.error_index == 1 and info.value.exit_code == -9


def test_a_collective_whose_peer_never_comes_times_out(monkeypatch):
    """Process 1 is alive but never joins process 0's collective: process 0 fails with a
    timeout error naming its variable, and spawn shows it."""
    monkeypatch.setenv("XLA_COLLECTIVE_TIMEOUT", "3")
    with pytest.raises(xmp.ProcessExitedException, match=r"CollectiveTimeout: .*did not finish "
                                                         r"within 3 s \(XLA_COLLECTIVE_TIMEOUT\)") as info:
        xmp.spawn(_workers.spawn_stalled, nprocs=2)
    assert info.value.error_index == 0


@pytest.mark.parametrize("op,nprocs", [("all_reduce", 2), ("all_gather", 2), ("reduce_scatter", 2),
                                       ("rendezvous", 2), ("all_reduce", 4)])
def test_a_process_that_returns_early_ends_the_ones_waiting_for_it(tmp_path, monkeypatch, op, nprocs):
    """The last process returns while the others wait for it in `op`: they fail within
    seconds (not at XLA_COLLECTIVE_TIMEOUT), naming it and what they waited in, and spawn
    raises."""
    monkeypatch.setenv("CPU_NUM_DEVICES", str(nprocs))
    stamp = tmp_path / "returned_at"
    with pytest.raises(xmp.ProcessExitedException,
                       match=rf"PeerLeft: .*waited for it in program .*: process {nprocs - 1} "
                             r"returned from its function"):
        xmp.spawn(_workers.spawn_returns_early, args=(op, str(stamp)))
    assert time.time() - float(stamp.read_text()) < 30


def test_the_watchdog_reports_a_long_wait_and_raises_when_told(monkeypatch, capfd):
    """Process 1 stays in user code: with the watchdog at 3 s, process 0 prints what it waits
    on and its threads' stacks, then (TORCH_XLA_WATCHDOG_RAISE=1) raises."""
    monkeypatch.setenv("TORCH_XLA_WATCHDOG_TIMEOUT", "3")
    monkeypatch.setenv("TORCH_XLA_WATCHDOG_RAISE", "1")
    start = time.time()
    with pytest.raises(xmp.ProcessExitedException, match=r"WatchdogTimeout: program 2 spanning the "
                                                         r"2 processes .*xla::all_reduce") as info:
        xmp.spawn(_workers.spawn_stalled_under_the_watchdog, nprocs=2)
    assert info.value.error_index == 0 and time.time() - start < 90
    err = capfd.readouterr().err
    assert "torch_xla watchdog: process 0 of 2 has waited 3 s in program 2" in err
    report = err.split("torch_xla watchdog: ", 1)[1]
    assert "Thread 0x" in report and 'in spawn_stalled_under_the_watchdog' in report


def _record(index, out):
    out.append((index, xr.world_size(), xm.get_ordinal(), xm.is_master_ordinal()))


def test_one_process_runs_in_this_process():
    out = []
    xmp.spawn(_record, args=(out,), nprocs=1)
    assert out == [(0, 1, 0, True)]


def test_fork_after_the_runtime_started_is_refused(dev):
    torch.ones(1, device=dev).cpu()  # the runtime has started
    with pytest.raises(RuntimeError, match="Runtime is already initialized"):
        xmp.spawn(_record, args=([],), nprocs=2, start_method="fork")
