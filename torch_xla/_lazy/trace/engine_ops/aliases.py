"""Aliases and metadata: ops that hand out the same value (`op_rules.ALIASES`; marking its
buffer for donation, `op_rules.SET_BUFFER_DONOR`), answer a question about storage, lift a
constant, or keep a sharding through an in-place update."""
import torch

from ...launch import donation
from ..dispatch import engine_op
from ..op_rules import ALIASES, SET_BUFFER_DONOR
from ..mark_sharding import propagate
from ...graph.tensor import XLATensor, dispatch_depth, to_functional, wrap

aten = torch.ops.aten


@engine_op(*(ALIASES - {aten.lift_fresh.default}))  # lift_fresh: below
def _alias(x, *args, **kwargs):
    return wrap(x._value)


@engine_op(SET_BUFFER_DONOR)
def _set_buffer_donor(x, should_donate):
    donation.set_donor(x._value, should_donate)
    return wrap(x._value)


@engine_op(aten._has_same_storage_numel.default)
def _has_same_storage_numel(base, other):
    """Metadata only (autograd's view replay, `Tensor._view_func`, asks it): an XLA tensor's
    storage is its own elements (it looks contiguous, with no offset)."""
    def storage_numel(t):
        return t.numel() if isinstance(t, XLATensor) else t.untyped_storage().nbytes() // t.itemsize
    return storage_numel(base) == other.numel()


@engine_op(aten.lift_fresh.default)
def _lift_fresh(x):
    """`torch.tensor(data, device='xla')` makes its tensor below functionalization; lifted
    from user code, it becomes a functional tensor like every tensor users hold (inside the
    engine, a decomposition's constant stays a plain XLATensor). The fresh tensor is
    wrapped itself: `torch.tensor` makes one XLA tensor, as torch_xla counts it."""
    if dispatch_depth() == 1:
        return to_functional(x)
    return wrap(x._value)


@engine_op(aten._propagate_xla_data.default)
def _propagate_xla_data(old, new):
    """Functionalization swapping `old`'s value for `new`'s (an in-place op): `new` keeps
    `old`'s sharding."""
    propagate(old, new)


@engine_op(aten.resize_.default)
def _resize(x, size, memory_format=None):
    if tuple(size) == tuple(x.shape):
        return x
    raise NotImplementedError(f"resize_ of an XLA tensor from {list(x.shape)} to {list(size)}")
