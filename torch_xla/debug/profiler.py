"""torch_xla.debug.profiler (imported as `xp`): traces of what runs, through jax's profiler.

A trace directory holds `plugins/profile/<run>/<host>.xplane.pb`, which TensorBoard's
profile plugin (and xprof) open, and, with `create_perfetto_trace=True` (the default
here), a `perfetto_trace.json.gz` that https://ui.perfetto.dev opens. `Trace` and
`StepTrace` name regions of host code in the trace; compilations and executions of the
XLA programs appear under them.
"""
import functools
import sys
import threading
import time
import weakref

import jax.profiler

import torch_xla.runtime as xr
from torch_xla._lazy.runtime import graph_analysis
from torch_xla._lazy.base import scopes

class ProfilerServer:
    """This process's profiler server (jax's, on `port`), as torch_xla's object: the server
    runs while the object lives and shuts down when it is collected (or by `stop_server`),
    after the captures in progress through it (`trace`) are written, as torch_xla's server
    finishes the requests it serves before it shuts down."""

    def __init__(self, port: int):
        jax.profiler.start_server(port)
        self.port, self.running = port, True

    def shut_down(self) -> None:
        if not self.running or sys.is_finalizing():
            return
        self.running = False
        me = threading.current_thread()
        with _captures:
            _captures.wait_for(lambda: not _capturing - {me})
            jax.profiler.stop_server()

    __del__ = shut_down


_server = [lambda: None]  # a weak reference to the running ProfilerServer
_captures = threading.Condition()  # guards _capturing: the threads capturing a trace
_capturing = set()


def start_server(port: int, only_on_master: bool = True):
    """Starts the profiler server of this process on `port` (tools such as TensorBoard's
    "capture profile" connect to it) and returns it: a `ProfilerServer`, which serves while
    the caller keeps it. With `only_on_master`, processes other than the local master start
    none and get None. Starting it again on the port it serves returns the running server;
    jax serves one port per process (ValueError for another)."""
    if only_on_master and xr.local_ordinal() != 0:
        return None
    server = _server[0]()
    if server is not None and server.running and server.port == int(port):
        return server
    server = ProfilerServer(int(port))
    _server[0] = weakref.ref(server)
    return server


def stop_server() -> None:
    """Shuts the running profiler server down (after the captures in progress)."""
    server = _server[0]()
    if server is not None:
        server.shut_down()


def _serving_port():
    server = _server[0]()
    return server.port if server is not None and server.running else None


def _options(host_tracer_level=2, python_tracer_level=0):
    """Profile options; Python function tracing is off by default: it slows everything
    traced many times over."""
    options = jax.profiler.ProfileOptions()
    options.host_tracer_level = host_tracer_level
    options.python_tracer_level = python_tracer_level
    options.enable_hlo_proto = True
    return options


def start_trace(log_dir: str, create_perfetto_trace: bool = True, profiler_options=None,
                **levels) -> None:
    """Starts tracing this process; `stop_trace` writes the trace under `log_dir`.

    `levels`: `host_tracer_level`, `python_tracer_level` (or a
    ready `jax.profiler.ProfileOptions` as `profiler_options`)."""
    jax.profiler.start_trace(log_dir, create_perfetto_trace=create_perfetto_trace,
                             profiler_options=profiler_options or _options(**levels))


def stop_trace() -> None:
    jax.profiler.stop_trace()


def _local_port(service_addr: str):
    host, _, port = service_addr.rpartition(":")
    if host in ("localhost", "127.0.0.1", "[::1]", "") and port.isdigit():
        return int(port)
    return None


def trace(service_addr: str, logdir: str, duration_ms: int = 1000, num_tracing_attempts: int = 3,
          host_tracer_level: int = 2, device_tracer_level: int = 1, delay_ms: int = 0, **kwargs) -> None:
    """Captures `duration_ms` of activity into `logdir` (blocking), from the profiler server
    at `service_addr`.

    The server must be this process's own (`start_server` on that port): jaxlib ships no
    client for capturing from another process, which TensorBoard's profile plugin does.
    `num_tracing_attempts` and `device_tracer_level` are accepted for torch_xla's
    signature; jax's profiler always traces the devices it drives.
    """
    port = _local_port(service_addr)
    with _captures:
        if port is None or port != _serving_port():
            raise NotImplementedError(
                f"capturing from {service_addr!r}: only this process's own profiler server "
                f"(start_server on localhost) can be traced here; use TensorBoard's profile "
                f"plugin to capture another process")
        _capturing.add(threading.current_thread())
    try:
        time.sleep(delay_ms / 1000)
        start_trace(logdir, host_tracer_level=host_tracer_level,
                    python_tracer_level=kwargs.get("python_tracer_level", 0))
        try:
            time.sleep(duration_ms / 1000)
        finally:
            stop_trace()
    finally:
        with _captures:
            _capturing.discard(threading.current_thread())
            _captures.notify_all()


def trace_detached(*args, **kwargs) -> threading.Thread:
    """`trace` in a background thread, so the caller's code runs while it records."""
    thread = threading.Thread(target=trace, args=args, kwargs=kwargs, daemon=True)
    thread.start()
    return thread


class Trace(jax.profiler.TraceAnnotation):
    """Names the code run inside `with Trace(name, **metadata):` in the trace. As in
    torch_xla, the region is a scope: a step may not end inside it (`torch_xla.sync()`
    there raises RuntimeError naming the scope)."""

    def __init__(self, name: str, **kwargs):
        self.name = name
        super().__init__(name, **kwargs)

    def __enter__(self):
        scopes.push(self.name)
        self._scoped = True
        return super().__enter__()

    def _close_scope(self):
        if getattr(self, "_scoped", False):
            self._scoped = False
            scopes.pop()

    def __exit__(self, *exc):
        self._close_scope()
        return super().__exit__(*exc)


class StepTrace(Trace):
    """A training step in the trace (`with StepTrace('train', step_num=i):`); like
    torch_xla's, it ends the step (`mark_step`) on exit, its scope closed first, so the
    step's program runs inside the region."""

    def __init__(self, name: str, **kwargs):
        self.name = name
        jax.profiler.TraceAnnotation.__init__(self, name, _r=1, **kwargs)

    def __exit__(self, *exc):
        import torch_xla
        self._close_scope()
        try:
            with graph_analysis.reason("torch_xla.sync when exiting a profiler StepTrace region"):
                torch_xla.sync()
        finally:
            super().__exit__(*exc)


def trace_me(name: str):
    """Decorator: each call of the function is a `Trace` region called `name`."""
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with Trace(name):
                return fn(*args, **kwargs)
        return wrapper
    return decorator
