"""Preemption notices, what a checkpoint manager asks before each step.

One process learns of a preemption by a SIGTERM (the handler installed while notices are
active; the handler before it still runs); several processes agree on the step through jax's
preemption sync point (its coordination service watches the signal there). A notice is
reported at one step, the first asked after it came (the sync point), as jax's sync point
reports it: asked again, that step is still the sync point, any other is not.
"""
import signal
import threading

from torch_xla._lazy.runtime import pjrt

_state = {"active": False, "seen": False, "previous": None, "sync_step": None}


def activate() -> None:
    """Starts watching for a preemption notice (again a no-op while active)."""
    if _state["active"]:
        return
    _state.update(active=True, seen=False, previous=None, sync_step=None)
    if pjrt.process_count() == 1 and threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum, frame):
            _state["seen"] = True
            if callable(previous):
                previous(signum, frame)
        signal.signal(signal.SIGTERM, on_sigterm)
        _state["previous"] = previous


def deactivate() -> None:
    """Stops watching (the SIGTERM handler before `activate` back in place)."""
    if _state["active"] and _state["previous"] is not None:
        signal.signal(signal.SIGTERM, _state["previous"])
    _state.update(active=False, seen=False, previous=None, sync_step=None)


def reached(step: int) -> bool:
    """Whether `step` is the sync point after a preemption notice."""
    if not _state["active"]:
        raise RuntimeError("preemption notices are not watched: activate the preemption sync "
                           "manager first (torch_xla._XLAC._activate_preemption_sync_manager)")
    if pjrt.process_count() > 1:
        from jax.experimental import multihost_utils
        return multihost_utils.reached_preemption_sync_point(step)
    if _state["seen"] and _state["sync_step"] is None:
        _state["sync_step"] = step
    return step == _state["sync_step"]
