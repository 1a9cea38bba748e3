"""Waiting on the other processes of the runtime, bounded and explained.

A process that waits for its peers (a program with collectives spanning the processes, a
rendezvous, a barrier) would wait for ever for one that left: a replica that returned from
its function early, raised, or exited. Each process therefore says that it leaves, and how,
in `jax.distributed`'s key-value store (`announce_leaving`, called by xmp.spawn's processes and
at the exit of any process that joined a runtime), and a wait (`wait`) looks there each
second: once a peer has left and the awaited work has not finished within a short grace
(work that needed nothing more of the peer finishes within it), it raises `PeerLeft`,
naming who left, how, and what this process was waiting in. A peer killed outright is seen
by xmp.spawn's parent (which stops the rest) or by jax's coordination service.

The watchdog (off by default, as torch.distributed's NCCL watchdog is long by default):
`TORCH_XLA_WATCHDOG_TIMEOUT` seconds, or `torch_xla.debug.watchdog.set_watchdog`; a wait longer
than that prints what it waits on and the Python stacks of every thread of the process, once,
and with `TORCH_XLA_WATCHDOG_RAISE=1` (or `raise_error=True`) raises `WatchdogTimeout` instead
of waiting on. XLA_COLLECTIVE_TIMEOUT (default 600 s) bounds every wait in any case.
"""
import concurrent.futures
import faulthandler
import os
import sys
import time

import jax

from ..base import jax_compat

_LEFT = "torch_xla/left/"
_POLL_S = 1.0    # how often a wait looks for peers that left
_GRACE_S = 3.0   # how long work may still finish after a peer left
_watchdog = {}   # set by set_watchdog: {"timeout": seconds, "raise_error": bool}
_announced = []  # how this process said it leaves (the first saying is the most precise)


class CollectiveTimeout(RuntimeError):
    """A wait on the other processes did not end within XLA_COLLECTIVE_TIMEOUT seconds (a peer
    died or hangs)."""


class PeerLeft(RuntimeError):
    """A process this one waited for left the runtime (returned, raised or exited)."""


class WatchdogTimeout(RuntimeError):
    """A wait on the other processes outlasted the watchdog, set to raise."""


def _client():
    if not jax.distributed.is_initialized():
        return None
    return jax_compat.distributed_client()


def announce_leaving(how: str) -> None:
    """Tells the other processes that this one leaves the runtime, and `how` ("returned from
    its function", "raised ValueError: ..."), once: a later call says nothing. Nothing
    where the process joined no runtime."""
    client = _client()
    if client is None or _announced:
        return
    _announced.append(how)
    try:
        client.key_value_set(f"{_LEFT}{jax.process_index()}", how[:500], allow_overwrite=True)
    except Exception:  # noqa: BLE001  (the coordinator may be gone already: nothing to tell)
        pass


def peers_left() -> dict:
    """{process index: how it left} of the peers that announced leaving."""
    client = _client()
    if client is None:
        return {}
    try:
        entries = client.key_value_dir_get(_LEFT)
    except Exception:  # noqa: BLE001  (a coordinator that is gone: the timeout still bounds)
        return {}
    me = jax.process_index()
    left = {int(key.rsplit("/", 1)[1]): how for key, how in entries}
    left.pop(me, None)
    return left


def set_watchdog(timeout_s=None, raise_error=False) -> None:
    """Sets the watchdog: a wait on the other processes longer than `timeout_s` seconds
    prints what it waits on and every thread's stack (None: off; the variables again)."""
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"the watchdog's timeout must be a positive number of seconds, got {timeout_s}")
    _watchdog.clear()
    if timeout_s is not None:
        _watchdog.update(timeout=float(timeout_s), raise_error=bool(raise_error))


def watchdog() -> tuple:
    """(timeout in seconds or None, raise) as set, or from TORCH_XLA_WATCHDOG_TIMEOUT and
    TORCH_XLA_WATCHDOG_RAISE."""
    if _watchdog:
        return _watchdog["timeout"], _watchdog["raise_error"]
    return (_seconds("TORCH_XLA_WATCHDOG_TIMEOUT", None),
            os.environ.get("TORCH_XLA_WATCHDOG_RAISE", "0") not in ("", "0"))


def collective_timeout() -> float:
    return _seconds("XLA_COLLECTIVE_TIMEOUT", 600.0)


def _seconds(name, default):
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a number of seconds") from None
    return value if value > 0 else default


def wait(future, what: str):
    """The result of `future` (a `concurrent.futures.Future` of work that needs the other
    processes), waited for as the module says; `what` names the work in messages."""
    start = time.monotonic()
    timeout = collective_timeout()
    alarm, raise_error = watchdog()
    reported = False
    left_since = None
    while True:
        try:
            return future.result(_POLL_S)
        except concurrent.futures.TimeoutError:
            pass
        waited = time.monotonic() - start
        if waited >= timeout:
            raise CollectiveTimeout(
                f"{what} did not finish within {timeout:g} s (XLA_COLLECTIVE_TIMEOUT): another "
                "process has probably died or stopped taking part in the collectives")
        if alarm is not None and waited >= alarm and not reported:
            reported = True
            _report(what, waited)
            if raise_error:
                raise WatchdogTimeout(f"{what} has waited {waited:.0f} s, more than the watchdog's "
                                      f"{alarm:g} s (TORCH_XLA_WATCHDOG_TIMEOUT)")
        left = peers_left()
        if left and left_since is None:
            left_since = time.monotonic()
        elif left and time.monotonic() - left_since >= _GRACE_S:
            who = "; ".join(f"process {i} {how}" for i, how in sorted(left.items()))
            raise PeerLeft(f"a peer left the runtime while process {jax.process_index()} waited "
                           f"for it in {what}: {who}")


def _report(what, waited) -> None:
    """What this process waits on, and every thread's Python stack, on stderr."""
    print(f"torch_xla watchdog: process {jax.process_index()} of {jax.process_count()} has "
          f"waited {waited:.0f} s in {what}; no peer has said it left. Its threads:",
          file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
