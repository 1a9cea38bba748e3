"""Pooling: max, average, adaptive and fractional max pooling, 1d to 3d (1d ops reach the
engine as their 2d forms). Upsampling is in resampling.py.

Window geometry is static, so index tables and divisors are numpy constants. Max pooling
returns PyTorch's indices (flat positions in each input plane): the first maximum of a
window in row-major order, or its last nan. Average pooling gets its backward as the
transpose of the forward function. (fractional_max_pool3d_backward has no meta kernel in
PyTorch, so no lowering: the engine takes output shapes from meta kernels.)
"""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from . import aten, lower
from ._linear import linear_backward
from ._types import float_opmath


def _tuple(v, nd, default=None):
    if v is None or len(v) == 0:
        return default
    return tuple(v) * nd if len(v) == 1 else tuple(v)


def _params(nd, kernel, stride, padding, dilation=(1,)):
    k = _tuple(kernel, nd)
    return k, _tuple(stride, nd, k), _tuple(padding, nd), _tuple(dilation, nd)


def _out_size(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _scatter_indices(grad, input_shape, indices, nd):
    """Adds each gradient at its flat index in its input plane (max pooling backward)."""
    plane = math.prod(input_shape[-nd:])
    g = grad.reshape(-1, math.prod(grad.shape[-nd:])).astype(float_opmath(grad.dtype))
    idx = indices.reshape(g.shape)
    rows = jnp.arange(g.shape[0], dtype=idx.dtype)[:, None]
    return jnp.zeros((g.shape[0], plane), g.dtype).at[rows, idx].add(g).reshape(input_shape)


def _select_max(patches, valid, table):
    """Max over the last axis of `patches` and PyTorch's index of it: the first maximum
    among `valid` entries, or the last nan. `table` maps (window position, entry) to the
    flat input index."""
    m = jnp.max(patches, axis=-1)
    hit = valid & (patches == m[..., None])
    choose = jnp.argmax(hit, axis=-1)
    if jnp.issubdtype(patches.dtype, jnp.inexact):
        nans = valid & jnp.isnan(patches)
        last_nan = patches.shape[-1] - 1 - jnp.argmax(nans[..., ::-1], axis=-1)
        choose = jnp.where(jnp.any(nans, axis=-1), last_nan, choose)
    table = jnp.broadcast_to(jnp.asarray(table, jnp.int64), patches.shape)
    return m, jnp.take_along_axis(table, choose[..., None], axis=-1)[..., 0]


def _lowest(dtype):
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.array(-jnp.inf, dtype)
    if dtype == np.bool_:
        return jnp.array(False)
    return jnp.array(jnp.iinfo(dtype).min, dtype)


# ---- max pooling --------------------------------------------------------------------------

def _max_pool(x, nd, kernel, stride, padding, dilation, ceil_mode):
    k, s, p, d = _params(nd, kernel, stride, padding, dilation)
    sizes = x.shape[-nd:]
    out = [_out_size(*a, ceil_mode) for a in zip(sizes, k, s, p, d)]
    lead = x.ndim - nd
    hi = [(o - 1) * ss + dd * (kk - 1) + 1 - pp - n for o, ss, dd, kk, pp, n in zip(out, s, d, k, p, sizes)]
    xp = jax.lax.pad(x, _lowest(x.dtype), [(0, 0, 0)] * lead + [(pp, h, 0) for pp, h in zip(p, hi)])
    slices, positions = [], []
    for off in itertools.product(*(range(kk) for kk in k)):
        start = [o_ * dd for o_, dd in zip(off, d)]
        limit = [st + (o - 1) * ss + 1 for st, o, ss in zip(start, out, s)]
        slices.append(jax.lax.slice(xp, (0,) * lead + tuple(start), xp.shape[:lead] + tuple(limit),
                                    (1,) * lead + tuple(s)))
        # input position of this window entry for every output position, per dim
        positions.append(np.meshgrid(*(np.arange(o) * ss - pp + o_ * dd
                                       for o, ss, pp, o_, dd in zip(out, s, p, off, d)),
                                     indexing="ij"))
    patches = jnp.stack(slices, axis=-1)
    pos = np.stack([np.stack(ps, axis=-1) for ps in positions], axis=-2)  # (*out, K, nd)
    valid = np.all((pos >= 0) & (pos < np.asarray(sizes)), axis=-1)
    table = np.sum(pos * np.asarray([math.prod(sizes[i + 1:]) for i in range(nd)]), axis=-1)
    return _select_max(patches, valid, table)


@lower(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(x, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    return _max_pool(x, 2, kernel_size, stride, padding, dilation, ceil_mode)


@lower(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(x, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    return _max_pool(x, 3, kernel_size, stride, padding, dilation, ceil_mode)


@lower(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    return _scatter_indices(grad, x.shape, indices, 2)


@lower(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode,
                                     indices):
    return _scatter_indices(grad, x.shape, indices, 3)


# ---- average pooling ----------------------------------------------------------------------

def _avg_divisor(sizes, out, k, s, p, count_include_pad):
    """Per output position: the window size clipped to the padded input, or (without
    count_include_pad) the number of input elements it covers."""
    divisor = np.ones((), np.float64)
    for n, o, kk, ss, pp in zip(sizes, out, k, s, p):
        start = np.arange(o) * ss - pp
        end = np.minimum(start + kk, n + pp)
        if count_include_pad:
            count = end - start
        else:
            count = np.minimum(end, n) - np.maximum(start, 0)
        divisor = np.multiply.outer(divisor, count)
    return divisor


def _avg_pool(x, nd, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    k, s, p, _ = _params(nd, kernel, stride, padding)
    sizes = x.shape[-nd:]
    out = [_out_size(n, kk, ss, pp, 1, ceil_mode) for n, kk, ss, pp in zip(sizes, k, s, p)]
    lead = x.ndim - nd
    hi = [(o - 1) * ss + kk - pp - n for o, ss, kk, pp, n in zip(out, s, k, p, sizes)]
    x = x.astype(float_opmath(x.dtype))
    xp = jax.lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0)] * lead + [(pp, h, 0) for pp, h in zip(p, hi)])
    summed = jax.lax.reduce_window(xp, np.zeros((), x.dtype), jax.lax.add, (1,) * lead + k,
                                   (1,) * lead + s, "VALID")
    if divisor_override:
        return summed / divisor_override
    return summed / _avg_divisor(sizes, out, k, s, p, count_include_pad).astype(x.dtype)


@lower(aten.avg_pool2d.default)
def avg_pool2d(x, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(x, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@lower(aten.avg_pool3d.default)
def avg_pool3d(x, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(x, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@lower(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    args = (2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return linear_backward(lambda v: _avg_pool(v, *args), x.shape, float_opmath(x.dtype))(grad)


@lower(aten.avg_pool3d_backward.default)
def avg_pool3d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    args = (3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    return linear_backward(lambda v: _avg_pool(v, *args), x.shape, float_opmath(x.dtype))(grad)


# ---- adaptive pooling ---------------------------------------------------------------------

def _adaptive_bounds(n, o):
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def _adaptive_avg(x, output_size):
    """Separable: each spatial dim is averaged on its own (a reshape where windows are even,
    else a matrix of window weights)."""
    nd = len(output_size)
    x = x.astype(float_opmath(x.dtype))
    for i, o in enumerate(output_size):
        ax = x.ndim - nd + i
        n = x.shape[ax]
        if n % o == 0:
            x = jnp.mean(x.reshape(x.shape[:ax] + (o, n // o) + x.shape[ax + 1:]), axis=ax + 1)
            continue
        start, end = _adaptive_bounds(n, o)
        cols = np.arange(n)
        weights = ((cols >= start[:, None]) & (cols < end[:, None])) / (end - start)[:, None]
        x = jnp.moveaxis(jnp.tensordot(x, jnp.asarray(weights.T, x.dtype), axes=([ax], [0]),
                                       precision=jax.lax.Precision.HIGHEST), -1, ax)
    return x


@lower(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool(x, output_size):
    return _adaptive_avg(x, output_size)


def _adaptive_avg_backward(grad, x, nd):
    return linear_backward(lambda v: _adaptive_avg(v, grad.shape[-nd:]), x.shape, float_opmath(x.dtype))(grad)


@lower(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(grad, x):
    return _adaptive_avg_backward(grad, x, 2)


@lower(aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool3d_backward(grad, x):
    return _adaptive_avg_backward(grad, x, 3)


def _adaptive_max(x, output_size):
    nd = len(output_size)
    lead = x.ndim - nd
    sizes = x.shape[lead:]
    tables = []
    for n, o in zip(sizes, output_size):
        start, end = _adaptive_bounds(n, o)
        span = np.arange(int(np.max(end - start)))
        tables.append(np.minimum(start[:, None] + span, end[:, None] - 1))  # (o, kmax)
    for i, t in enumerate(tables):
        x = jnp.take(x, t, axis=lead + 2 * i)  # (*lead, o1, k1, o2, k2, ...)
    x = jnp.transpose(x, tuple(range(lead)) + tuple(lead + 2 * i for i in range(nd))
                      + tuple(lead + 2 * i + 1 for i in range(nd)))
    patches = x.reshape(x.shape[:lead + nd] + (-1,))
    strides = [math.prod(sizes[i + 1:]) for i in range(nd)]
    table = sum(np.reshape(t * st, tuple(t.shape[0] if j == i else 1 for j in range(nd))
                           + tuple(t.shape[1] if j == i else 1 for j in range(nd)))
                for i, (t, st) in enumerate(zip(tables, strides)))
    table = table.reshape(tuple(output_size) + (-1,))
    return _select_max(patches, np.ones(table.shape, bool), table)


@lower(aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def adaptive_max_pool(x, output_size):
    return _adaptive_max(x, output_size)


@lower(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(grad, x, indices):
    return _scatter_indices(grad, x.shape, indices, 2)


@lower(aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool3d_backward(grad, x, indices):
    return _scatter_indices(grad, x.shape, indices, 3)


# ---- fractional max pooling ---------------------------------------------------------------

def _fractional_starts(sample, n_in, n_out, k):
    """PyTorch's pseudo-random window starts, computed in the samples' dtype:
    int((i + u) * alpha) - int(u * alpha), the last window ending at the input's end."""
    if n_out == 1:
        return jnp.full(sample.shape + (1,), n_in - k, jnp.int64)
    alpha = jnp.asarray(n_in - k, sample.dtype) / jnp.asarray(n_out - 1, sample.dtype)
    i = jnp.arange(n_out - 1, dtype=sample.dtype)
    u = sample[..., None]
    starts = ((i + u) * alpha).astype(jnp.int64) - (u * alpha).astype(jnp.int64)
    last = jnp.full(sample.shape + (1,), n_in - k, jnp.int64)
    return jnp.concatenate([starts, last], -1)


def _fractional_max_pool(x, kernel_size, output_size, samples, nd):
    unbatched = x.ndim == nd + 1
    if unbatched:
        x, samples = x[None], samples.reshape((1,) + samples.shape[-2:])
    sizes = x.shape[2:]
    # PyTorch's order of the samples: (w, h) in 2d, (t, h, w) in 3d
    order = (1, 0) if nd == 2 else (0, 1, 2)
    flat = 0
    for k in range(nd):
        starts = _fractional_starts(samples[..., order[k]], sizes[k], output_size[k], kernel_size[k])
        pos = starts[..., :, None] + jnp.arange(kernel_size[k], dtype=jnp.int64)  # (N, C, out, kernel)
        shape = [1] * (2 * nd)
        shape[k], shape[nd + k] = output_size[k], kernel_size[k]
        flat = flat * sizes[k] + pos.reshape(pos.shape[:2] + tuple(shape))
    flat = jnp.broadcast_to(flat, x.shape[:2] + tuple(output_size) + tuple(kernel_size))
    flat = flat.reshape(x.shape[:2] + tuple(output_size) + (-1,))
    planes = x.reshape(x.shape[:2] + (-1,))
    patches = jnp.take_along_axis(planes, flat.reshape(x.shape[:2] + (-1,)), axis=-1).reshape(flat.shape)
    out, indices = _select_max(patches, True, flat)
    if unbatched:
        out, indices = out[0], indices[0]
    return out, indices


@lower(aten.fractional_max_pool2d.default)
def fractional_max_pool2d(x, kernel_size, output_size, random_samples):
    return _fractional_max_pool(x, kernel_size, output_size, random_samples, 2)


@lower(aten.fractional_max_pool3d.default)
def fractional_max_pool3d(x, kernel_size, output_size, random_samples):
    return _fractional_max_pool(x, kernel_size, output_size, random_samples, 3)


@lower(aten.fractional_max_pool2d_backward.default)
def fractional_max_pool2d_backward(grad, x, kernel_size, output_size, indices):
    return _scatter_indices(grad, x.shape, indices, 2)
