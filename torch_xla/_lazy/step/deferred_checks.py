"""The deferred checks of computed values (a factorization's `info`, an index's range).

A check is deferred (`defer_check`): its value joins the outputs of the next program that
runs on its device (at `mark_step`, or a host read), with no device run of its own, and is
read on the host at the next sync after it: a host read reads it at once, a `mark_step`
leaves it to the next `mark_step` (which reads it once it has launched its own program) or
`wait_device_ops`, as CUDA reports a device-side error at a later call. Two queues: the
checks waiting for a program (`take_deferred`), and those whose program a `mark_step`
launched, not read yet (`take_launched`). A value computed from a checked op holds its
check (`ir`'s `checks`): a host read of it reads the check first and raises its error
(`raise_failed_checks`), never handing out the value XLA computed past it.
"""
import atexit
import copy
import sys
import threading

from ..graph.ir import Value
from ..launch.transfers import host_array


class DeferredCheck:
    """A check of a value a program computes (`defer_check`): the value (its flag) and the
    function reading it, then its outcome, read once: `passed`, or `error` (PyTorch's
    exception) and whether it was `raised` to a caller. Values computed from the op it
    checks hold it in their `checks` (`ir`)."""
    __slots__ = ("value", "check", "device", "passed", "error", "raised")

    def __init__(self, value, check):
        self.value, self.check, self.device = value, check, value.device
        self.passed, self.error, self.raised = False, None, False

    def read(self):
        """Reads the flag once (its program ran); the error the check found, or None."""
        if self.check is not None and self.value.data is not None:
            try:
                self.check(host_array(self.value))
                self.passed = True
            except Exception as e:  # noqa: BLE001  (kept, raised by the callers)
                self.error = e.with_traceback(None)
                self.error.__context__ = None
            self.value = self.check = None  # (the check's closure holds the checked values)
        return self.error

    def raise_error(self):
        """Raises a fresh copy of `error`: the kept one holds no traceback, whose frames (the
        reader's, alive through `f_back`) would keep their locals alive for the process's
        life (PyTorch's `_tensor_str` holds a guard disabling functorch in one)."""
        self.raised = True
        raise copy.copy(self.error) from None


_checks = []  # [DeferredCheck] deferred until a program computes the value
_launched = []  # [DeferredCheck] whose program was launched by a mark_step, not yet read
_checks_lock = threading.Lock()  # DataParallel's threads defer and take checks


def defer_check(value: Value, check, guarded=()) -> None:
    """Calls `check(host_copy)` (which raises on a bad value; the copy a numpy array, read
    from the device at a sync: no torch tensor made) once a program has computed `value`:
    the value becomes an output of the next program run on its device. `guarded`: the
    pending values of the checked op; a host read of a value computed from them raises the
    check's error (`raise_failed_checks`)."""
    deferred = DeferredCheck(value, check)
    with _checks_lock:
        _checks.append(deferred)
    for v in guarded:
        if v.node is not None:
            v.node.checks = v.node.checks | {deferred}


def deferred_check_count() -> int:
    """How many checks are deferred (a mark for `drop_deferred_checks`)."""
    return len(_checks)


def drop_deferred_checks(mark) -> None:
    """Drops the checks deferred since `deferred_check_count()` gave `mark` (those of a
    traced function's ops: no host reads values between its runs, `_lazy/trace/traced`)."""
    with _checks_lock:
        del _checks[mark:]


def has_checks() -> bool:
    """Whether any value waits for a check, deferred or launched and not read yet."""
    return bool(_checks or _launched)


def has_deferred_checks(device) -> bool:
    """Whether values on `device` wait for a program to check them (`defer_check`)."""
    return any(c.device == device for c in _checks)


def _take(checks, devices):
    """The checks in `checks` (a queue) of values on `devices` (None: every device), taken
    off that queue; those a read of a value already read (and raised, if failed) are left
    out."""
    if not checks:
        return []
    with _checks_lock:
        taken = [c for c in checks if devices is None or c.device in devices]
        checks[:] = [c for c in checks if not (devices is None or c.device in devices)]
    return [c for c in taken if c.check is not None or (c.error is not None and not c.raised)]


def take_deferred(devices=None):
    """The deferred checks of values on `devices` (None: every device), off their queue."""
    return _take(_checks, devices)


def take_launched(devices=None):
    """The checks on `devices` whose program was launched and not read, off their queue."""
    return _take(_launched, devices)


def requeue_pending(checks) -> None:
    """Defers again those of `checks` whose values are still pending (their program did
    not run, or did not compute them)."""
    with _checks_lock:
        _checks.extend(c for c in checks if c.value.node is not None)


def computed(checks, read: bool) -> None:
    """Once the programs for `checks` ran: the computed ones are read (`read`), or queued
    to be read at the next sync (`take_launched`)."""
    done = [c for c in checks if c.value.data is not None]
    if read:
        read_checks(done)
    else:
        with _checks_lock:
            _launched.extend(done)


def read_checks(checks) -> None:
    """Reads `checks` on their computed values; the first failing one not yet raised (by a
    read of a value it checked) raises once all were read."""
    failed = [c for c in checks if c.read() is not None and not c.raised]
    if failed:
        failed[0].raise_error()


def read_finished_checks(checks) -> None:
    """Reads those of `checks` whose programs have finished, without waiting for the others;
    the unread and the failed go back on the launched queue, for the next sync to read and
    raise (a read of a value a failed one checked raises it first)."""
    kept = []
    for c in checks:
        data = c.value.data if c.check is not None else None
        if data is not None and not data.is_ready():
            kept.append(c)
        elif c.read() is not None and not c.raised:
            kept.append(c)
    if kept:
        with _checks_lock:
            _launched.extend(kept)


def raise_failed_checks(values) -> None:
    """Before the host reads computed `values`: raises the error of a failed check of an op
    they were computed from (reading the check if its step's program was only launched),
    each time such a value is read; that error is not raised again at the next sync."""
    for v in values:
        for c in v.checks:
            if not c.passed and c.read() is not None:
                c.raise_error()


@atexit.register
def _report_unread_checks() -> None:
    """A failed check whose step was the last one run is reported, not lost."""
    try:
        read_checks(take_launched())
    except Exception as e:  # noqa: BLE001
        print(f"torch_xla: an error of the last step was not raised before exit: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
