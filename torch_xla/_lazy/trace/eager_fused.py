"""Fused eager mode: `eager_mode(True)`'s default. Ops are traced as in lazy mode and run as
fused programs, cut at points that repeat from one training step to the next, so that a
steady loop compiles nothing new and runs few, large programs; eager's contract holds:

- a shape or dtype error raises at the op (PyTorch's meta kernels, at tracing, as always);
- a value is readable at any moment without a sync: a host read runs every live pending
  tensor of its device with it (`execution.materialize`), a cut;
- a failed value check (an index out of range) raises where a value it checked is read, or
  at the next sync (`execution.run_live(raise_earlier=False)`), never at a cut;
- the other cuts: where a backward pass starts and where it ends (the autograd engine's
  graph task, asked at each op), after an optimizer's `step()` (a global post-step hook),
  `wait_device_ops`, and every `MAX_OPS` ops since the last cut of any kind. Counting from the
  last cut, the bound falls at the same op of every step, whatever the step's length.

Upstream's op-by-op mode (`eager`: one program per op) stays: `XLA_EAGER_OP_BY_OP=1`,
`XLA_USE_EAGER_DEBUG_MODE=1`, or `eager_mode(True, op_by_op=True)`.
"""
import os
import threading

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from ..step import execution


def _max_ops() -> int:
    text = os.environ.get("XLA_EAGER_FUSED_MAX_OPS", "1024")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"XLA_EAGER_FUSED_MAX_OPS={text!r}: expected a positive number of ops")
    return int(text)


MAX_OPS = _max_ops()
_hook = [None]  # the optimizer post-step hook's handle, while the mode is on


class _ThreadState(threading.local):
    """Per thread (replicas on threads each trace their own steps): the ops traced since
    the last cut, `execution.cuts` when they were counted, and whether the last op was
    traced inside a backward pass."""
    ops, cuts, backward = 0, 0, False


_state = _ThreadState()


def set_enabled(enable: bool) -> None:
    """Turns the mode's cuts at reads and after optimizer steps on or off."""
    execution.fuse_reads(enable)
    if enable and _hook[0] is None:
        _hook[0] = register_optimizer_step_post_hook(_after_optimizer_step)
    elif not enable and _hook[0] is not None:
        _hook[0].remove()
        _hook[0] = None


def before_op() -> None:
    """Cuts where the op starts or ends a backward pass; restarts the count of ops after a
    cut of any kind (a read, a sync)."""
    state = _state
    backward = torch._C._current_graph_task_id() != -1
    if backward is not state.backward:
        state.backward = backward
        cut()
    if state.cuts != execution.cuts[0]:
        state.ops, state.cuts = 0, execution.cuts[0]


def after_op() -> None:
    """Counts the op, unless it cut (a read: what it traced ran); cuts once `MAX_OPS` ops
    were traced since the last cut."""
    state = _state
    if state.cuts != execution.cuts[0]:
        state.ops, state.cuts = 0, execution.cuts[0]
        return
    state.ops += 1
    if state.ops >= MAX_OPS:
        cut()


def cut() -> None:
    """Runs every live pending tensor of this thread's device (every device's, outside
    DataParallel threads), as one program per device."""
    execution.run_live(raise_earlier=False)


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    cut()
