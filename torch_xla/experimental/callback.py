"""Callbacks on a tensor's device buffer being ready (computed), without blocking."""
import threading
from typing import Callable

import torch

from torch_xla._lazy.trace import ready as _ready

__all__ = ["on_ready_callback", "on_ready_event"]


def on_ready_callback(tensor: torch.Tensor, callback: Callable[[torch.Tensor], None]) -> None:
    """Calls `callback(tensor)` once `tensor`'s buffer is ready, from another thread (which
    takes the GIL to run it). `tensor` must have been run (`torch_xla.sync()`, a compiled
    function, eager mode)."""
    _ready.on_ready(tensor, lambda: callback(tensor))


def on_ready_event(tensor: torch.Tensor) -> threading.Event:
    """A `threading.Event` set once `tensor`'s buffer is ready."""
    event = threading.Event()
    _ready.on_ready(tensor, event.set)
    return event
