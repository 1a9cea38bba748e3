"""Indexing: advanced indexing, gathers and scatters, masks, diagonals and the `*_scatter`
ops functionalization writes views back with.

Index tensors reach `index`/`index_put` on the device, with boolean masks already turned
into int indices, except for `index_put` with a single mask, which is lowered statically
(see `_lazy/trace/engine_ops/indexing.py`). XLA clamps out-of-range indices; PyTorch's error for them is
raised by a check node deferred to the step's program (`_lazy/trace/value_checks.py`).
"""
import jax
import jax.numpy as jnp
import numpy as np

from . import aten, lower
from ._types import cast, is_float


def _norm(dim, ndim):
    return dim % max(ndim, 1)


def _is_mask(i):
    return i is not None and i.dtype in (np.bool_, np.uint8)


def _update(x, at, how, values):
    """x.at[at].<how>(values); bool tensors combine as PyTorch's do (add: or, multiply:
    and), through int32."""
    if x.dtype == np.bool_ and how != "set":
        return _update(x.astype(np.int32), at, how, values.astype(np.int32)) != 0
    return getattr(x.at[at], how)(values)


def _index_tuple(indices):
    return tuple(slice(None) if i is None else i for i in indices)


@lower(aten.index.Tensor, aten._unsafe_index.Tensor)
def index(x, indices):
    return x[_index_tuple(indices)]


@lower(aten.index_put.default, aten._unsafe_index_put.default)
def index_put(x, indices, values, accumulate=False):
    values = cast(values, x.dtype)
    masks = [d for d, i in enumerate(indices) if _is_mask(i)]
    if masks:
        return _mask_put(x, masks[0], indices[masks[0]], values, accumulate)
    return _update(x, _index_tuple(indices), "add" if accumulate else "set", values)


def _mask_put(x, d, mask, values, accumulate):
    """x[..., mask, ...] = values with one boolean mask over dims d..d+k-1: the n-th True
    position takes the n-th entry of values along the masked dim (or its only one)."""
    mask = mask.astype(bool)
    k, rest = mask.ndim, x.ndim - d - mask.ndim
    target_ndim = d + 1 + rest
    values = jnp.reshape(values, (1,) * (target_ndim - values.ndim) + values.shape)
    count = values.shape[d]
    lead = values.shape[:d]
    tail = values.shape[d + 1:]
    if count == 1:
        picked = jnp.reshape(values, lead + (1,) * k + tail)
    else:
        order = jnp.clip(jnp.cumsum(mask.reshape(-1).astype(np.int64)) - 1, 0, count - 1)
        picked = jnp.take(values, order, axis=d)
        picked = jnp.reshape(picked, lead + mask.shape + tail)
    where = jnp.reshape(mask, mask.shape + (1,) * rest)
    if accumulate:
        picked = jnp.where(where, picked, jnp.zeros((), x.dtype))
        return x | picked if x.dtype == np.bool_ else x + picked
    return jnp.where(where, picked, x)


# ---- gather / scatter along a dim ---------------------------------------------------------

def _grid(index, dim):
    """Index arrays addressing out[i0, .., index[i], .., in] for every position of index."""
    shape = index.shape
    return tuple(index if d == dim else jax.lax.broadcasted_iota(np.int64, shape, d)
                 for d in range(len(shape)))


def _at_least_1d(*xs):
    return [x.reshape(1) if x.ndim == 0 else x for x in xs]


@lower(aten.gather.default)
def gather(x, dim, index, sparse_grad=False):
    scalar = x.ndim == 0
    x1, i1 = _at_least_1d(x, index)
    dim = _norm(dim, x1.ndim)
    out = x1[_grid(i1.astype(np.int64), dim)]
    return out.reshape(index.shape) if scalar or index.ndim == 0 else out


def _scatter(x, dim, index, src, how):
    shape = x.shape
    x1, i1 = _at_least_1d(x, index)
    dim = _norm(dim, x1.ndim)
    src = cast(src, x.dtype)
    # a tensor source contributes the part index covers; a value goes everywhere
    src = src[tuple(slice(0, n) for n in i1.shape)] if src.ndim else jnp.broadcast_to(src, i1.shape)
    return _update(x1, _grid(i1.astype(np.int64), dim), how, src).reshape(shape)


