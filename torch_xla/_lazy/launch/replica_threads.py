"""Replicas as threads of one process: a function run on each of some local devices, one
thread each (DataParallel's replicas, `_internal.pjrt.spawn_threads`).

Each thread drives its device (`pjrt.thread_device`: `xla:N` there is that thread's
device), the run's devices are its replicas (collectives span them), and its programs with
collectives meet at the run's own `Meeting`, so runs on other devices keep apart. A device
drives one run at a time.
"""
import threading

import torch

from ..runtime import pjrt
from . import replica_program as replicated

_busy = set()  # indices of the devices a run in progress drives
_busy_lock = threading.Lock()


def run_threads(indices, fn, who="DataParallel") -> list:
    """`fn(k)` on a thread driving the device `indices[k]`, for every k; their results in
    order. The first exception a thread raised is raised here, once all have stopped (the
    others are woken from waiting for it)."""
    _claim(indices, who)
    try:
        return _run(indices, fn)
    finally:
        with _busy_lock:
            _busy.difference_update(indices)


def _run(indices, fn):
    results, errors = [None] * len(indices), [None] * len(indices)
    meeting = replicated.Meeting()

    def run(k):
        pjrt.set_thread_device(indices[k])
        pjrt.set_thread_replicas(indices)
        replicated.attend(meeting)
        # The replica's backward passes run on its thread (thread-local), where collectives
        # recorded by backward hooks (FSDP's reduce_scatter) know their replica.
        torch._C._set_multithreading_enabled(False)
        try:
            results[k] = fn(k)
        except BaseException as e:  # noqa: BLE001  (raised below, in the caller's thread)
            errors[k] = e
            meeting.abort(e)
        else:
            meeting.leave(indices[k])

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(len(indices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def _claim(indices, who) -> None:
    """Marks the devices as driven by a run in progress; a device another run drives is an
    error (two threads cannot both be its replica)."""
    with _busy_lock:
        taken = sorted(_busy.intersection(indices))
        if taken:
            raise RuntimeError(f"{who}: xla:{taken} already run another run's replicas; runs "
                               "at the same time need devices of their own")
        _busy.update(indices)
