"""XLA's optimization barrier over tensors, in place (`xm.optimization_barrier_`)."""
from ..lowering.training_ops import OPTIMIZATION_BARRIER
from . import collective_ops
from .mark_sharding import propagate
from ..graph.tensor import unwrap


def optimization_barrier_(tensors) -> None:
    """Puts `tensors` (on one device) behind an XLA optimization barrier, in place: the
    compiler may not move computations across it, nor merge what comes after it with what
    came before (gradient checkpointing relies on that to recompute). Autograd sees no
    change: each tensor's value is replaced under it, as torch_xla does."""
    tensors = list(tensors)
    if not tensors:
        return
    outs = collective_ops.apply(OPTIMIZATION_BARRIER, tensors, [collective_ops.aval(t) for t in tensors])
    for t, out in zip(tensors, outs):
        propagate(unwrap(t), unwrap(out))  # (SPMD) keeps t's sharding
        unwrap(t)._value = unwrap(out)._value
