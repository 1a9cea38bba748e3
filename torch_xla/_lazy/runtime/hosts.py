"""How the processes of one runtime, on one host or several, find each other.

A launcher tells each process where it stands. xmp.spawn (or a launcher of the user's) sets
TORCH_XLA_* variables (listed in `_lazy/runtime/pjrt`); torchrun sets its own (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), read
here into the TORCH_XLA_* ones at import, before anything asks.

The coordinator (jax.distributed's coordination service, run by process 0) listens at
`TORCH_XLA_COORDINATOR`; under torchrun at MASTER_ADDR and XLA_COORDINATOR_PORT (upstream's
variable) or, by default, a port that process 0 finds free and publishes through torchrun's
own store (at MASTER_ADDR:MASTER_PORT), so that no fixed port is needed.

CPU collectives run over gloo, whose every process listens at the address its host name
resolves to. Where that is a loopback address (as in many containers), peers on other
hosts could never connect; gloo is given instead the address this host reaches the
coordinator from.
"""
import atexit
import datetime
import os
import socket
import sys

import jax

from ..base import jax_compat
from . import peer_watch

_COORDINATOR_KEY = "torch_xla/coordinator"


def adopt_torchrun_layout() -> None:
    """Under torchrun (torchelastic), the TORCH_XLA_* layout from torchrun's variables, where
    the user has not set it. On a GPU host with several processes, each drives the device
    of its local rank."""
    env = os.environ
    if "TORCHELASTIC_RUN_ID" not in env or "RANK" not in env:
        return
    env.setdefault("TORCH_XLA_NUM_PROCESSES", env["WORLD_SIZE"])
    env.setdefault("TORCH_XLA_PROCESS_ID", env["RANK"])
    env.setdefault("TORCH_XLA_LOCAL_PROCESS_ID", env["LOCAL_RANK"])
    env.setdefault("TORCH_XLA_NUM_HOSTS", env.get("GROUP_WORLD_SIZE", "1"))
    env.setdefault("TORCH_XLA_HOST_INDEX", env.get("GROUP_RANK", "0"))
    on_cpu = env.get("PJRT_DEVICE", "CPU").upper() == "CPU"
    if not on_cpu and int(env.get("LOCAL_WORLD_SIZE", "1")) > 1:
        env.setdefault("TORCH_XLA_LOCAL_DEVICE", env["LOCAL_RANK"])


def coordinator() -> str:
    """host:port of the coordination service: TORCH_XLA_COORDINATOR, else (torchrun)
    MASTER_ADDR with XLA_COORDINATOR_PORT or a port agreed through torchrun's store."""
    given = os.environ.get("TORCH_XLA_COORDINATOR")
    if given:
        return given
    if "MASTER_ADDR" not in os.environ:
        raise RuntimeError(
            "a runtime of several processes needs its coordinator's address: set "
            "TORCH_XLA_COORDINATOR=host:port (a free port on the host of process 0), or launch "
            "with torchrun (MASTER_ADDR)")
    host = os.environ["MASTER_ADDR"]
    port = os.environ.get("XLA_COORDINATOR_PORT") or _agreed_port(host)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    os.environ["TORCH_XLA_COORDINATOR"] = address  # children and later readers agree
    return address


def _join_timeout_s() -> float:
    """How long joining may wait for the other processes (TORCH_XLA_JOIN_TIMEOUT, seconds)."""
    return float(os.environ.get("TORCH_XLA_JOIN_TIMEOUT", "300"))


