"""Sorting and order statistics: sort, topk, kthvalue, median, nanmedian, mode, searchsorted,
unique.

Everything is built on one stable sort of (values, indices) along a dim. NaN sorts above
every number and -0.0 ties with 0.0 (lax.sort canonicalises both), as in PyTorch.
Descending order sorts the flipped input ascending and flips the result back, which keeps
equal elements in their original order (PyTorch's stable descending sort).
"""
import jax
import jax.numpy as jnp
from jax import lax

from . import aten, lower
from ._types import promote


def _sort(x, axis, descending=False):
    n = x.shape[axis]
    if descending:
        x = jnp.flip(x, axis)
    idx = lax.broadcasted_iota(jnp.int64, x.shape, axis)
    values, indices = lax.sort((x, idx), dimension=axis, is_stable=True, num_keys=1)
    if descending:
        values, indices = jnp.flip(values, axis), (n - 1) - jnp.flip(indices, axis)
    return values, indices


def _zero_dim(x):
    return x, jnp.zeros((), jnp.int64)


@lower(aten.sort.default, aten.sort.stable)
def sort(x, dim=-1, descending=False, stable=None):
    if x.ndim == 0:
        return _zero_dim(x)
    return _sort(x, dim % x.ndim, descending)


@lower(aten.topk.default)
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) in sorted order, which is also a valid unsorted answer."""
    if x.ndim == 0:
        return _zero_dim(x)
    axis = dim % x.ndim
    values, indices = _sort(x, axis, descending=largest)
    return (lax.slice_in_dim(values, 0, k, axis=axis),
            lax.slice_in_dim(indices, 0, k, axis=axis))


def _pick(sorted_pair, pos, axis, keepdim):
    """The elements at per-row positions `pos` (shaped like the input, size 1 at `axis`)."""
    out = tuple(jnp.take_along_axis(a, pos, axis=axis) for a in sorted_pair)
    return out if keepdim else tuple(jnp.squeeze(a, axis) for a in out)


@lower(aten.kthvalue.default)
def kthvalue(x, k, dim=-1, keepdim=False):
    if x.ndim == 0:
        return _zero_dim(x)
    axis = dim % x.ndim
    pair = _sort(x, axis)
    pos = jnp.full(pair[0].shape[:axis] + (1,) + pair[0].shape[axis + 1:], k - 1, jnp.int64)
    return _pick(pair, pos, axis, keepdim)


def _median(x, axis, keepdim, ignore_nan):
    """The lower median. With NaNs: median gives the first NaN (value and index);
    nanmedian the lower median of the others (the middle NaN when all are NaN)."""
    pair = _sort(x, axis)
    n = x.shape[axis]
    nans = jnp.sum(jnp.isnan(x), axis=axis, keepdims=True, dtype=jnp.int64)
    if ignore_nan:
        pos = jnp.where(nans < n, (n - nans - 1) // 2, (n - 1) // 2)
    else:
        pos = jnp.where(nans > 0, n - nans, (n - 1) // 2)
    return _pick(pair, pos, axis, keepdim)


@lower(aten.median.default)
def median(x):
    return _median(x.reshape(-1), 0, False, ignore_nan=False)[0]


@lower(aten.nanmedian.default)
def nanmedian(x):
    return _median(x.reshape(-1), 0, False, ignore_nan=True)[0]


@lower(aten.median.dim)
def median_dim(x, dim, keepdim=False):
    if x.ndim == 0:
        return _zero_dim(x)
    return _median(x, dim % x.ndim, keepdim, ignore_nan=False)


@lower(aten.nanmedian.dim)
def nanmedian_dim(x, dim, keepdim=False):
    if x.ndim == 0:
        return _zero_dim(x)
    return _median(x, dim % x.ndim, keepdim, ignore_nan=True)


@lower(aten.mode.default)
def mode(x, dim=-1, keepdim=False):
    """The most frequent value (the smallest on ties) and the index of its last occurrence:
    run lengths over the stably sorted values; the first position reaching the longest run
    ends the smallest such run."""
    if x.ndim == 0:
        return _zero_dim(x)
    axis = dim % x.ndim
    values, indices = _sort(x, axis)
    iota = lax.broadcasted_iota(jnp.int64, x.shape, axis)
    prev = jnp.roll(values, 1, axis)
    starts = jnp.where((iota == 0) | (values != prev), iota, 0)
    run = iota - lax.cummax(starts, axis=axis) + 1
    pos = jnp.argmax(run, axis=axis, keepdims=True)
    return _pick((values, indices), pos, axis, keepdim)


@lower(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(seq, values, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points in the last dim of `seq` (1-d, or one row per row of `values`)."""
    if sorter is not None:
        seq = jnp.take_along_axis(seq, sorter, axis=-1)
    side = side or ("right" if right else "left")
    seq, values = promote(seq, values)
    dtype = jnp.int32 if out_int32 else jnp.int64
    if seq.ndim <= 1:
        return jnp.searchsorted(seq, values, side=side).astype(dtype)
    rows = seq.reshape(-1, seq.shape[-1])
    out = jax.vmap(lambda r, v: jnp.searchsorted(r, v, side=side))(
        rows, values.reshape(rows.shape[0], -1))
    return out.reshape(values.shape).astype(dtype)


