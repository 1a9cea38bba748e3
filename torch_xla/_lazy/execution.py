"""Execution: what turns pending values into device buffers, and moves data in and out.

`materialize(values)` runs what `values` need, one program per device: the compiler's walk
and program (`compiler`), run on the device; a graph with a collective runs as one
replicated program over every replica's device (`replicated`); under SPMD every graph runs
as one program partitioned over all devices (`spmd_program`). `mark_step` does it for
every live pending tensor and donates the buffers no live tensor holds any more.
`from_cpu`/`to_cpu` are the transfers, counted and timed in the metrics.

Checks of computed values (a factorization's `info`, an index's range) are deferred
(`defer_check`): the values join the outputs of the next program that runs on their device
(at `mark_step`, or a host read), with no device run of their own, and are read on the host
at the next sync after it: a host read (`to_cpu`, `materialize`) reads them at once, a
`mark_step` leaves them to the next `mark_step` (which reads them once it has launched its
own program) or `wait_device_ops`, as CUDA reports a device-side error at a later call.
A value computed from a checked op holds its check (`ir`'s `checks`): a host read of it
reads the check first and raises its error (`raise_failed_checks`), never handing out the
value XLA computed past it.

Programs run asynchronously: `mark_step` returns once the program is launched (each root
holds a buffer jax is still computing), so tracing the next step overlaps it; only a read
of values waits (`to_cpu`, `wait_device_ops`), and a `mark_step` after a step with
deferred checks waits for that step's program (one step in flight).
"""
import atexit
import copy
import gc
import os
import sys
import threading
import time

import jax
import torch

from . import compile_explanation, compiler, donation, graph_cache, metrics, runner, runtime, user_code
from .replicas import program as replicated
from .spmd import manual_regions as manual
from .spmd import program as spmd_program
from .ir import Value, format_node
from .tensor import live_values


def from_cpu(t: torch.Tensor, device: int, dtype=None) -> Value:
    """A CPU tensor's data as a buffer on XLA device `device` (cast to `dtype`)."""
    dtype = dtype or t.dtype
    with metrics.timed("TransferToDeviceTime"):
        data = runtime.to_device_buffer(t.to(dtype) if t.dtype != dtype else t, device)
    metrics.count("TransferToDevice")
    return Value(tuple(t.shape), dtype, device, data=data)


def to_cpu(value: Value) -> torch.Tensor:
    materialize([value])
    if value.data is None:
        raise value.failure()
    raise_failed_checks((value,))
    return _read(value)


def _read(value: Value) -> torch.Tensor:
    return runtime.host_tensor(_transfer(value), value.dtype)


def _transfer(value: Value):
    """The computed `value`'s buffer copied to the host (a numpy array), timed and counted."""
    replicated.settle()  # a program waiting for another process would never end: timed
    start = time.perf_counter_ns()
    out = runtime.to_host_array(value.data)
    metrics.sample("TransferFromDeviceTime", time.perf_counter_ns() - start)
    metrics.count("TransferFromDevice")
    return out


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
                self.check(_transfer(self.value))
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
    traced function's ops: no host reads values between its runs, `_lazy/traced`)."""
    with _checks_lock:
        del _checks[mark:]


def has_checks() -> bool:
    """Whether any value waits for a check, deferred or launched and not read yet."""
    return bool(_checks or _launched)


def has_deferred_checks(device) -> bool:
    """Whether values on `device` wait for a program to check them (`defer_check`)."""
    return any(c.device == device for c in _checks)


def _take(checks, devices=None):
    """The checks in `checks` (`_checks` or `_launched`) of values on `devices` (None: every
    device), taken off that list; those a read of a value already read are left out."""
    if not checks:
        return []
    with _checks_lock:
        taken = [c for c in checks if devices is None or c.device in devices]
        checks[:] = [c for c in checks if not (devices is None or c.device in devices)]
    return [c for c in taken if c.check is not None]


