"""Ops with a meaning to the engine beyond a lowering: transfers, scalars and aliases."""
import torch

from . import runtime
from .dispatch import dispatch, trace
from .ir import Value
from .lowering import REGISTRY
from .tensor import XLATensor, from_cpu, materialize, to_cpu, wrap

aten = torch.ops.aten


def _device_index(device):
    return device.index or 0


def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if device is not None and device.type == "cpu":
        out = to_cpu(x._value)
        return out.to(dtype) if dtype is not None and dtype != out.dtype else out
    if device is not None and device.type != "xla":
        raise RuntimeError(f"cannot copy an XLA tensor to device {device}")
    if device is not None and _device_index(device) != x._value.device:
        x = _move(x, _device_index(device))
    if dtype is None or dtype == x.dtype:
        return wrap(x._value)
    return trace(aten._to_copy.default, REGISTRY[aten._to_copy.default],
                 (x,), {"dtype": dtype})


def _move(x, index):
    """x on XLA device `index` (a transfer between devices through the host)."""
    return wrap(from_cpu(to_cpu(x._value), index))


def _copy(self, src, non_blocking=False):
    """The functional copy: `self`'s shape and dtype, `src`'s values (broadcast)."""
    if not isinstance(src, XLATensor):
        src = wrap(from_cpu(src, self._value.device, dtype=self.dtype))
    elif src._value.device != self._value.device:
        src = _move(src, self._value.device)
    if src.dtype != self.dtype:
        src = _to_copy(src, dtype=self.dtype)
    if tuple(src.shape) != tuple(self.shape):
        src = dispatch(aten.expand_copy.default, (src, list(self.shape)), {})
    return wrap(src._value)


def _copy_from(self, dst, non_blocking=False):
    """`dst.copy_(self)` where dst is not on an XLA device."""
    dst.copy_(to_cpu(self._value))
    return dst


def _local_scalar_dense(x):
    return to_cpu(x._value).item()


def _alias(x, *args, **kwargs):
    return wrap(x._value)


def _equal(a, b):
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(_local_scalar_dense(dispatch(aten.all.default, (dispatch(aten.eq.Tensor, (a, b), {}),), {})))


def _propagate_xla_data(*args):
    return None


def _resize(x, size, memory_format=None):
    if tuple(size) == tuple(x.shape):
        return x
    raise NotImplementedError(f"resize_ of an XLA tensor from {list(x.shape)} to {list(size)}")


SPECIAL = {
    aten._to_copy.default: _to_copy,
    aten.copy.default: _copy,
    aten._copy_from.default: _copy_from,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.detach.default: _alias,
    aten.alias.default: _alias,
    aten.detach_copy.default: _alias,
    aten.alias_copy.default: _alias,
    aten.lift_fresh.default: _alias,
    aten.lift_fresh_copy.default: _alias,
    aten.clone.default: _alias,
    aten.equal.default: _equal,
    aten._propagate_xla_data.default: _propagate_xla_data,
    aten.resize_.default: _resize,
}
