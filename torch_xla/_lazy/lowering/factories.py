"""Factories: tensors made from sizes and values, on the device."""
import jax.numpy as jnp
import numpy as np

from .. import runtime
from . import aten, lower


def _dtype(dtype, default=np.float32):
    import torch
    return runtime.to_jax_dtype(dtype) if dtype is not None else runtime.to_jax_dtype(torch.get_default_dtype())


@lower(aten.empty.memory_format, aten.zeros.default)
def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None, **_):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lower(aten.empty_strided.default)
def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return jnp.zeros(tuple(size), _dtype(dtype))


@lower(aten.ones.default)
def ones(size, dtype=None, **_):
    return jnp.ones(tuple(size), _dtype(dtype))


@lower(aten.full.default)
def full(size, fill_value, dtype=None, **_):
    return jnp.full(tuple(size), fill_value, _dtype(dtype))


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
    import torch
    out_dtype = runtime.to_jax_dtype(dtype) if dtype is not None else (
        np.int64 if all(isinstance(a, (int, bool)) for a in args) else _dtype(None))
    return jnp.arange(*args, dtype=np.float64 if jnp.issubdtype(out_dtype, jnp.floating) else out_dtype).astype(out_dtype)


@lower(aten.linspace.default)
def linspace(start, end, steps, dtype=None, **_):
    if steps == 1:
        return jnp.full((1,), start, _dtype(dtype))
    step = (end - start) / (steps - 1)
    i = jnp.arange(steps, dtype=np.float64)
    # PyTorch fills the first half from start and the second half from end.
    return jnp.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i)).astype(_dtype(dtype))


@lower(aten.eye.default, aten.eye.m)
def eye(n, m=None, dtype=None, **_):
    return jnp.eye(n, n if m is None else m, dtype=_dtype(dtype))


@lower(aten._to_copy.default)
def to_copy(x, dtype=None, **_):
    return x if dtype is None else x.astype(runtime.to_jax_dtype(dtype))
