"""Step closures run off the training thread: `xm.add_step_closure(fn, run_async=True)`."""
import atexit
import os
import queue
import threading


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