def _run_all(values, checks, held=None, read=True, eager=False):
    """Materialises `values` and the values of `checks`, one program per device, then runs
    the checks (`read`) or leaves them to the next sync (`_launched`); checks whose values
    are still pending stay deferred. `eager`: the programs are an eager op's (their
    compilations and runs are timed as `EagerOpCompileTime`/`EagerOpExecuteTime`).
    Returns the `compiler.Program` that ran last (None: none, or not a single device's)."""
    program = None
    try:
        for vs in _pending_by_device(values + [c.value for c in checks]).values():
            program = _run(vs, held, eager)
    finally:
        with _checks_lock:
            _checks.extend(c for c in checks if c.value.node is not None)
    computed = [c for c in checks if c.value.data is not None]
    if read:
        _read_checks(computed)
    else:
        with _checks_lock:
            _launched.extend(computed)
    return program


def _read_checks(checks) -> None:
    """Reads `checks` on their computed values; the first failing one not yet raised (by a
    read of a value it checked) raises once all were read."""
    failed = None
    for c in checks:
        if c.read() is not None and not c.raised and failed is None:
            failed = c
    if failed is not None:
        failed.raise_error()


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
        _read_checks(_take(_launched))
    except Exception as e:  # noqa: BLE001
        print(f"torch_xla: an error of the last step was not raised before exit: "
              f"{type(e).__name__}: {e}", file=sys.stderr)


def _pending_by_device(values):
    by_device = {}
    for v in values:
        if v.node is not None:
            by_device.setdefault(v.device, []).append(v)
    return by_device


def materialize(values, eager=False, donate=False):
    """Runs what is needed to give every value in `values` a buffer (one program per device),
    with the deferred checks of those devices (`eager`, and what it returns: `_run_all`); with
    `donate`, the programs take the buffers users marked for donation (`donation`), and those
    alone."""
    groups = _pending_by_device(values)
    if not groups:
        return None
    if runtime.is_spmd():
        manual.check_readable(values)
    held = donation.OnlyDonors() if donate else None
    return _run_all(list(values), _take(_launched, groups.keys()) + _take(_checks, groups.keys()),
                    held, eager=eager)


def mark_step(device=None) -> None:
    """Materialises every live pending tensor, one program per device, donating buffers that
    no live tensor holds any more and those marked for donation. On a DataParallel thread
    it covers that thread's device."""
    metrics.count("MarkStep")
    if device is None:
        device = runtime.thread_device()
    devices = None if device is None else (device,)
    earlier = _take(_launched, devices)  # read once this step's program is launched
    try:
        _run_all(*_step_roots(device, devices), read=False)
    except replicated.GraphsDiffer:
        # A dead tensor in a reference cycle stays live until the cyclic collector runs, in
        # whichever thread allocates: replicas sharing a process can differ by such roots.
        # All of them got this error at the same round; each collects and gathers again.
        # (One collection at a time: `gc.collect` returns at once while another thread's
        # runs, and that one may not have freed this replica's tensors yet.)
        with _collecting:
            gc.collect()
        _run_all(*_step_roots(device, devices), read=False)
    _read_checks(earlier)


_collecting = threading.Lock()


def _step_roots(device, devices):
    """`_run_all`'s values, checks and held buffers for a step on `device` (None: every
    device): the values of every live tensor there, the checks deferred on `devices`, and
    the ids of the buffers live tensors hold (less those marked for donation)."""
    values = live_values(device)
    held = donation.release({id(v.data) for v in values if v.data is not None})
    if runtime.is_spmd():  # tensors in manual sharding mode exist only inside a program
        values, held = manual.outside_regions(values, held)
    return values, _take(_checks, devices), held


class ExecutionError(RuntimeError):
    """A step's program failed; the message names the op and its place in the graph."""


# Whether programs may run (`_XLAC._set_allow_execution`): a caller that must not cause an
# execution (a compiled function's body) turns it off, and any program run then raises.
allow_execution = [True]


