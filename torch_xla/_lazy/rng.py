"""The per-device random state: a seed and an offset that each random op advances.

A random op's key is `fold_in(PRNGKey(seed), offset)`; both are program parameters, so a
training loop with dropout reuses one compiled program while every step draws new masks.
`torch.manual_seed` reseeds every XLA device (through PyTorch's hook for out-of-tree
devices), which makes runs reproducible.
"""
import threading

import torch

_lock = threading.Lock()
_state = {}            # device index -> [seed, offset]
_seed = [None]         # the last seed given for all devices; None: torch's initial seed


def _initial_seed() -> int:
    seed = _seed[0]
    return (torch.initial_seed() if seed is None else seed) & 0x7FFF_FFFF_FFFF_FFFF


def next_seed_offset(device: int):
    with _lock:
        state = _state.get(device)
        if state is None:
            state = _state[device] = [_initial_seed(), 0]
        state[1] += 1
        return (state[0], state[1])


def manual_seed(seed: int, device=None) -> None:
    seed = int(seed) & 0x7FFF_FFFF_FFFF_FFFF
    with _lock:
        if device is None:
            _seed[0] = seed
            _state.clear()
        else:
            _state[device] = [seed, 0]


def get_state(device: int):
    with _lock:
        return tuple(_state.get(device) or (_initial_seed(), 0))


def set_state(device: int, state) -> None:
    seed, offset = state if isinstance(state, (tuple, list)) else (state, 0)
    with _lock:
        _state[device] = [int(seed), int(offset)]
