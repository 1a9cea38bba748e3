"""Execution: what turns pending values into device buffers.

`materialize(values)` runs what `values` need, one program per device: the walk and program
of `graph_program`, run on the device; a graph with a collective runs as one
replicated program over every replica's device (`launch/replica_program`); under SPMD every graph
runs as one program partitioned over all devices (`launch/spmd_program`). `mark_step` does it for
every live pending tensor and donates the buffers no live tensor holds any more. `to_cpu`
materialises a value and reads it (`transfers`). The deferred checks of computed values
(`deferred_checks`) join the programs of their devices; a failed program's error names the
op (`execution_errors`).

Programs run asynchronously: `mark_step` returns once the program is launched (each root
holds a buffer jax is still computing), so tracing the next step overlaps it; only a read
of values waits (`to_cpu`, `wait_device_ops`), and a `mark_step` after a step with
deferred checks waits for that step's program (one step in flight).
"""
import gc
import os
import threading

import jax
import torch

from ..runtime import pjrt
from ..base import counters
from . import deferred_checks
from ..launch import donation, graph_cache, graph_program, program_kinds
from ..inspect import graph_save
from .deferred_checks import (raise_failed_checks, read_checks, read_finished_checks, take_deferred,
                              take_launched)
from .execution_errors import lowering_failed, program_failed
from ..graph.ir import Value
from ..launch import replica_program as replicated
from ..launch import manual_regions as manual
from ..graph.tensor import live_values
from ..launch.transfers import read


def to_cpu(value: Value) -> torch.Tensor:
    """`value` computed (with what it needs) and read on the host, after its checks; a
    bounded dynamic value (`dynamic_sizes`) computed with its sizes, read to them."""
    sizes = value.sizes
    materialize([value] if sizes is None else [value, *_size_leaves(sizes)])
    if value.pending:
        raise value.failure()
    raise_failed_checks((value,))
    out = read(value)
    if sizes is not None:
        out = out[tuple(slice(0, int(s)) for s in sizes)]
    return out


def _size_leaves(sizes):
    """The device scalars bounded sizes are computed from (their SymInts' `leaves()`)."""
    return [v for s in sizes if not isinstance(s, int) for v in s.node.leaves()]


def _run_all(values, checks, held=None, read=True, eager=False):
    """Materialises `values` and the values of `checks`, one program per device, then runs
    the checks (`read`) or leaves them to the next sync (`deferred_checks.computed`); checks
    whose values are still pending stay deferred. `eager`: the programs are an eager op's (their
    compilations and runs are timed as `EagerOpCompileTime`/`EagerOpExecuteTime`).
    Returns the `graph_program.Program` that ran last (None: none, or not a single device's)."""
    program = None
    try:
        for vs in _pending_by_device(values + [c.value for c in checks]).values():
            program = _run(vs, held, eager)
    finally:
        deferred_checks.requeue_pending(checks)
    deferred_checks.computed(checks, read)
    return program


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
    alone. In fused eager mode (`fuse_reads`) the program computes every live pending tensor
    of those devices with them: what the program does not take stays pending, and a later
    program would compute it again from the start."""
    groups = _pending_by_device(values)
    if not groups:
        return None
    if pjrt.is_spmd():
        manual.check_readable(values)
    if _fused[0]:
        values = list(values) + _live_pending(groups, values)
        cuts[0] += 1
    held = donation.OnlyDonors() if donate else None
    return _run_all(list(values), take_launched(groups.keys()) + take_deferred(groups.keys()),
                    held, eager=eager)


def _live_pending(devices, values):
    """The pending values of live tensors on `devices`, less `values` (and, under SPMD,
    those in manual sharding mode, which exist only inside a program)."""
    given = {id(v) for v in values}
    live = [v for v in live_values() if v.node is not None and v.device in devices and id(v) not in given]
    return manual.outside_regions(live, set())[0] if pjrt.is_spmd() else live


def mark_step(device=None, wait=False, raise_earlier=True) -> None:
    """Materialises every live pending tensor, one program per device, donating buffers that
    no live tensor holds any more and those marked for donation. On a DataParallel thread
    it covers that thread's device. With `wait`, returns once the programs have run.
    `raise_earlier`: `run_live`'s (False: the checks of the step before are not waited for,
    so the next step's tracing overlaps its program)."""
    counters.count("MarkStep")
    run_live(device, raise_earlier)
    if wait:
        wait_device_ops()