def _run(values, held=None, eager=False):
    """Materialises the pending `values` (all on one device) in one program, and returns it
    (None: not a single device's program). If it fails, the values computed from what
    failed raise the error when used; the others stay pending, intact."""
    if not allow_execution[0]:
        raise RuntimeError("Unexpected execution happens inside the compiled function, exiting "
                           "(executions are disallowed: _XLAC._set_allow_execution(False))")
    w = graph_cache.lookup(values, held) or compiler.walk(values, held)
    if w is None:
        return None
    if w.collective and held is not None:
        # Replicas must agree on the program, and which buffers are still held can differ
        # between them (a dead tensor not yet collected): no donation here.
        w = compiler.walk(values)
    try:
        outputs, program = _execute(w, eager)
    except replicated.GraphsDiffer:
        raise  # nothing failed: the values stay pending (`mark_step` gathers them again)
    except compiler.LoweringError as e:
        error = ExecutionError(_describe_failure(w, e.position, e.cause))
        for v in compiler.dependent_roots(w, e.position):
            v.fail(error)
        raise error from e.cause
    except Exception as e:
        error = ExecutionError(f"the program of {len(w.order)} ops on xla:{w.device} "
                               f"({_op_names(w.order)}) failed: {type(e).__name__}: {e}")
        for v in w.roots:
            v.fail(error)
        raise error from e
    for v, out in zip(w.roots, outputs):
        v.set_data(out)
    w.rederive()
    save_graph(w.order)
    return program


_eager_mode = [False]  # eager mode is on: every program runs as part of an eager op


def time_as_eager(enable: bool) -> None:
    """Whether programs are timed as eager ops' (`_run_all`) even when not run as one: in
    eager mode a read inside an op (`allclose`) runs what the op traced."""
    _eager_mode[0] = bool(enable)


def _execute(w, eager=False):
    """Runs walk `w`: its outputs, and the `compiler.Program` that ran (None: a program over
    the mesh or the replicas)."""
    eager = eager or _eager_mode[0]
    if runtime.is_spmd():
        return spmd_program.run(w, eager), None
    if w.collective:
        call = replicated.Call(w.key, w.program.run_traced, w.args, [v.shape for v in w.roots],
                               explain=lambda: compile_explanation.explain_compile(w.order, w.roots))
        return replicated.run(w.device, call), None
    program = compiler.program_for(w, "EagerOpCompileTime" if eager else "CompileTime")
    donated, kept, scalars = w.args
    outputs = runner.execute(program, donated, kept, program.pack_on(scalars, w.device),
                             timed_as="EagerOpExecuteTime" if eager else "ExecuteTime")
    graph_cache.remember(w, program)
    return outputs, program


def _op_names(nodes, shown=4):
    names = [n.op.name for n in nodes[-shown:]]
    return ("..., " if len(nodes) > shown else "") + ", ".join(names)


def _describe_failure(w, position, cause):
    """Where a lowering failed: the op, the user's line that made it (the first call with
    its signature, `meta_outputs`), its place in the graph and the ops just before it."""
    node = w.order[position]
    before = f"; after {_op_names(w.order[:position])}" if position else ""
    return (f"{node.op.name} failed to compile: op {position} of {len(w.order)} in the "
            f"graph on xla:{w.device} ({format_node(node)}{before}), {_made_at(node)}: "
            f"{type(cause).__name__}: {cause}")


def _made_at(node) -> str:
    if node.origin is None:
        return "no user line known"
    where, source = user_code.describe(node.origin)
    source = f" (`{source}`)" if source else ""
    return f"made by the backward pass called at {where}{source}" if node.origin[3] else \
        f"made at {where}{source}"


def save_graph(order) -> None:
    """XLA_SAVE_TENSORS_FILE: appends each executed graph's IR to that file."""
    path = os.environ.get("XLA_SAVE_TENSORS_FILE")
    if path:
        with open(path, "a") as f:
            f.write("[graph]\n" + "\n".join(f"  %{i} = {format_node(n)}" for i, n in enumerate(order)) + "\n")


def wait_device_ops() -> None:
    """Blocks until every buffer of a live tensor has been computed, and jax's effects ran."""
    replicated.settle()
    for v in live_values():
        if v.data is not None and not v.data.is_deleted():  # (a donated buffer: no result to wait for)
            v.data.block_until_ready()
    jax.effects_barrier()
    _read_checks(_take(_launched))
