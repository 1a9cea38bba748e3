"""xmp.spawn: one process per XLA device, joined into one runtime by jax.distributed.

Each process drives one device (its `xla:0`) and knows every device of the runtime; collectives
between them run inside the compiled programs (gloo carries them between CPU processes).

The coordinator (process 0's coordination service) listens on a free loopback port unless
`TORCH_XLA_COORDINATOR=host:port` is set (then there, or where `TORCH_XLA_COORDINATOR_BIND`
says). When a process fails, the others are killed at once and `spawn` raises with the
failed one's traceback or exit signal. A process that returns, raises or exits says so to
the others, so one waiting for it in a collective fails within seconds, naming it
(`_lazy/runtime/peer_watch`; a collective whose peer hangs ends after XLA_COLLECTIVE_TIMEOUT seconds,
and the watchdog, TORCH_XLA_WATCHDOG_TIMEOUT, reports long waits). The processes die with
the parent. Several hosts join one runtime by running `spawn`
on each with the same `TORCH_XLA_COORDINATOR` (reachable from all of them), and with
`TORCH_XLA_NUM_HOSTS` (how many) and `TORCH_XLA_HOST_INDEX` (this one's index) set.
"""
import multiprocessing
import multiprocessing.connection
import os
import socket
import sys
import traceback

from torch_xla._lazy.runtime import peer_watch, pjrt


class ProcessExitedException(RuntimeError):
    """A spawned process failed: raised an exception (its traceback is in the message) or
    died with a signal or a nonzero exit code."""

    def __init__(self, msg, error_index, exit_code=None):
        super().__init__(msg)
        self.error_index = error_index
        self.exit_code = exit_code


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _device_count() -> int:
    """How many processes `spawn` starts: CPU_NUM_DEVICES on the CPU, GPU_NUM_DEVICES on GPUs
    (read without starting the runtime, which would hold the GPUs' memory in this process),
    else every local device."""
    kind = pjrt.device_type()
    if kind == "CPU":
        return int(os.environ.get("CPU_NUM_DEVICES", "1"))
    if kind == "CUDA" and os.environ.get("GPU_NUM_DEVICES"):
        return int(os.environ["GPU_NUM_DEVICES"])
    return len(pjrt.jax_devices())


def _child(index, fn, args, layout, errors):
    """A spawned process: joins the runtime, runs fn(index, *args). On an error it reports
    the traceback and leaves at once (os._exit: jax's exit handler would wait for the others
    at a shutdown barrier). On success it leaves as a process ends (`_leave`). Either way it
    first tells the other processes that it leaves, and how (`peer_watch`): one waiting for
    it in a collective then fails, naming it, instead of waiting for ever. It dies with its
    parent (a killed `spawn` leaves no process behind)."""
    _die_with_parent()
    try:
        os.environ.update(layout)
        if pjrt.device_type() == "CPU":
            os.environ["CPU_NUM_DEVICES"] = "1"
        else:
            os.environ["TORCH_XLA_LOCAL_DEVICE"] = str(index)
        pjrt.jax_devices()  # joins the runtime before anything else touches jax
        fn(index, *args)
    except SystemExit as e:
        if e.code not in (None, 0):  # sys.exit(0) is a success, as for a process (torch_xla's tests end so)
            _fail(errors, f"exited (sys.exit({e.code!r}))")
    except BaseException as e:  # noqa: BLE001  (reported to the parent, which raises it)
        _fail(errors, f"raised {type(e).__name__}: {e}")
    peer_watch.announce_leaving("returned from its function")
    _leave()


