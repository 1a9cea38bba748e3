"""Factories: tensors made from sizes and values, on the device."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from ..runtime import pjrt
from ..base import torch_compat
from . import aten, lower
from ._types import cast, is_float, result_type


def _dtype(dtype):
    return pjrt.to_jax_dtype(dtype) if dtype is not None else pjrt.to_jax_dtype(torch.get_default_dtype())


@lower(aten.empty.memory_format, aten.zeros.default, aten.empty_permuted.default)
def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, **_):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lower(aten.empty_strided.default)
def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lower(aten._efficientzerotensor.default)
def efficient_zero_tensor(size, dtype=None, layout=None, device=None, pin_memory=None):
    """A plain zero tensor (XLA has no ZeroTensor): what `sgn`'s backward of real inputs asks."""
    return jnp.zeros(tuple(size), pjrt.to_jax_dtype(dtype) if dtype is not None else jnp.float32)


@lower(aten.ones.default)
def ones(size, dtype=None, **_):
    return jnp.ones(tuple(size), _dtype(dtype))


@lower(aten.full.default)
def full(size, fill_value, dtype=None, **_):
    """Without a dtype, the fill value's kind decides (bool, int64, float, complex)."""
    dtype = pjrt.to_jax_dtype(dtype) if dtype is not None else result_type(fill_value)
    return jnp.full(tuple(size), cast(fill_value, dtype), dtype)


@lower(aten.scalar_tensor.default)
def scalar_tensor(s, dtype=None, **_):
    return jnp.asarray(s, _dtype(dtype))


@lower(aten.empty_like.default, aten.zeros_like.default)
def zeros_like(x, dtype=None, **_):
    return jnp.zeros(x.shape, _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.ones_like.default)
def ones_like(x, dtype=None, **_):
    return jnp.ones(x.shape, _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.full_like.default)
def full_like(x, fill_value, dtype=None, **_):
    return jnp.full(x.shape, fill_value, _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.new_empty.default, aten.new_zeros.default)
def new_zeros(x, size, dtype=None, **_):
    return jnp.zeros(tuple(size), _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.new_empty_strided.default)
def new_empty_strided(x, size, stride, dtype=None, **_):
    return jnp.zeros(tuple(size), _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.new_ones.default)
def new_ones(x, size, dtype=None, **_):
    return jnp.ones(tuple(size), _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.new_full.default)
def new_full(x, size, fill_value, dtype=None, **_):
    return jnp.full(tuple(size), fill_value, _dtype(dtype) if dtype is not None else x.dtype)


@lower(aten.arange.start_step, aten.arange.start, aten.arange.default, static_scalars=True)
def arange(*args, dtype=None, **_):
    """PyTorch's kernel: start + i * step in double, or in int64 after truncating the bounds
    for integer results; an int64 result's length is the truncated arguments' (C's integer
    division) where all are integers, or where this torch truncates them for int64
    (`torch_compat.arange_int64_length_truncated`), else ceil((end - start) / step)."""
    start, end, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    integers = all(isinstance(a, (int, bool)) for a in args)
    out = pjrt.to_jax_dtype(dtype) if dtype is not None else (
        np.dtype(np.int64) if integers else _dtype(None))
    if out == np.int64 and (integers or torch_compat.arange_int64_length_truncated()):
        start, end, step = int(start), int(end), int(step)
        span = end - start + step - (step > 0) + (step < 0)
        n = abs(span) // abs(step) if (span > 0) == (step > 0) else 0  # C's truncation
    else:
        n = math.ceil((end - start) / step)
    if not is_float(out):
        start, step = int(start), int(step)
    acc = np.float64 if is_float(out) else np.int64
    return (jnp.asarray(start, acc) + jnp.asarray(step, acc) * jnp.arange(max(n, 0), dtype=acc)).astype(out)


@lower(aten.range.step, aten.range.default, static_scalars=True)
def range_(start, end, step=1, dtype=None, **_):
    """The deprecated torch.range: end included, (end - start) / step + 1 values."""
    out = _dtype(dtype)
    if not is_float(out):
        start, end, step = int(start), int(end), int(step)
    n = int((end - start) / step + 1) if is_float(out) else (end - start) // step + 1
    acc = np.float64 if is_float(out) else np.int64
    return (jnp.asarray(start, acc) + jnp.asarray(step, acc) * jnp.arange(max(n, 0), dtype=acc)).astype(out)


