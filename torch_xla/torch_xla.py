"""The top-level torch_xla functions: devices, steps (`sync`, `compile`, `step`), `launch`
and `manual_seed` (re-exported by `torch_xla/__init__.py`)."""
import contextlib
import functools
import os
import sys
import uuid
import weakref

import torch
import torch.distributed as dist

import torch_xla.debug.metrics as met
import torch_xla.debug.metrics_saver as metrics_saver
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.utils.utils as xu
from torch_xla.core.device_names import get_xla_supported_devices
from torch_xla.utils import closures
from torch_xla._lazy.hooks import device as _device
from torch_xla._lazy.runtime import device_info as _device_info
from torch_xla._lazy.graph import dynamic_shape_detector as _detector
from torch_xla._lazy.graph import rng as _rng
from torch_xla._lazy.trace import eager as _eager
from torch_xla._lazy.runtime import graph_analysis as _analysis
from torch_xla._lazy.runtime import pjrt as _pjrt
from torch_xla._lazy.step import execution as _execution
from torch_xla._lazy.base import scopes

__all__ = ["device", "devices", "real_devices", "device_count", "sync", "step", "compile",
           "manual_seed", "launch", "set_custom_compile_options"]


def device(index: int = None) -> torch.device:
    """The XLA device `index` of this process (default: this thread's device: the one
    `xm.set_replication` or DataParallel gave it, else xla:0).

    Unlike torch_xla, asking for device `index` does not make it the thread's default
    device: here that default says which replica the thread is (see `xm.set_replication`).
    """
    _device.prepare()
    if index is None:
        return torch.device(_device_info.default_device())
    names = get_xla_supported_devices()
    if not 0 <= index < len(names):
        raise IndexError(f"Device index {index} out of range in {names}")
    return torch.device(names[index])


def devices():
    """Every XLA device this process drives."""
    return [torch.device(d) for d in get_xla_supported_devices()]


def real_devices():
    """The runtime's names of this process's devices: ['CPU:0', 'CPU:1', ...] (the number is
    the device's global index in the runtime)."""
    return _device_info.real_devices()


def device_count() -> int:
    """Devices this process drives."""
    return len(real_devices())


def sync(wait: bool = False, reset_scope: bool = True, *, _reason=("user torch_xla.sync",),
         _raise_earlier=True) -> None:
    """Ends the step: runs every pending computation (one program per device; on a
    DataParallel thread, its device's), then the closures `xm.add_step_closure` queued.

    `wait` (or XLA_SYNC_WAIT=1) blocks until the programs have run; under XLA_METRICS_FILE
    the metrics report is appended to that file (`debug.metrics_saver`). With `reset_scope`,
    a step may not end inside a profiler `Trace` region (RuntimeError naming it, once the
    programs ran). (Internal: `_reason`, graph_analysis's cause and name of the programs;
    without `_raise_earlier`, the checks of the programs launched before are read only where
    finished, not waited for: the failed and the unread raise at the next sync. Both are
    keywords of this function, not of a helper, so that the analysis names `sync` as the
    frame that ended the step.)
    """
    if xu.getenv_as('XLA_EMIT_STEPLOG', bool, False):
        print('torch_xla.torch_xla::sync', file=sys.stderr, flush=True)
    with _analysis.reason(*_reason):
        _execution.mark_step(wait=xu.getenv_as('XLA_SYNC_WAIT', bool, wait), raise_earlier=_raise_earlier)
    if reset_scope:
        scopes.reset()
    if "XLA_METRICS_FILE" in os.environ and _pjrt.local_ordinal() == 0:  # once, not per replica
        metrics_saver.save_metrics()
    closures.run_step_closures()


def manual_seed(seed, device=None) -> None:
    """Seeds the random generator of XLA device `device` (default: this thread's)."""
    _rng.manual_seed(seed, _rng_index(device))


def _rng_index(d) -> int:
    """The index of the XLA device whose random state `d` names (default: this thread's)."""
    return device().index if d is None else torch.device(d).index or 0


def _executions() -> int:
    return (met.counter_value("UncachedCompile") or 0) + (met.counter_value("CachedCompile") or 0)


# The live functions torch_xla.compile has named detector sessions after, by session name: a
# session whose function is gone is dropped, so that a new function given the same id (and
# name) starts afresh.
_session_functions = weakref.WeakValueDictionary()


