"""Step closures: what `xm.add_step_closure` queues for the end of the step of a device, run
once its graph has run (`run_step_closures`, from `torch_xla.sync` and the loaders), in
order, or off the training thread (`run_async`: `AsyncClosureHandler`)."""
import atexit
import os
import queue
import threading

from torch_xla._lazy.runtime import device_info as _device_info


class ClosureHandler:
    """Runs closures: here, at once and in order."""

    def run(self, closure):
        closure()

    def run_all(self, closures):
        for closure in closures:
            self.run(closure)


class AsyncClosureHandler(ClosureHandler):
    """Runs closures in order on a worker thread of its own, so the training loop goes on
    while they run. At most `max_queue_size` (XLA_MAX_ASYNC_QUEUE) wait; beyond that `run`
    blocks. After a closure raised, no more run: the next `run` raises, from that error.
    Queued closures finish before the interpreter exits."""

    def __init__(self, max_queue_size=100):
        self._queue = queue.Queue(int(os.environ.get("XLA_MAX_ASYNC_QUEUE", max_queue_size)))
        self._error = None
        self._lock = threading.Lock()
        self._worker = None
        atexit.register(self._drain)

    def _loop(self):
        while True:
            closure = self._queue.get()
            try:
                if self._error is None:
                    closure()
            except Exception as e:  # noqa: BLE001  (raised by the next run)
                self._error = e
            finally:
                self._queue.task_done()

    def run(self, closure):
        if self._error is not None:
            raise RuntimeError("Cannot run asynchronous closure due to previously raised exception") \
                from self._error
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._loop, name="xla-async-closures", daemon=True)
                self._worker.start()
        self._queue.put(closure)

    def wait(self):
        """Blocks until every queued closure has run."""
        self._queue.join()

    def _drain(self):
        if self._worker is not None:
            self.wait()


class StepClosures:
    """The closures queued for the end of the current step of one device."""

    def __init__(self):
        self.sync, self.run_async = [], []
        self.handler = None


_closures = {}
_closures_lock = threading.Lock()


def step_closures(device=None) -> StepClosures:
    """The closures queued for `device` (default: this thread's device)."""
    key = str(device or _device_info.default_device())
    with _closures_lock:
        return _closures.setdefault(key, StepClosures())


def queue_step_closure(closure, run_async: bool = False) -> None:
    """Queues `closure()` for the end of this thread's device's step."""
    queued = step_closures()
    (queued.run_async if run_async else queued.sync).append(closure)


def run_step_closures(device=None) -> None:
    """Runs the closures queued for `device`'s step (default: this thread's device)."""
    if not any(q.sync or q.run_async for q in list(_closures.values())):
        return  # none queued anywhere: the usual step
    queued = step_closures(device)
    if queued.run_async:
        closures, queued.run_async = queued.run_async, []
        if queued.handler is None:
            queued.handler = AsyncClosureHandler()
        queued.handler.run_all(closures)
    closures, queued.sync = queued.sync, []
    for closure in closures:
        closure()