@lower(aten.kaiser_window.default, aten.kaiser_window.periodic, aten.kaiser_window.beta)
def kaiser_window(window_length, periodic=True, beta=12.0, dtype=None, **_):
    out = _dtype(dtype)
    if window_length <= 1:
        return jnp.ones((window_length,), out)
    n = window_length + 1 if periodic else window_length
    alpha = (n - 1) / 2.0
    x = (jnp.arange(n, dtype=np.float64) - alpha) / alpha
    window = jax.scipy.special.i0(beta * jnp.sqrt(jnp.maximum(0.0, 1 - x * x))) / jax.scipy.special.i0(beta)
    return window[:window_length].astype(out)


def linspace_values(start, end, steps, dtype, step_t=None):
    """PyTorch's linspace values, computed from start for the first half and from end for
    the second, the bounds rounded to `dtype` first: in `step_t` if given, else in the
    result dtype for floats, in double after truncating the bounds for integers."""
    if step_t is None:
        step_t = dtype if is_float(dtype) else np.dtype(np.float64)
    start, end = cast(cast(start, dtype), step_t), cast(cast(end, dtype), step_t)
    if steps == 1:
        return jnp.reshape(start, (1,))
    step = (end - start) / jnp.asarray(steps - 1, step_t)
    i = jnp.arange(steps, dtype=np.int64)
    return jnp.where(i < steps // 2, start + step * i.astype(step_t),
                     end - step * (steps - 1 - i).astype(step_t))


@lower(aten.linspace.default)
def linspace(start, end, steps, dtype=None, **_):
    """Without a dtype: complex bounds give the default complex dtype, others the default.
    float16 and bfloat16 are computed in float32 where this torch does so
    (`torch_compat.linspace_in_float32`)."""
    if dtype is None and any(jnp.iscomplexobj(v) for v in (start, end)):
        dtype = np.dtype(np.complex128 if _dtype(None) == np.float64 else np.complex64)
    else:
        dtype = _dtype(dtype)
    step_t = None
    if dtype.name in ("float16", "bfloat16") and torch_compat.linspace_in_float32(dtype.name):
        step_t = np.dtype(np.float32)
    return linspace_values(start, end, steps, dtype, step_t).astype(dtype)


@lower(aten.logspace.default)
def logspace(start, end, steps, base=10.0, dtype=None, **_):
    """base ** exponent in double, the exponents from the bounds in the result dtype."""
    dtype = _dtype(dtype)
    start, end = (cast(cast(v, dtype), np.float64) for v in (start, end))
    exponent = linspace_values(start, end, steps, np.dtype(np.float64))
    return jnp.power(jnp.asarray(base, np.float64), exponent).astype(dtype)


def _triangle(numpy_fn, row, col, offset, dtype):
    rows, cols = numpy_fn(row, offset, col)
    return jnp.asarray(np.stack([rows, cols]).reshape(2, -1), pjrt.to_jax_dtype(dtype))


@lower(aten.tril_indices.default)
def tril_indices(row, col, offset=0, dtype=None, **_):
    return _triangle(np.tril_indices, row, col, offset, dtype or torch.int64)


@lower(aten.triu_indices.default)
def triu_indices(row, col, offset=0, dtype=None, **_):
    return _triangle(np.triu_indices, row, col, offset, dtype or torch.int64)


@lower(aten.fill.Scalar, aten.fill.Tensor)
def fill(x, value):
    return jnp.full(x.shape, cast(value, x.dtype), x.dtype)


@lower(aten.zero.default)
def zero(x):
    return jnp.zeros(x.shape, x.dtype)


@lower(aten.eye.default, aten.eye.m)
def eye(n, m=None, dtype=None, **_):
    return jnp.eye(n, n if m is None else m, dtype=_dtype(dtype))


@lower(aten._to_copy.default)
def to_copy(x, dtype=None, **_):
    return x if dtype is None else x.astype(pjrt.to_jax_dtype(dtype))
