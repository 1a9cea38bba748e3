"""Callbacks run once a tensor's device buffer is ready (`torch_xla.experimental.callback`).

jax gives no callback on a buffer, so one worker thread waits on each registered buffer in
turn (`block_until_ready`, which releases the GIL) and then calls its callback; a buffer
ready earlier than one registered before it waits for that one. A callback that raises is
reported (`threading.excepthook`) and the worker goes on.
"""
import queue
import sys
import threading

import torch

from ..graph.tensor import unwrap

_queue = queue.SimpleQueue()
_worker = []
_lock = threading.Lock()


def on_ready(t: torch.Tensor, callback) -> None:
    """Calls `callback()` from the worker thread once XLA tensor `t`'s buffer is computed
    (at once, if it is). `t` must have a buffer or a program computing it already: a tensor
    still only traced raises, as nothing would ever run it."""
    value = unwrap(t)._value
    if value.data is None:
        if value.node is None:
            raise value.failure()
        raise RuntimeError("on_ready_callback: this tensor is still to be computed (its graph "
                           "has not run): call torch_xla.sync() first, or use eager mode")
    with _lock:
        if not _worker:
            worker = threading.Thread(target=_work, name="torch_xla-on-ready", daemon=True)
            worker.start()
            _worker.append(worker)
    _queue.put((value.data, callback))


def _work():
    while True:
        data, callback = _queue.get()
        try:
            data.block_until_ready()
        except Exception:  # noqa: BLE001  (a failed program: its buffer is as ready as it gets)
            pass
        try:
            callback()
        except Exception:  # noqa: BLE001
            threading.excepthook(threading.ExceptHookArgs((*sys.exc_info(), threading.current_thread())))