@lower(aten.bucketize.Tensor, aten.bucketize.Scalar)
def bucketize(values, boundaries, out_int32=False, right=False):
    return searchsorted(boundaries, values, out_int32=out_int32, right=right)


# ---- unique (output shapes depend on values: run eagerly) -----------------------------------

def _none():
    """An output not asked for: empty, as on the CPU (made when used: a jax array made at
    import would start jax's backend before jax.distributed joins the processes)."""
    return jnp.zeros((0,), jnp.int64)


def _rows(x, dim):
    """x's slices along `dim` as the rows of a 2-D array (dim None: x's elements)."""
    if dim is None:
        return x.reshape(-1, 1)
    return jnp.moveaxis(x, dim, 0).reshape(x.shape[dim], -1)


def _from_rows(rows, x, dim):
    if dim is None:
        return rows.reshape(-1)
    shape = list(jnp.moveaxis(x, dim, 0).shape)
    return jnp.moveaxis(rows.reshape([rows.shape[0]] + shape[1:]), 0, dim)


def _unique(x, dim, return_inverse, return_counts):
    """Sorted unique elements (rows along dim, in lexicographic order); each NaN is its own
    value, sorted last, as on the CPU."""
    if x.size == 0 and dim is None:
        inverse = jnp.zeros(x.shape, jnp.int64) if return_inverse else _none()
        return x.reshape(-1), inverse, _none()
    rows, inverse, counts = jnp.unique(_rows(x, dim), axis=0, return_inverse=True,
                                       return_counts=True, equal_nan=False)
    inverse = inverse.reshape(x.shape if dim is None else (x.shape[dim],)).astype(jnp.int64)
    return (_from_rows(rows, x, dim), inverse if return_inverse else _none(),
            counts.astype(jnp.int64) if return_counts else _none())


@lower(aten._unique2.default, dynamic_shape=True)
def unique2(x, sorted=True, return_inverse=False, return_counts=False):
    return _unique(x, None, return_inverse, return_counts)


@lower(aten._unique.default, dynamic_shape=True)
def unique_(x, sorted=True, return_inverse=False):
    return _unique(x, None, return_inverse, False)[:2]


@lower(aten.unique_dim.default, dynamic_shape=True)
def unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):
    return _unique(x, dim % max(x.ndim, 1), return_inverse, return_counts)


@lower(aten.unique_consecutive.default, dynamic_shape=True)
def unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    """The first of each run of equal elements (rows along dim); NaNs never equal."""
    dim = None if dim is None else dim % max(x.ndim, 1)
    rows = _rows(x, dim)
    starts = jnp.concatenate([jnp.ones((min(rows.shape[0], 1),), bool),
                              jnp.any(rows[1:] != rows[:-1], axis=1)])
    group = jnp.cumsum(starts) - 1
    first = jnp.nonzero(starts)[0]
    counts = jnp.diff(jnp.append(first, rows.shape[0]))
    inverse = group.reshape(x.shape if dim is None else (x.shape[dim],)).astype(jnp.int64)
    return (_from_rows(rows[first], x, dim), inverse if return_inverse else _none(),
            counts.astype(jnp.int64) if return_counts else _none())