def _agreed_port(host) -> str:
    """A port process 0 finds free on its host, published through torchrun's store (its
    agent's, which torchrun's workers may use)."""
    import torch.distributed as dist
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        raise RuntimeError(
            "the coordinator's port: set XLA_COORDINATOR_PORT (a port free on MASTER_ADDR's host) "
            "or TORCH_XLA_COORDINATOR=host:port; without them it is agreed through torchrun's "
            "agent store, which this launcher does not provide")
    timeout = datetime.timedelta(seconds=_join_timeout_s())
    store = dist.TCPStore(host, int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout)
    key = f"{_COORDINATOR_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    if os.environ["TORCH_XLA_PROCESS_ID"] == "0":
        with socket.socket(_family(host), socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            store.set(key, str(s.getsockname()[1]))
    return store.get(key).decode()


def _family(host):
    return socket.getaddrinfo(host, None)[0][0]


def local_address(coordinator_address: str) -> str:
    """The address of this host that its packets to the coordinator leave from (no packet
    is sent: a UDP socket's connect only picks the route)."""
    host = coordinator_address.rpartition(":")[0].strip("[]")
    with socket.socket(_family(host), socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        return s.getsockname()[0]


def join(platform: str) -> None:
    """Joins this process to the runtime's others through jax.distributed, before jax's
    backends start. Heartbeats and shutdown wait as upstream's variables say
    (DIST_SERVICE_HEARTBEAT_INTERVAL_IN_SEC: seconds without a heartbeat before a process
    counts as lost, default 100; DIST_SERVICE_SHUTDOWN_TIMEOUT_IN_MIN, default 5)."""
    address = coordinator()
    local = os.environ.get("TORCH_XLA_LOCAL_DEVICE")
    jax.distributed.initialize(
        coordinator_address=address, num_processes=int(os.environ["TORCH_XLA_NUM_PROCESSES"]),
        process_id=int(os.environ["TORCH_XLA_PROCESS_ID"]),
        local_device_ids=None if local is None else [int(local)],
        coordinator_bind_address=os.environ.get("TORCH_XLA_COORDINATOR_BIND", address),
        initialization_timeout=int(_join_timeout_s()),
        heartbeat_timeout_seconds=int(os.environ.get("DIST_SERVICE_HEARTBEAT_INTERVAL_IN_SEC", "100")),
        shutdown_timeout_seconds=60 * int(os.environ.get("DIST_SERVICE_SHUTDOWN_TIMEOUT_IN_MIN", "5")))
    if platform == "cpu":
        _use_gloo_at(local_address(address))
    _leave_at_once_on_error()
    # before jax's own exit handler (registered earlier), which waits for every process
    atexit.register(peer_watch.announce_leaving, "ended (its program exited)")


def _leave_at_once_on_error() -> None:
    """An error that ends the process ends it at once, after its traceback: jax's exit
    handler would wait at a shutdown barrier for every other process (up to the shutdown
    timeout, or until a lost one misses its heartbeats), while the others may be waiting
    for this one or be gone. Leaving closes this process's connections, so peers in a
    collective with it fail at once, naming its address, rather than hang."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        peer_watch.announce_leaving(f"raised {kind.__name__}: {value}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    sys.excepthook = hook


def _use_gloo_at(address: str) -> None:
    """CPU collectives over gloo, listening at `address`: jax's CPU client made with gloo
    collectives given that address (jax's own choice is the host name's address)."""
    from jax.extend.backend import register_backend_factory
    register_backend_factory("cpu", jax_compat.cpu_client_factory_with_gloo(address),
                             priority=0, fail_quietly=False)


_first_launches = [0]


def spans_processes(compiled) -> bool:
    """Whether a compiled program (jax's `Compiled`) runs on devices of other processes too."""
    if not jax.distributed.is_initialized() or jax.process_count() == 1:
        return False
    me = jax.process_index()
    shardings = jax.tree.leaves((compiled.input_shardings, compiled.output_shardings))
    return any(d.process_index != me for s in shardings
               for d in s.device_set)


def meet_before_first_launch() -> None:
    """Waits until every process is about to launch the same new program spanning them (the
    programs spanning processes are launched in the same order by all). The first launch of
    such a program sets up its collectives' connections (gloo's on the CPU), which fails
    when a peer comes more than 30 s later, as a process still compiling on a busy host
    does; a meeting here waits as long as joining may (TORCH_XLA_JOIN_TIMEOUT)."""
    _first_launches[0] += 1
    jax_compat.distributed_client().wait_at_barrier(
        f"torch_xla_first_launch_{_first_launches[0]}", int(_join_timeout_s() * 1000))
