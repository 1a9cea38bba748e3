"""Copies between devices and the host, and reads of values on the host: `.to()`, `copy_`,
`.item()`, `torch.equal`, `torch.allclose` (each a read of the device: a sync)."""
import torch

from ...base import counters
from ..dispatch import dispatch, engine_op, trace
from ...step.execution import to_cpu
from ...lowering import REGISTRY
from ...graph.tensor import XLATensor, wrap
from ...launch.transfers import from_cpu

aten = torch.ops.aten


def _device_index(device):
    return device.index or 0


_to_cpu_count = counters.op_counter("xla::_to_cpu")  # as torch_xla counts a copy to the CPU


@engine_op(aten._to_copy.default)
def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    if device is not None and device.type == "cpu":
        next(_to_cpu_count)
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


@engine_op(aten.copy.default)
def _copy(self, src, non_blocking=False):
    """The functional copy: `self`'s shape and dtype, `src`'s values (broadcast)."""
    return wrap(_copied(self, src))


def _copied(self, src):
    """The value of `_copy(self, src)` (no tensor made for it where none is needed)."""
    if not isinstance(src, XLATensor):
        value = from_cpu(src, self._value.device, dtype=self.dtype)
        if tuple(value.shape) == tuple(self.shape):
            return value
        src = wrap(value)
    elif src._value.device != self._value.device:
        src = _move(src, self._value.device)
    if src.dtype != self.dtype:
        src = _to_copy(src, dtype=self.dtype)
    if tuple(src.shape) != tuple(self.shape):
        src = dispatch(aten.expand_copy.default, (src, list(self.shape)), {})
    return src._value


@engine_op(aten._copy_from.default)
def _copy_from(self, dst, non_blocking=False):
    """`dst.copy_(self)` across devices: an XLA tensor to another device, or host data into
    an XLA tensor (what `torch.tensor(data, device='xla')` does below functionalization)."""
    if isinstance(dst, XLATensor):
        dst._value = _copied(dst, self)
        return dst
    dst.copy_(to_cpu(self._value))
    return dst


@engine_op(aten._local_scalar_dense.default)
def _local_scalar_dense(x):
    """A value read on the host: counted as torch_xla counts it, among the CPU fallbacks
    (`aten::_local_scalar_dense`), though here no op runs on the CPU."""
    counters.count("aten::_local_scalar_dense")
    return to_cpu(x._value).item()


@engine_op(aten.equal.default)
def _equal(a, b):
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(_local_scalar_dense(dispatch(aten.all.default, (dispatch(aten.eq.Tensor, (a, b), {}),), {})))


@engine_op(aten.allclose.default)
def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """PyTorch's definition, isclose(...).all(), read from the device (a sync)."""
    close = dispatch(aten.isclose.default, (a, b, rtol, atol, equal_nan), {})
    return bool(_local_scalar_dense(dispatch(aten.all.default, (close,), {})))