def run_live(device=None, raise_earlier=True) -> None:
    """`mark_step`'s work, not counted as a step: runs every live pending tensor (on
    `device`; None: this thread's device, or every device), then reads the checks of the
    programs launched before: a failed one raises now. With `raise_earlier=False` (fused
    eager mode's cuts, `eager_fused`), only the checks of programs that have finished are
    read (no wait: the next program's tracing overlaps those still running), and a failed
    one raises where a value it checked is read, or at the next sync."""
    cuts[0] += 1
    if device is None:
        device = pjrt.thread_device()
    devices = None if device is None else (device,)
    earlier = take_launched(devices)  # read once this step's program is launched
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
    if not raise_earlier:
        read_finished_checks(earlier)
        return
    with counters.timed("DeviceLockWait"):  # the wait for the step before (its checks)
        read_checks(earlier)


_collecting = threading.Lock()


def _step_roots(device, devices):
    """`_run_all`'s values, checks and held buffers for a step on `device` (None: every
    device): the values of every live tensor there, the checks deferred on `devices`, and
    the ids of the buffers live tensors hold (less those marked for donation)."""
    values = live_values(device)
    held = donation.release({id(v.data) for v in values if v.data is not None})
    if pjrt.is_spmd():  # tensors in manual sharding mode exist only inside a program
        values, held = manual.outside_regions(values, held)
    return values, take_deferred(devices), held


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
    w = graph_cache.lookup(values, held)
    walked = w is None
    if walked:
        w = graph_program.walk(values, held)
        if w is None:
            return None
        if w.collective and held is not None:
            # Replicas must agree on the program, and which buffers are still held can differ
            # between them (a dead tensor not yet collected): no donation here.
            w = graph_program.walk(values)
    saving = bool(os.environ.get("XLA_SAVE_TENSORS_FILE"))  # (`graph_save`)
    if saving:
        graph_save.save_sync(w, w.device)
    try:
        program = _execute(w, eager, walked)
    except replicated.GraphsDiffer:
        raise  # nothing failed: the values stay pending (`mark_step` gathers them again)
    except graph_program.LoweringError as e:
        error = lowering_failed(w, e.position, e.cause)
        for v in graph_program.dependent_roots(w, e.position):
            v.fail(error)
        raise error from e.cause
    except Exception as e:
        error = program_failed(w, e)
        for v in w.roots:
            v.fail(error)
        raise error from e
    if saving:
        graph_save.save_output_shardings(w.roots, w.device)
    return program


_eager_mode = [False]  # eager mode is on: every program runs as part of an eager op
_fused = [False]  # fused eager mode is on: a read runs every live pending tensor (`materialize`)
cuts = [0]  # how many times every live pending tensor was run: fused eager mode counts from it


def fuse_reads(enable: bool) -> None:
    """Whether a program run for a read also computes every live pending tensor of its
    device (`materialize`), as fused eager mode's cut at a host read (`eager_fused`)."""
    _fused[0] = bool(enable)


def time_as_eager(enable: bool) -> None:
    """Whether programs are timed as eager ops' (`_run_all`) even when not run as one: in
    eager mode a read inside an op (`allclose`) runs what the op traced."""
    _eager_mode[0] = bool(enable)


def _execute(w, eager=False, walked=True):
    """Runs walk `w` as its kind of program (`program_kinds`) and gives its roots their
    buffers: the `graph_program.Program` that ran (None: a program over the mesh or the
    replicas). A program of a walk made anew (`walked`) is remembered for the next step's
    look-up (`graph_cache`)."""
    eager = eager or _eager_mode[0]
    remember = (lambda program: graph_cache.remember(w, program)) if walked else None
    return program_kinds.of_walk(w).run(w, eager, remember)


def wait_device_ops() -> None:
    """Blocks until every buffer of a live tensor has been computed, and jax's effects ran;
    in fused eager mode, after running the live pending tensors (the ops issued so far)."""
    if _fused[0]:
        run_live(raise_earlier=False)
    replicated.settle()
    for v in live_values():
        if v.data is not None and not v.data.is_deleted():  # (a donated buffer: no result to wait for)
            v.data.block_until_ready()
    jax.effects_barrier()
    read_checks(take_launched())
