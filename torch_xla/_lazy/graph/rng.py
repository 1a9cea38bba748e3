"""The per-device random state: one 63-bit integer that each random op reads and advances.

A random op's key is `PRNGKey(state)`, passed as a program parameter, so a training loop
with dropout reuses one compiled program while every step draws new masks. The state is a
single number, as in torch_xla, so `xm.get_rng_state()`/`xm.set_rng_state()` save and
restore it exactly. `torch.manual_seed` reseeds every XLA device.
"""
import contextlib
import threading

import torch

_MASK = 0x7FFF_FFFF_FFFF_FFFF
_lock = threading.Lock()
_state = {}            # device index -> current state
_seed = [None]         # the last seed given for all devices; None: torch's initial seed


def _initial_seed() -> int:
    seed = _seed[0]
    return (torch.initial_seed() if seed is None else seed) & _MASK


def _advance(state: int) -> int:
    """A 64-bit LCG step (Knuth's MMIX constants), kept to 63 bits for an int64 parameter."""
    return (state * 6364136223846793005 + 1442695040888963407) & _MASK


def next_seed(device: int) -> int:
    """The seed for the next random op on `device`; advances the device's state."""
    with _lock:
        state = _state.get(device)
        if state is None:
            state = _initial_seed()
        _state[device] = _advance(state)
        return state


def seeds_from(seed: int, n: int) -> list:
    """The seeds `n` random ops draw after `manual_seed(seed)` (a traced function's random
    ops reseeded by its caller: `_lazy/trace/traced`)."""
    out, state = [], int(seed) & _MASK
    for _ in range(n):
        out.append(state)
        state = _advance(state)
    return out


def manual_seed(seed: int, device=None) -> None:
    seed = int(seed) & _MASK
    with _lock:
        if device is None:
            _seed[0] = seed
            _state.clear()
        else:
            _state[device] = seed


def get_state(device: int) -> int:
    with _lock:
        state = _state.get(device)
        return _initial_seed() if state is None else state


def set_state(device: int, state: int) -> None:
    with _lock:
        _state[device] = int(state) & _MASK


@contextlib.contextmanager
def fork(device: int):
    """Restores the random state of `device` on leaving the block."""
    state = get_state(device)
    try:
        yield
    finally:
        set_state(device, state)
