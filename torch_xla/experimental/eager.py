"""Eager mode: each op runs as it is called, as on the CPU (see `torch_xla._lazy.eager`).

Ops are compiled one by one (each op signature once, then cached) and run at once, so a
value is ready without a `torch_xla.sync()` and an error is raised by the op that caused
it. Functions wrapped in `torch_xla.compile` are still traced and compiled whole.
"""
import contextlib

from torch_xla._lazy import eager as _eager

__all__ = ["eager_mode", "is_eager_mode", "eager_mode_context"]


def eager_mode(enable: bool) -> None:
    """Turns eager mode on or off for the process (off: ops are traced lazily and run at
    `torch_xla.sync()`)."""
    _eager.set_enabled(enable)


def is_eager_mode() -> bool:
    """Whether eager mode is on."""
    return _eager.enabled()


@contextlib.contextmanager
def eager_mode_context(enable: bool):
    """Eager mode set to `enable` inside the block, and back as it was after it; the block
    is given the setting it had before."""
    saved = is_eager_mode()
    eager_mode(enable)
    try:
        yield saved
    finally:
        eager_mode(saved)
