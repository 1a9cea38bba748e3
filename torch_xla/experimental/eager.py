"""Eager mode: each op's value is there without a `torch_xla.sync()` and its errors raise at
the op, as on the CPU (see `torch_xla._lazy.trace.eager`).

By default the ops run fused (`torch_xla._lazy.trace.eager_fused`): traced, and run as programs
cut at host reads, where backward passes start and end, after optimizer steps and every
XLA_EAGER_FUSED_MAX_OPS ops, so that a training loop runs close to lazy speed. Upstream
torch_xla's op-by-op mode (each op compiled once per signature and run at once, so that a
failed value check raises at its op) is `eager_mode(True, op_by_op=True)`, or
XLA_EAGER_OP_BY_OP=1. Functions wrapped in `torch_xla.compile` are traced and compiled whole.
"""
import contextlib

from torch_xla._lazy.trace import eager as _eager

__all__ = ["eager_mode", "is_eager_mode", "eager_mode_context"]


def eager_mode(enable: bool, op_by_op: bool = None) -> None:
    """Turns eager mode on or off for the process (off: ops are traced lazily and run at
    `torch_xla.sync()`). `op_by_op` (None: as it was) runs each op as its own program, as
    upstream torch_xla does, instead of fused."""
    _eager.set_enabled(enable, op_by_op)


def is_eager_mode() -> bool:
    """Whether eager mode is on."""
    return _eager.enabled()


@contextlib.contextmanager
def eager_mode_context(enable: bool, op_by_op: bool = None):
    """Eager mode set to `enable` (and `op_by_op`, if given) inside the block, and back as
    it was after it; the block is given whether eager mode was on before."""
    saved, saved_op_by_op = is_eager_mode(), _eager.op_by_op()
    eager_mode(enable, op_by_op)
    try:
        yield saved
    finally:
        eager_mode(saved, saved_op_by_op)