def _die_with_parent() -> None:
    """Asks Linux to kill this process when its parent dies (PR_SET_PDEATHSIG); elsewhere
    nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _fail(errors, how):
    """Tells the others it leaves, reports the traceback and leaves at once."""
    peer_watch.announce_leaving(how)
    errors.send(traceback.format_exc())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _leave():
    """Ends a spawned process that succeeded: what a process does at its end (the user's
    threads finish, multiprocessing's finalizers flush queues, atexit handlers run, jax's
    among them), then os._exit, which skips tearing the interpreter's objects down: with
    the runtime's collectives set up, that teardown alone takes several seconds."""
    import atexit
    import multiprocessing.util
    import threading
    threading._shutdown()
    multiprocessing.util._exit_function()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn(fn, args=(), nprocs=None, join=True, daemon=False, start_method="spawn"):
    """Runs `fn(index, *args)` in one process per device (`nprocs=None`: all of them; 1: in
    this process) and returns when all have ended. When one fails, the others are stopped and
    `ProcessExitedException` carries its error."""
    count = _device_count() if nprocs is None else int(nprocs)
    if count < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    hosts = int(os.environ.get("TORCH_XLA_NUM_HOSTS", "1"))
    if count == 1 and hosts == 1:
        fn(0, *args)
        return None
    run_processes(fn, args, count, daemon, start_method)
    return None


def run_processes(fn, args, count, daemon=False, start_method="spawn") -> None:
    """Runs `fn(index, *args)` in `count` new processes (on each host) joined into one
    runtime, and returns when all have ended (raises as `spawn` does)."""
    hosts = int(os.environ.get("TORCH_XLA_NUM_HOSTS", "1"))
    import torch_xla.runtime as xr
    if start_method == "fork" and xr.is_initialized():
        raise RuntimeError("Runtime is already initialized: with start_method='fork' the processes "
                           "would inherit it. Do not use the XLA device before calling xmp.spawn.")
    host = int(os.environ.get("TORCH_XLA_HOST_INDEX", "0"))
    coordinator = os.environ.get("TORCH_XLA_COORDINATOR") or f"127.0.0.1:{_free_port()}"
    ctx = multiprocessing.get_context(start_method)
    procs, pipes = [], []
    try:
        for i in range(count):
            layout = {"TORCH_XLA_COORDINATOR": coordinator, "TORCH_XLA_NUM_PROCESSES": str(hosts * count),
                      "TORCH_XLA_PROCESS_ID": str(host * count + i), "TORCH_XLA_LOCAL_PROCESS_ID": str(i)}
            reader, writer = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(i, fn, args, layout, writer), daemon=daemon)
            p.start()
            writer.close()
            procs.append(p)
            pipes.append(reader)
        _join(procs, pipes)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()


def _join(procs, pipes):
    """Waits for every process; at the first failure stops the rest and raises its error."""
    waiting = {p.sentinel: i for i, p in enumerate(procs)}
    waiting.update({r: i for i, r in enumerate(pipes)})
    while any(isinstance(w, int) for w in waiting):
        for ready in multiprocessing.connection.wait(list(waiting)):
            i = waiting.pop(ready)
            if not isinstance(ready, int):  # an error report, or end of file
                try:
                    error = ready.recv()
                except EOFError:
                    continue
                _stop(procs)
                raise ProcessExitedException(
                    f"\n\n-- Process {i} terminated with the following error:\n{error}", i)
            procs[i].join()
            code = procs[i].exitcode
            if code != 0:
                try:  # it may have reported its error just before exiting
                    error = pipes[i].recv() if pipes[i].poll(1) else None
                except EOFError:
                    error = None
                _stop(procs)
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                detail = f" with the following error:\n{error}" if error else f" with {how}"
                raise ProcessExitedException(f"\n\n-- Process {i} terminated{detail}", i, code)


def _stop(procs):
    """Kills the processes still running (SIGKILL: jax handles SIGTERM as a preemption
    notice and keeps running)."""
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(5)


class MpModelWrapper:
    """Holds a model for `spawn`ed processes (kept for torch_xla compatibility): `to(device)`
    gives the model on the device."""

    def __init__(self, model):
        self._model = model

    def to(self, device):
        return self._model.to(device)