def _detector_session(f, name) -> str:
    """The dynamic shape detector's session name for compiled function `f` (a fresh one for
    a `with` region)."""
    if f is None:
        return str(uuid.uuid4())
    session = f"{name}_{id(f)}"
    if session not in _session_functions:
        _detector.remove_session(session)
    try:
        _session_functions[session] = f
    except TypeError:  # `f` takes no weak reference: its session lives with the process
        pass
    return session


def compile(f=None, full_graph: bool = False, name: str = None, max_different_graphs: int = None,
            custom_compile_options: dict = None):
    """Runs `f` (or, without `f`, the body of a `with torch_xla.compile():`) as one graph: the
    pending computations are run first, the function's operations are traced, and its graph
    is compiled (once per distinct graph) and run when it returns.

    `full_graph=True`: raise if anything inside ran a graph before the end (a `.item()`,
    printing a tensor, an explicit sync); here the error comes when the function returns.
    `max_different_graphs=N`: raise when the function has traced more than N different
    graphs (each new one means a compilation). `name` names the function in those errors.
    `custom_compile_options`: see `set_custom_compile_options`.
    """
    if name is None and f is not None:
        name = getattr(f, "__name__", None) or str(f)
    if custom_compile_options is not None:
        set_custom_compile_options(custom_compile_options)
    session = None if max_different_graphs is None else _detector_session(f, name)

    @contextlib.contextmanager
    def region():
        eager = _eager.enabled()
        _eager.set_enabled(False)  # the function is traced, in eager mode too
        try:
            # what is pending runs first; the checks of the call before are not waited for
            # here (read at this call's end): its tracing overlaps that call's program, as
            # in torch_xla, whose sync has no checks to read
            sync(_reason=("torch_xla.compile clear the pending graph prior calling the target "
                          "function", f"{name}_clear_pending" if name else ""), _raise_earlier=False)
            before = _executions()
            if session is not None:
                _detector.set_max_different_graphs(max_different_graphs)
                _detector.start_session(session)
            try:
                try:
                    yield
                finally:
                    if session is not None:
                        _detector.end_session()  # raises if this graph is one too many
            except BaseException:
                sync()  # what the body traced before it raised runs, as in torch_xla
                raise
            ran = _executions() - before
            with _analysis.reason("torch_xla.compile", name or ""):
                sync()
        finally:
            _eager.set_enabled(eager)
        if full_graph and ran:
            raise RuntimeError(
                f"Unexpected execution happens inside the compiled function, exiting: "
                f"torch_xla.compile({name or 'region'}, full_graph=True): {ran} graph(s) ran before "
                f"the end of the function (a .item(), a print of a tensor, a transfer to the CPU "
                f"or an explicit sync inside it), so it is not one graph")

    if f is None:
        return region()

    @functools.wraps(f)
    def compiled(*args, **kwargs):
        with region():
            return f(*args, **kwargs)
    return compiled


def step():
    """`with torch_xla.step():` runs its body as one step: pending work first, the body's
    graph at the end (`compile()` as a context manager)."""
    return compile()


def set_custom_compile_options(options: dict) -> None:
    """XLA compiler option overrides for later compilations. An empty dict clears them.

    The engine compiles every program with jax's default compile options, and takes no
    per-program overrides yet: a non-empty `options` raises. XLA_FLAGS (read by XLA when
    the runtime starts) sets compiler flags for the whole process.
    """
    if options:
        raise NotImplementedError(
            "torch_xla custom compile options: this engine compiles with jax's default "
            f"options and takes no overrides ({sorted(options)}); set XLA_FLAGS before the first "
            "computation instead")


def launch(fn, args=(), start_method: str = 'spawn', debug_single_process: bool = False):
    """Runs `fn(index, *args)` on every device, one process each (`xmp.spawn`), and returns
    when all have ended. Under torchelastic (torchrun) the launcher made the processes:
    `fn(LOCAL_RANK, *args)` runs in this one, which joins the others through torchrun's
    variables (`_lazy/runtime/hosts`). `debug_single_process`: run `fn(0, *args)` in
    this process only."""
    if dist.is_torchelastic_launched():
        fn(xu.getenv_as("LOCAL_RANK", int), *args)
    else:
        xmp.spawn(fn, args=args, nprocs=1 if debug_single_process else None, start_method=start_method)