@lower(aten.scatter.src, aten.scatter.value)
def scatter(x, dim, index, src):
    return _scatter(x, dim, index, src, "set")


@lower(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_legacy(x, dim, index, src, reduce):
    return _scatter(x, dim, index, src, {"add": "add", "multiply": "multiply"}[reduce])


@lower(aten.scatter_add.default)
def scatter_add(x, dim, index, src):
    return _scatter(x, dim, index, src, "add")


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == np.bool_:
        return reduce == "amin"
    if is_float(dtype):
        return -np.inf if reduce == "amax" else np.inf
    info = jnp.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


_REDUCE = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "max", "amin": "min"}


@lower(aten.scatter_reduce.two)
def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    base = x
    if not include_self:
        touched = _scatter(jnp.zeros(x.shape, bool), dim, index, jnp.ones((), bool), "set")
        base = jnp.where(touched, jnp.asarray(_identity(reduce, x.dtype), x.dtype), x)
    out = _scatter(base, dim, index, src, _REDUCE[reduce])
    if reduce != "mean":
        return out
    ones = jnp.ones(index.shape, np.int64)
    count = _scatter(jnp.full(x.shape, 1 if include_self else 0, np.int64), dim, index, ones, "add")
    count = jnp.maximum(count, 1)
    if is_float(x.dtype):
        return out / count.astype(x.dtype)
    return jnp.floor_divide(out, count.astype(x.dtype))


# ---- along a dim with a 1-d index ---------------------------------------------------------

def _along(x, dim, index):
    """(x as at least 1-d, dim, index as 1-d int64, at-position tuple)."""
    x1 = x.reshape(1) if x.ndim == 0 else x
    dim = _norm(dim, x1.ndim)
    index = index.reshape(-1).astype(np.int64)
    return x1, dim, index, (slice(None),) * dim + (index,)


@lower(aten.index_select.default)
def index_select(x, dim, index):
    x1, dim, index, _ = _along(x, dim, index)
    out = jnp.take(x1, index, axis=dim, mode="clip")
    return out.reshape(()) if x.ndim == 0 else out


def _source(x1, source):
    source = cast(source, x1.dtype)
    return source.reshape(1) if source.ndim == 0 else source


@lower(aten.index_add.default)
def index_add(x, dim, index, source, alpha=1):
    x1, dim, index, at = _along(x, dim, index)
    src = _source(x1, source) * cast(alpha, x1.dtype)
    return _update(x1, at, "add", src).reshape(x.shape)


@lower(aten.index_copy.default)
def index_copy(x, dim, index, source):
    x1, dim, index, at = _along(x, dim, index)
    return x1.at[at].set(_source(x1, source)).reshape(x.shape)


