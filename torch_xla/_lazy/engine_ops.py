"""Ops with a meaning to the engine beyond a lowering: transfers between devices and the
host, reads of values, aliases, and ops whose arguments need the engine before they can be
traced (indices on the CPU, batch norm's running statistics, linalg error checks, random
ops' argument checks). Each is registered with the dispatch entry by `@engine_op`.
"""
import torch

from . import user_code, value_checks
from .dispatch import dispatch, engine_op, trace
from .execution import defer_check, from_cpu, to_cpu
from .lowering import REGISTRY
from .op_rules import ALIASES, BATCH_NORMS, is_eval_batch_norm
from .spmd.mark_sharding import propagate
from .tensor import XLATensor, dispatch_depth, to_functional, wrap

aten = torch.ops.aten


def _device_index(device):
    return device.index or 0


@engine_op(aten._to_copy.default)
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


@engine_op(aten.copy.default)
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


@engine_op(aten._copy_from.default)
def _copy_from(self, dst, non_blocking=False):
    """`dst.copy_(self)` across devices: an XLA tensor to another device, or host data into
    an XLA tensor (what `torch.tensor(data, device='xla')` does below functionalization)."""
    if isinstance(dst, XLATensor):
        dst._value = _copy(dst, self)._value
        return dst
    dst.copy_(to_cpu(self._value))
    return dst


@engine_op(aten._local_scalar_dense.default)
def _local_scalar_dense(x):
    return to_cpu(x._value).item()


@engine_op(*(ALIASES - {aten.lift_fresh.default}))  # lift_fresh: below
def _alias(x, *args, **kwargs):
    return wrap(x._value)


@engine_op(aten._has_same_storage_numel.default)
def _has_same_storage_numel(base, other):
    """Metadata only (autograd's view replay, `Tensor._view_func`, asks it): an XLA tensor's
    storage is its own elements (it looks contiguous, with no offset)."""
    def storage_numel(t):
        return t.numel() if isinstance(t, XLATensor) else t.untyped_storage().nbytes() // t.itemsize
    return storage_numel(base) == other.numel()


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


@engine_op(aten._linalg_check_errors.default)
def _linalg_check_errors(info, api_name, is_matrix):
    """PyTorch's error for a failed factorization (`info` != 0). PyTorch checks at the op;
    here the check waits for the program that computes `info` (the end of the step, or a
    host read before it), so it costs no device run of its own. The error is PyTorch's
    own, from its check on the CPU copy, naming the user's line that called the op (or,
    for a backward pass's op, the line that called backward)."""
    origin = user_code.user_line()

    def check(cpu_info):
        try:
            aten._linalg_check_errors(torch.from_numpy(cpu_info), api_name, is_matrix=is_matrix)
        except RuntimeError as e:
            raise value_checks.deferred_error(e, api_name, origin) from None
    defer_check(info._value, check, (info._value,))


_checked = set()  # (op, shape, dtype, static arguments) whose argument checks passed


def _cpu_checks(func, x, shape, *args, **kwargs):
    """PyTorch's argument checks (and messages) for a random op: its CPU kernel run on a
    stand-in of x (ones of `shape`, x's dtype) with a private generator, once per signature,
    so the user's CPU random stream is untouched."""
    key = (func, tuple(shape), x.dtype, args, tuple(sorted(kwargs.items())))
    if key in _checked:
        return
    func(torch.ones((), dtype=x.dtype).expand(shape), *args, generator=torch.Generator(), **kwargs)
    _checked.add(key)


@engine_op(aten.multinomial.default)
def _multinomial(x, num_samples, replacement=False, generator=None):
    """(Its meta kernel checks none of sample counts, categories and dtypes.)"""
    _cpu_checks(aten.multinomial.default, x, x.shape, int(num_samples), replacement)
    return trace(aten.multinomial.default, REGISTRY[aten.multinomial.default],
                 (x, num_samples, replacement), {})


@engine_op(aten.uniform.default)
def _uniform(x, from_=0.0, to=1.0, generator=None, **kwargs):
    """(Its range checks depend on the bounds' values, which are program parameters.)"""
    low = kwargs.get("from", from_)
    _cpu_checks(aten.uniform.default, x, (1,), float(low), float(to))
    return trace(aten.uniform.default, REGISTRY[aten.uniform.default], (x, low, to), {})


@engine_op(aten.lift_fresh.default)
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
    dim = 0  # the dim of x the index addresses (a mask addresses as many as it has)
    for i in indices:
        if i is not None and not isinstance(i, XLATensor):
            i = wrap(from_cpu(i, x._value.device))
        is_mask = i is not None and i.dtype in (torch.bool, torch.uint8)
        if is_mask:
            _check_mask_shape(x, i, dim)
        dim += i.dim() if is_mask else 1
        if is_mask and not masks:
            nz = dispatch(aten.nonzero.default, (i,), {})
            out.extend(dispatch(aten.select_copy.int, (nz, 1, d), {}) for d in range(i.dim()))
            continue
        out.append(i)
    return out


def _check_mask_shape(x, mask, dim):
    for k, n in enumerate(mask.shape):
        if dim + k < x.dim() and x.shape[dim + k] != n:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {k} does not match "
                             f"the shape of the indexed tensor {list(x.shape)} at index {dim + k}")


@engine_op(aten.index.Tensor, aten._unsafe_index.Tensor, with_op=True)
def _index(func, x, indices):
    indices = _indices(x, indices, False)
    out = trace(func, REGISTRY[func], (x, indices), {})
    value_checks.check_index(func, x, indices, out)
    return out


@engine_op(aten.index_put.default, aten._unsafe_index_put.default, with_op=True)
def _index_put(func, x, indices, values, accumulate=False):
    # A lone boolean mask is lowered statically (its result has x's shape).
    lone_mask = sum(i is not None for i in indices) == 1 and any(
        i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)
    indices = _indices(x, indices, lone_mask)
    out = trace(func, REGISTRY[func], (x, indices, values, accumulate), {})
    value_checks.check_index(func, x, indices, out)
    return out


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


@engine_op(*BATCH_NORMS, with_op=True)
def _batch_norm(func, *args, **kwargs):
    """Batch norm in evaluation (`op_rules.is_eval_batch_norm`): empty saved statistics, in
    the statistics' dtypes. native_batch_norm updates the running statistics in place in
    training, though its schema does not say so (functionalization lets it through): the
    functional form runs, then the new statistics are written back."""
    if is_eval_batch_norm(func, args, kwargs):
        out = trace(func, REGISTRY[func], args, kwargs)
        empty = [dispatch(aten.new_zeros.default, (stat, [0]), {}) for stat in out[1:3]]
        return (out[0], *empty) + tuple(out[3:])
    running_mean, running_var = args[3], args[4]
    if func is not aten.native_batch_norm.default or running_mean is None or running_var is None:
        return trace(func, REGISTRY[func], args, kwargs)
    out, mean, invstd, new_mean, new_var = dispatch(
        aten._native_batch_norm_legit_functional.default, args, kwargs)
    running_mean._value, running_var._value = new_mean._value, new_var._value
    return out, mean, invstd


@engine_op(getattr(aten.random, "from"), aten.random.to, with_op=True)
def _random(func, x, *args, generator=None):
    """random_(from, to): the interval is checked against the dtype as on the CPU."""
    _cpu_checks(func, x, (1,), *args)
    return trace(func, REGISTRY[func], (x, *args), {})
