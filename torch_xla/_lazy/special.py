"""Ops with a meaning to the engine beyond a lowering: transfers, scalars and aliases."""
import torch

from . import runtime
from .dispatch import dispatch, trace
from .ir import Value
from .lowering import REGISTRY
from .tensor import XLATensor, dispatch_depth, from_cpu, materialize, to_cpu, to_functional, wrap

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
    """`dst.copy_(self)` across devices: an XLA tensor to another device, or host data into
    an XLA tensor (what `torch.tensor(data, device='xla')` does below functionalization)."""
    if isinstance(dst, XLATensor):
        dst._value = _copy(dst, self)._value
        return dst
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


def _linalg_check_errors(info, api_name, is_matrix):
    """PyTorch's error for a failed factorization (`info` != 0): one bool read from the
    device (a sync, as on CUDA), then PyTorch's own check on the CPU for its message."""
    if _local_scalar_dense(dispatch(aten.any.default, (info,), {})):
        torch.ops.aten._linalg_check_errors(to_cpu(info._value), api_name, is_matrix=is_matrix)


def _lift_fresh(x):
    """`torch.tensor(data, device='xla')` makes its tensor below functionalization; lifted
    from user code, it becomes a functional tensor like every tensor users hold (inside the
    engine, a decomposition's constant stays a plain XLATensor)."""
    if dispatch_depth() == 1:
        return to_functional(wrap(x._value))
    return wrap(x._value)


def _indices(x, indices, masks):
    """index/index_put's indices on x's device (PyTorch lets them live on the CPU), with
    boolean masks turned into the int indices of their True positions when `masks` is
    false (an eager `nonzero`: the result's shape depends on them)."""
    out = []
    for i in indices:
        if i is not None and not isinstance(i, XLATensor):
            i = wrap(from_cpu(i, x._value.device))
        if i is not None and not masks and i.dtype in (torch.bool, torch.uint8):
            nz = dispatch(aten.nonzero.default, (i,), {})
            out.extend(dispatch(aten.select_copy.int, (nz, 1, d), {}) for d in range(i.dim()))
            continue
        out.append(i)
    return out


def _index(func):
    def index(x, indices):
        return trace(func, REGISTRY[func], (x, _indices(x, indices, False)), {})
    return index


def _index_put(func):
    def index_put(x, indices, values, accumulate=False):
        # A lone boolean mask is lowered statically (its result has x's shape).
        lone_mask = sum(i is not None for i in indices) == 1 and any(
            i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)
        return trace(func, REGISTRY[func], (x, _indices(x, indices, lone_mask), values, accumulate), {})
    return index_put


def _propagate_xla_data(*args):
    return None


def _resize(x, size, memory_format=None):
    if tuple(size) == tuple(x.shape):
        return x
    raise NotImplementedError(f"resize_ of an XLA tensor from {list(x.shape)} to {list(size)}")


def _native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """native_batch_norm updates the running statistics in place in training, though its
    schema does not say so (functionalization lets it through): the functional form runs,
    then the new statistics are written back."""
    args = (x, weight, bias, running_mean, running_var, training, momentum, eps)
    if not training:
        return _eval_native_batch_norm(*args)
    if running_mean is None or running_var is None:
        return trace(aten.native_batch_norm.default, REGISTRY[aten.native_batch_norm.default], args, {})
    out, mean, invstd, new_mean, new_var = dispatch(
        aten._native_batch_norm_legit_functional.default, args, {})
    running_mean._value, running_var._value = new_mean._value, new_var._value
    return out, mean, invstd


def _eval_batch_norm(func, training_arg):
    """Batch norm in evaluation: PyTorch's CPU kernels return empty saved statistics (its meta
    kernels say (C,)), and so do these."""
    def batch_norm(*args):
        out = trace(func, REGISTRY[func], args, {}) if func in REGISTRY else dispatch(func, args, {})
        if training_arg is not None and args[training_arg]:
            return out
        empty = dispatch(aten.new_zeros.default, (out[0], [0]), {})
        return (out[0], empty, dispatch(aten.new_zeros.default, (out[0], [0]), {})) + tuple(out[3:])
    return batch_norm


_eval_native_batch_norm = _eval_batch_norm(aten.native_batch_norm.default, None)


SPECIAL = {
    aten._to_copy.default: _to_copy,
    aten.copy.default: _copy,
    aten._copy_from.default: _copy_from,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.detach.default: _alias,
    aten.alias.default: _alias,
    aten.detach_copy.default: _alias,
    aten.alias_copy.default: _alias,
    aten.lift_fresh.default: _lift_fresh,
    aten.lift_fresh_copy.default: _alias,
    aten.clone.default: _alias,
    aten.equal.default: _equal,
    aten._linalg_check_errors.default: _linalg_check_errors,
    aten._propagate_xla_data.default: _propagate_xla_data,
    aten.resize_.default: _resize,
    aten.index.Tensor: _index(aten.index.Tensor),
    aten._unsafe_index.Tensor: _index(aten._unsafe_index.Tensor),
    aten.index_put.default: _index_put(aten.index_put.default),
    aten._unsafe_index_put.default: _index_put(aten._unsafe_index_put.default),
    aten.native_batch_norm.default: _native_batch_norm,
    aten._native_batch_norm_legit_no_training.default: _eval_batch_norm(
        aten._native_batch_norm_legit_no_training.default, None),
    aten._native_batch_norm_legit_functional.default: _eval_batch_norm(
        aten._native_batch_norm_legit_functional.default, 5),
}