@lower(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(x, dim, index, value):
    x1, dim, index, at = _along(x, dim, index)
    return x1.at[at].set(cast(value, x1.dtype)).reshape(x.shape)


@lower(aten.index_reduce.default)
def index_reduce(x, dim, index, source, reduce, include_self=True):
    x1, dim, index, at = _along(x, dim, index)
    src = _source(x1, source)
    base = x1
    if not include_self:
        base = x1.at[at].set(jnp.asarray(_identity(reduce, x1.dtype), x1.dtype))
    out = _update(base, at, _REDUCE[reduce], src)
    if reduce == "mean":
        count = jnp.zeros(x1.shape[dim], np.int64).at[index].add(1) + (1 if include_self else 0)
        count = jnp.maximum(count, 1).reshape((-1,) + (1,) * (x1.ndim - dim - 1)).astype(x1.dtype)
        out = out / count if is_float(x1.dtype) else jnp.floor_divide(out, count)
    return out.reshape(x.shape)


# ---- masks --------------------------------------------------------------------------------

@lower(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(x, mask, value):
    return jnp.where(mask, cast(value, x.dtype), x)


@lower(aten.masked_scatter.default)
def masked_scatter(x, mask, source):
    """The n-th True position (row-major) takes source.flatten()[n]."""
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    mask = jnp.broadcast_to(mask, shape)
    flat = cast(source, x.dtype).reshape(-1)
    order = jnp.clip(jnp.cumsum(mask.reshape(-1).astype(np.int64)) - 1, 0, max(flat.shape[0] - 1, 0))
    picked = jnp.take(flat, order).reshape(shape) if flat.shape[0] else jnp.zeros(shape, x.dtype)
    return jnp.where(mask, picked, jnp.broadcast_to(x, shape))


@lower(aten.masked_scatter_backward.default)
def masked_scatter_backward(grad, mask, sizes):
    """The source's gradient: the n-th True position's grad goes to source.flatten()[n]."""
    n = int(np.prod(sizes))
    mask = jnp.broadcast_to(mask, grad.shape).reshape(-1)
    order = jnp.cumsum(mask.astype(np.int64)) - 1
    at = jnp.where(mask, order, n)  # past the end: dropped
    out = jnp.zeros((n,), grad.dtype).at[at].add(grad.reshape(-1), mode="drop")
    return out.reshape(tuple(sizes))


@lower(aten.masked_select.default, dynamic_shape=True)
def masked_select(x, mask):
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    return jnp.broadcast_to(x, shape)[jnp.broadcast_to(mask, shape)]


@lower(aten.nonzero.default, dynamic_shape=True)
def nonzero(x):
    if x.ndim == 0:
        return jnp.zeros((int(x != 0), 0), np.int64)
    return jnp.stack(jnp.nonzero(x), axis=1).astype(np.int64)


def nonzero_bounded(x):
    """nonzero padded to its bound (one row per element), and its real row count: the
    bounded dynamic form (`dynamic_sizes`)."""
    count = jnp.count_nonzero(x).astype(np.int64)
    if x.ndim == 0:
        return jnp.zeros((1, 0), np.int64), count
    parts = jnp.nonzero(x, size=x.size, fill_value=0)
    return jnp.stack(parts, axis=1).astype(np.int64), count


def masked_select_bounded(x, mask):
    """masked_select padded to its bound (every element), and its real length."""
    shape = jnp.broadcast_shapes(x.shape, mask.shape)
    flat = jnp.broadcast_to(mask, shape).reshape(-1)
    picked = jnp.nonzero(flat, size=flat.shape[0], fill_value=0)[0]
    return jnp.broadcast_to(x, shape).reshape(-1)[picked], jnp.count_nonzero(flat).astype(np.int64)


@lower(aten.nonzero_static.default)
def nonzero_static(x, size, fill_value=-1):
    if x.ndim == 0:
        return jnp.zeros((size, 0), np.int64)
    parts = jnp.nonzero(x, size=size, fill_value=fill_value)
    return jnp.stack(parts, axis=1).astype(np.int64)


# ---- flat indexing ------------------------------------------------------------------------

@lower(aten.take.default)
def take(x, index):
    flat = x.reshape(-1)
    return jnp.take(flat, index.astype(np.int64) % max(flat.shape[0], 1), mode="clip")


@lower(aten.put.default)
def put(x, index, source, accumulate=False):
    flat = x.reshape(-1)
    at = index.reshape(-1).astype(np.int64) % max(flat.shape[0], 1)
    src = cast(source, x.dtype).reshape(-1)
    return _update(flat, at, "add" if accumulate else "set", src).reshape(x.shape)


# ---- view write-backs and strided copies ------------------------------------------------

@lower(aten.select_scatter.default)
def select_scatter(x, src, dim, index):
    dim = _norm(dim, x.ndim)
    n = x.shape[dim]
    at = (slice(None),) * dim + (index + n if index < 0 else index,)
    return x.at[at].set(cast(src, x.dtype))


@lower(aten.slice_scatter.default)
def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    dim = _norm(dim, x.ndim)
    start, end, _ = slice(start, end, step).indices(x.shape[dim])
    at = (slice(None),) * dim + (slice(start, max(start, end), step),)
    return x.at[at].set(cast(src, x.dtype))


def _diagonal_index(shape, offset, dim1, dim2):
    """Index tuple addressing the diagonal of dims (dim1, dim2), moved last like PyTorch."""
    ndim = len(shape)
    dim1, dim2 = _norm(dim1, ndim), _norm(dim2, ndim)
    n = max(0, min(shape[dim1] + min(offset, 0), shape[dim2] - max(offset, 0)))
    i = jnp.arange(n, dtype=np.int64)
    others = [d for d in range(ndim) if d not in (dim1, dim2)]
    idx = [None] * ndim
    for k, d in enumerate(others):
        idx[d] = jax.lax.broadcasted_iota(np.int64, tuple(shape[o] for o in others) + (n,), k)
    idx[dim1] = i - min(offset, 0)
    idx[dim2] = i + max(offset, 0)
    return tuple(idx)


@lower(aten.diagonal_copy.default, aten.diagonal.default)
def diagonal_copy(x, offset=0, dim1=0, dim2=1):
    return x[_diagonal_index(x.shape, offset, dim1, dim2)]


@lower(aten.diagonal_scatter.default)
def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    return x.at[_diagonal_index(x.shape, offset, dim1, dim2)].set(cast(src, x.dtype))


@lower(aten.diag_embed.default)
def diag_embed(x, offset=0, dim1=-2, dim2=-1):
    ndim = x.ndim + 1
    dim1, dim2 = _norm(dim1, ndim), _norm(dim2, ndim)
    m = x.shape[-1] + abs(offset)
    shape = list(x.shape[:-1])
    for d in sorted((dim1, dim2)):
        shape.insert(d, m)
    out = jnp.zeros(tuple(shape), x.dtype)
    return out.at[_diagonal_index(tuple(shape), offset, dim1, dim2)].set(x)


@lower(aten.diag.default)
def diag(x, diagonal=0):
    if x.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    return diagonal_copy(x, diagonal, 0, 1)


def _strided_offsets(size, stride, storage_offset):
    offsets = jnp.full(tuple(size), storage_offset or 0, np.int64)
    for d, s in enumerate(stride):
        offsets = offsets + jax.lax.broadcasted_iota(np.int64, tuple(size), d) * s
    return offsets


@lower(aten.as_strided_copy.default, aten.as_strided.default)
def as_strided(x, size, stride, storage_offset=None):
    """Strides address x's values in row-major order (XLA tensors are contiguous)."""
    if x.size == 0 or 0 in tuple(size):
        return jnp.zeros(tuple(size), x.dtype)
    return jnp.take(x.reshape(-1), _strided_offsets(size, stride, storage_offset), mode="clip")


@lower(aten.as_strided_scatter.default)
def as_strided_scatter(x, src, size, stride, storage_offset=None):
    offsets = _strided_offsets(size, stride, storage_offset)
    return x.reshape(-1).at[offsets].set(cast(src, x.dtype)).reshape(x.shape)


@lower(aten.tril.default)
def tril(x, diagonal=0):
    return jnp.tril(x, diagonal)


@lower(aten.triu.default)
def triu(x, diagonal=0):
    return jnp.triu(x, diagonal)


@lower(aten.narrow_copy.default)
def narrow_copy(x, dim, start, length):
    dim = _norm(dim, x.ndim)
    start = start + x.shape[dim] if start < 0 else start
    return jax.lax.slice_in_dim(x, start, start + length, axis=dim)


@lower(aten.unfold_copy.default, aten.unfold.default)
def unfold(x, dimension, size, step):
    if x.ndim == 0:
        return x.reshape(1)[:size]
    dim = _norm(dimension, x.ndim)
    count = (x.shape[dim] - size) // step + 1
    idx = jnp.arange(count, dtype=np.int64)[:, None] * step + jnp.arange(size, dtype=np.int64)[None, :]
    out = jnp.take(x, idx, axis=dim)  # (..., count, size, ...)
    return jnp.moveaxis(out, dim + 1, -1)
