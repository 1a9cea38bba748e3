"""Reductions."""
import jax.numpy as jnp

from .. import runtime
from . import aten, lower


def _dims(x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return None
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(d % max(x.ndim, 1) for d in dim) if x.ndim else None


@lower(aten.sum.default, aten.sum.dim_IntList)
def sum_(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.astype(runtime.to_jax_dtype(dtype))
    elif x.dtype == bool or jnp.issubdtype(x.dtype, jnp.integer):
        x = x.astype(jnp.int64)
    return jnp.sum(x, axis=_dims(x, dim), keepdims=keepdim)


@lower(aten.mean.default, aten.mean.dim)
def mean(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.astype(runtime.to_jax_dtype(dtype))
    return jnp.mean(x, axis=_dims(x, dim), keepdims=keepdim)
