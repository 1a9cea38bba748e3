"""The scopes `debug.profiler.Trace` opens (PyTorch's lazy-tensor scope stack, per thread).

A scope is named `NAME.ID`, ID counting its siblings from 1; the current scope is the
path of the open ones (`outer.1/inner.2`). A step ends outside every scope: ending one
(`torch_xla.sync`, `xm.mark_step`) inside an open scope raises, as PyTorch's lazy tensor
core does, naming it.
"""
import threading


class _Context(threading.local):
    def __init__(self):
        self.scopes = []  # (name, the next sibling's id)
        self.next_id = 1


_context = _Context()


def push(name: str) -> None:
    _context.scopes.append((f"{name}.{_context.next_id}", _context.next_id + 1))
    _context.next_id = 1


def pop() -> None:
    if not _context.scopes:
        raise RuntimeError("popping a scope while none is open")
    _context.next_id = _context.scopes.pop()[1]


def current() -> str:
    return "/".join(name for name, _ in _context.scopes)


def reset() -> None:
    """At the end of a step: no scope may be open."""
    if _context.scopes:
        raise RuntimeError(f"Expecting scope to be empty but it is {current()}")
    _context.next_id = 1
