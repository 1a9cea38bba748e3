"""Less common ops PyTorch has no decomposition for: pairwise distances, grid sampling,
anti-aliased bilinear resizing, segment reductions, fractional max pooling, the CTC loss's
forward, the deprecated cholesky, Householder products, general eigendecomposition, and
small factories. (Ops without a meta kernel in PyTorch — linalg_lstsq, geqrf,
_ctc_loss_backward, the margin losses' backwards, fractional_max_pool3d_backward — cannot
be lowered: the engine takes output shapes from meta kernels.)

Backward ops of nonlinear forwards whose gradient formulas are the chain rule through the
same arithmetic (grid sampling) are the vjp of the forward lowering; where PyTorch's
formulas pick particular values at non-differentiable points (clipping at a border,
distances of zero, ties in a segment's max), the code says so and follows PyTorch.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import runtime, torch_compat
from . import aten, lower
from ._types import float_of
from .linalg import cholesky_ex
from .pooling import _scatter_indices, _select_max


def _acc(dtype):
    """float16/bfloat16 accumulate in float32, as PyTorch's CPU kernels."""
    dtype = float_of(dtype)
    return np.dtype("float32") if dtype.itemsize < 4 else dtype


# ---- factories ----------------------------------------------------------------------------

@lower(aten._efficientzerotensor.default)
def efficient_zero_tensor(size, dtype=None, layout=None, device=None, pin_memory=None):
    """A plain zero tensor (XLA has no ZeroTensor): what `sgn`'s backward of real inputs asks."""
    return jnp.zeros(tuple(size), runtime.to_jax_dtype(dtype) if dtype is not None else jnp.float32)


@lower(aten.resize.default)
def resize(x, size, memory_format=None):
    """The functional `resize_`: x's leading elements (row-major) in the new shape; elements
    beyond x's are uninitialised in PyTorch, zeros here."""
    n = math.prod(size)
    flat = x.reshape(-1)[:n]
    return jnp.pad(flat, (0, n - flat.shape[0])).reshape(tuple(size))


# ---- pairwise distances -----------------------------------------------------------------------

def _euclidean_mm(x1, x2):
    """PyTorch's matrix-product form of p=2 distances (|a|² - 2ab + |b|², clamped)."""
    n1 = jnp.sum(x1 * x1, -1, keepdims=True)
    n2 = jnp.sum(x2 * x2, -1, keepdims=True)
    a = jnp.concatenate([-2 * x1, n1, jnp.ones_like(n1)], -1)
    b = jnp.concatenate([x2, jnp.ones_like(n2), n2], -1)
    d2 = jnp.matmul(a, jnp.swapaxes(b, -1, -2), precision=lax.Precision.HIGHEST)
    return jnp.sqrt(jnp.maximum(d2, 1e-30))


def _batch(x1, x2):
    batch = jnp.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return jnp.broadcast_to(x1, batch + x1.shape[-2:]), jnp.broadcast_to(x2, batch + x2.shape[-2:])


@lower(aten._cdist_forward.default, static_scalars=True)
def cdist_forward(x1, x2, p, compute_mode=None):
    """compute_mode: None/0 uses the matrix product for p=2 when either side has more
    than 25 rows, 1 always, 2 never (PyTorch's rule)."""
    x1, x2 = _batch(x1, x2)
    mode = compute_mode or 0
    if p == 2 and (mode == 1 or (mode == 0 and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        return _euclidean_mm(x1, x2)
    diff = jnp.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return jnp.sum(diff != 0, -1).astype(x1.dtype)
    if p == math.inf:
        return jnp.max(diff, -1, initial=0).astype(x1.dtype)
    if p == 1:
        return jnp.sum(diff, -1)
    if p == 2:
        return jnp.sqrt(jnp.sum(diff * diff, -1))
    return jnp.sum(diff ** p, -1) ** (1 / p)


@lower(aten._cdist_backward.default, static_scalars=True)
def cdist_backward(grad, x1, x2, p, dist):
    """PyTorch's per-p formulas; pairs at distance 0 (and zero differences for p < 1)
    contribute 0."""
    x1e, x2e = _batch(x1, x2)
    diff = x1e[..., :, None, :] - x2e[..., None, :, :]
    g, d = grad[..., None], dist[..., None]
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        out = jnp.zeros_like(diff)
    elif p == 1:
        out = g * jnp.sign(diff)
    elif p == 2:
        out = jnp.where(d == 0, zero, g * diff / jnp.where(d == 0, 1, d))
    elif p == math.inf:
        out = g * jnp.sign(diff) * (jnp.abs(diff) == d)
    else:
        a = jnp.abs(diff)
        safe_d = jnp.where(d == 0, 1, d)
        if p < 2:
            skip = (d == 0) | ((diff == 0) & (p < 1))
            val = jnp.sign(diff) * jnp.where(skip, 1, a) ** (p - 1) * g / safe_d ** (p - 1)
        else:
            skip = d == 0
            val = diff * a ** (p - 2) * g / safe_d ** (p - 1)
        out = jnp.where(skip, zero, val)
    return jnp.sum(out, -2).reshape(x1e.shape).astype(x1.dtype)


# ---- grid sampling ----------------------------------------------------------------------------

_BILINEAR, _NEAREST, _BICUBIC = range(3)
_ZEROS, _BORDER, _REFLECTION = range(3)


def _clip(x, size):
    """Clamp to [0, size - 1], with PyTorch's gradient: 0 at the borders, as outside."""
    return jnp.where(x <= 0, jnp.zeros((), x.dtype), jnp.where(x >= size - 1, size - 1, x).astype(x.dtype))


def _reflect(x, twice_low, twice_high):
    if twice_low == twice_high:
        return jnp.zeros_like(x)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = jnp.abs(x - low)
    extra = jnp.fmod(x, span)
    flips = jnp.floor(x / span)
    return jnp.where(flips % 2 == 0, extra + low, span - extra + low)


def _pad_coordinates(x, size, padding, align_corners):
    if padding == _BORDER:
        return _clip(x, size)
    if padding == _REFLECTION:
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return _clip(x, size)
    return x


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _interpolate(x, index, weights, sizes):
    """sum over taps t of weights[t] * x[n, c, index[t]]: x (N, C, *sizes); `index`, one
    integer array (N, T, *out) per spatial dim, and `weights` (N, T, *out) for T taps.
    Taps outside the input count 0. One gather for all taps."""
    valid = True
    flat = 0
    for i, n in zip(index, sizes):
        valid = valid & (i >= 0) & (i < n)
        flat = flat * n + jnp.clip(i, 0, n - 1)
    planes = x.reshape(x.shape[:2] + (-1,))
    taken = jax.vmap(lambda plane, idx: plane[:, idx])(planes, flat.reshape(flat.shape[0], -1))
    taken = taken.reshape(x.shape[:2] + flat.shape[1:])
    weights = jnp.where(valid, weights, 0).astype(x.dtype)
    return jnp.sum(taken * weights[:, None], axis=2)


def _cubic_coefficients(t):
    a = -0.75

    def near(s):  # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):  # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return jnp.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1)


def _grid_sample(x, grid, mode, padding, align_corners):
    """x (N, C, *sizes), grid (N, *out, nd) with coordinates in reverse dim order (x, y[, z])."""
    sizes = x.shape[2:]
    nd = len(sizes)
    coords = [_unnormalize(grid[..., nd - 1 - k], n, align_corners) for k, n in enumerate(sizes)]
    if mode == _BICUBIC:  # 4x4 taps around the point, each padded on its own
        (y, x_), (h, w) = coords, sizes
        by, bx = jnp.floor(y), jnp.floor(x_)
        taps = jnp.arange(-1, 3, dtype=y.dtype)[:, None]
        iy = _pad_coordinates(by[:, None] + taps[:, :, None], h, padding, align_corners)  # (N, 4, *out)
        ix = _pad_coordinates(bx[:, None] + taps[:, :, None], w, padding, align_corners)
        index = [jnp.repeat(iy, 4, 1), jnp.tile(ix, (1, 4) + (1,) * (ix.ndim - 2))]
        wy, wx = _cubic_coefficients(y - by), _cubic_coefficients(x_ - bx)
        weights = (wy[:, :, None] * wx[:, None, :]).reshape(index[0].shape)
        return _interpolate(x, [i.astype(jnp.int64) for i in index], weights, sizes)
    coords = [_pad_coordinates(c, n, padding, align_corners) for c, n in zip(coords, sizes)]
    if mode == _NEAREST:
        index = [jnp.round(c)[:, None].astype(jnp.int64) for c in coords]
        return _interpolate(x, index, jnp.ones_like(coords[0])[:, None], sizes)
    base = [jnp.floor(c) for c in coords]
    frac = [c - b for c, b in zip(coords, base)]
    corners = np.array(list(np.ndindex(*(2,) * nd)))  # (2**nd, nd) offsets of the corners
    index, weights = [], 1
    for k in range(nd):
        o = corners[:, k].reshape((1, -1) + (1,) * (base[k].ndim - 1))
        index.append((base[k][:, None] + o).astype(jnp.int64))
        weights = weights * jnp.where(o == 1, frac[k][:, None], 1 - frac[k][:, None])
    return _interpolate(x, index, weights, sizes)


@lower(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default)
def grid_sampler(x, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_sample(x, grid, interpolation_mode, padding_mode, align_corners)


@lower(aten.grid_sampler_2d_backward.default, aten.grid_sampler_3d_backward.default)
def grid_sampler_backward(grad, x, grid, interpolation_mode, padding_mode, align_corners,
                          output_mask):
    _, pullback = jax.vjp(lambda a, g: _grid_sample(a, g, interpolation_mode, padding_mode,
                                                    align_corners), x, grid)
    grad_x, grad_grid = pullback(grad.astype(x.dtype))
    return (grad_x if output_mask[0] else None), grad_grid


# ---- segment reductions -----------------------------------------------------------------------

def _segments(shape, axis, lengths, offsets):
    """(ids, counts, S): for data viewed as (B, D, P) with B the dims before `axis`, each
    element's flat segment id b * S + s (B * S for elements in no segment, which the
    reductions drop), and each segment's length, (B * S,)."""
    if offsets is None:
        zero = jnp.zeros(lengths.shape[:-1] + (1,), lengths.dtype)
        offsets = jnp.concatenate([zero, jnp.cumsum(lengths, -1)], -1)
    batch, d = math.prod(shape[:axis]), shape[axis]
    offsets = offsets.reshape(batch, -1).astype(jnp.int64)
    s = offsets.shape[-1] - 1
    pos = jnp.arange(d, dtype=jnp.int64)
    seg = jnp.sum(offsets[:, None, 1:] <= pos[:, None], -1)  # (B, D)
    inside = (seg < s) & (pos >= offsets[:, :1])
    ids = jnp.where(inside, jnp.arange(batch, dtype=jnp.int64)[:, None] * s + seg, batch * s)
    counts = (offsets[:, 1:] - offsets[:, :-1]).reshape(-1)
    return ids.reshape(-1), counts, s


def _flat(x, axis):
    return x.reshape(math.prod(x.shape[:axis]) * x.shape[axis], -1)


def _unflat(x, shape, axis, s):
    return x.reshape(shape[:axis] + (s,) + shape[axis + 1:])


_SEGMENT = {"sum": jax.ops.segment_sum, "mean": jax.ops.segment_sum, "max": jax.ops.segment_max,
            "min": jax.ops.segment_min, "prod": jax.ops.segment_prod}


@lower(aten.segment_reduce.default, static_scalars=True)
def segment_reduce(data, reduce, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
                   initial=None):
    """Empty segments give `initial`, else 0 (sum), nan (mean), -inf (max), inf (min), 1
    (prod); a mean counts `initial` in its sum but not in its length."""
    axis = axis % data.ndim
    ids, counts, s = _segments(data.shape, axis, lengths, offsets)
    x = _flat(data, axis).astype(_acc(data.dtype))
    out = _SEGMENT[reduce](x, ids, num_segments=counts.shape[0])
    counts = counts[:, None]
    if initial is not None:
        init = jnp.asarray(initial, x.dtype)
        out = {"sum": out + init, "mean": out + init, "max": jnp.maximum(out, init),
               "min": jnp.minimum(out, init), "prod": out * init}[reduce]
    if reduce == "mean":
        mean = out / counts.astype(x.dtype)
        out = mean if initial is None else jnp.where(counts == 0, jnp.asarray(initial, x.dtype), mean)
    return _unflat(out, data.shape, axis, s).astype(data.dtype)


@lower(aten._segment_reduce_backward.default, static_scalars=True)
def segment_reduce_backward(grad, output, data, reduce, lengths=None, offsets=None, axis=0,
                            initial=None):
    """Ties of a max/min (nans count as ties) share a positive gradient equally and each
    get a negative one whole (PyTorch's CPU kernel divides only positive values); a
    product's gradient at a zero is the product of the segment's other elements (and
    `initial`)."""
    axis = axis % data.ndim
    ids, counts, s = _segments(data.shape, axis, lengths, offsets)
    acc = _acc(data.dtype)
    x = _flat(data, axis).astype(acc)

    def per_element(seg_values):  # a (B * S, P) array at each element's segment (0 if none)
        padded = jnp.concatenate([seg_values, jnp.zeros((1,) + seg_values.shape[1:], seg_values.dtype)])
        return padded[ids]

    g = grad.reshape(-1, x.shape[-1]).astype(acc)
    out = output.reshape(g.shape).astype(acc)
    n = counts.shape[0]
    if reduce == "sum":
        result = per_element(g)
    elif reduce == "mean":
        result = per_element(g / counts[:, None].astype(acc))
    elif reduce in ("max", "min"):
        hit = (x == per_element(out)) | jnp.isnan(x)
        ties = per_element(jax.ops.segment_sum(hit.astype(acc), ids, num_segments=n))
        result = jnp.where(hit, per_element(g), 0).astype(acc)
        result = jnp.where((ties > 1) & (result > 0), result / ties, result)  # PyTorch's rule
    else:
        zero = x == 0
        zeros = jax.ops.segment_sum(zero.astype(jnp.int64), ids, num_segments=n)
        others = jax.ops.segment_prod(jnp.where(zero, 1, x), ids, num_segments=n)
        if initial is not None:
            others = others * jnp.asarray(initial, acc)
        at_zero = jnp.where(per_element(zeros) == 1, per_element(others), 0)
        ge = per_element(g)
        result = jnp.where(zero, ge * at_zero, ge * per_element(out) / jnp.where(zero, 1, x))
    return result.reshape(data.shape).astype(data.dtype)


# ---- anti-aliased bilinear resizing ---------------------------------------------------------

def _aa_weights(n_in, n_out, align_corners, scale):
    """(n_out, n_in) weights of PyTorch's anti-aliased linear filter: a triangle as wide
    as the scale when downsampling, each row normalised to sum 1."""
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        scale = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    support = scale if scale >= 1.0 else 1.0
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    w = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        j = np.arange(lo, hi)
        row = np.maximum(0.0, 1.0 - np.abs((j - center + 0.5) * invscale))
        total = row.sum()
        w[i, lo:hi] = row / total if total != 0 else row
    return w


def _aa_matrices(in_hw, out_hw, align_corners, scales_h, scales_w, dtype):
    return [jnp.asarray(_aa_weights(i, o, align_corners, s), dtype)
            for i, o, s in zip(in_hw, out_hw, (scales_h, scales_w))]


@lower(aten._upsample_bilinear2d_aa.default)
def upsample_bilinear2d_aa(x, output_size, align_corners, scales_h=None, scales_w=None):
    acc = _acc(x.dtype)
    wh, ww = _aa_matrices(x.shape[-2:], output_size, align_corners, scales_h, scales_w, acc)
    return jnp.einsum("oh,nchw,pw->ncop", wh, x.astype(acc), ww, precision=lax.Precision.HIGHEST)


@lower(aten._upsample_bilinear2d_aa_backward.default)
def upsample_bilinear2d_aa_backward(grad, output_size, input_size, align_corners, scales_h=None,
                                    scales_w=None):
    acc = _acc(grad.dtype)
    wh, ww = _aa_matrices(input_size[-2:], output_size, align_corners, scales_h, scales_w, acc)
    return jnp.einsum("oh,ncop,pw->nchw", wh, grad.astype(acc), ww, precision=lax.Precision.HIGHEST)


# ---- fractional max pooling -----------------------------------------------------------------

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



# ---- CTC loss -----------------------------------------------------------------------------

def _ctc_targets(targets, target_lengths, width):
    """(N, width) padded targets from PyTorch's 2-d padded or 1-d concatenated form."""
    if targets.ndim == 2:
        return jnp.pad(targets[:, :width], ((0, 0), (0, max(0, width - targets.shape[1]))))
    starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
    pos = np.minimum(starts[:, None] + np.arange(width), max(targets.shape[0] - 1, 0))
    return targets[pos] if targets.shape[0] else jnp.zeros(pos.shape, targets.dtype)


@lower(aten._ctc_loss.default)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """(negative log-likelihood (N,), log_alpha (N, T, 2 * max_target + 1)): the forward
    recursion of Graves et al. in PyTorch's arithmetic (a max-shifted log of summed
    exps). log_alpha is -inf where PyTorch leaves it uninitialised (its backward reads
    only the rest); `zero_infinity` is applied by the caller."""
    t_max, n = log_probs.shape[:2]
    width = max(target_lengths, default=0)
    states = 2 * width + 1
    labels = _ctc_targets(targets, target_lengths, width).astype(jnp.int64)
    primes = jnp.full((n, states), blank, jnp.int64).at[:, 1::2].set(labels)  # (N, S')
    lengths = np.asarray(target_lengths, np.int64)
    in_lengths = np.asarray(input_lengths, np.int64)
    s_idx = np.arange(states)
    valid = s_idx[None] <= 2 * lengths[:, None]  # (N, S')
    skip = np.zeros((n, states), bool)
    skip[:, 2:] = True
    skip = jnp.asarray(skip) & (primes != jnp.roll(primes, 2, 1))
    neginf = jnp.asarray(-jnp.inf, log_probs.dtype)
    emit = jnp.take_along_axis(log_probs, jnp.broadcast_to(primes[None], (t_max, n, states)), 2)

    first = jnp.where(jnp.asarray((s_idx[None] == 0) | ((s_idx[None] == 1) & (lengths[:, None] > 0))),
                      emit[0], neginf)

    def step(alpha, inputs):
        t, e = inputs
        la2 = jnp.pad(alpha[:, :-1], ((0, 0), (1, 0)), constant_values=-jnp.inf)
        la3 = jnp.where(skip, jnp.pad(alpha[:, :-2], ((0, 0), (2, 0)), constant_values=-jnp.inf), neginf)
        m = jnp.maximum(jnp.maximum(alpha, la2), la3)
        m = jnp.where(m == -jnp.inf, 0, m)
        new = jnp.log(jnp.exp(alpha - m) + jnp.exp(la2 - m) + jnp.exp(la3 - m)) + m + e
        new = jnp.where(jnp.asarray(valid) & (t < jnp.asarray(in_lengths))[:, None], new, neginf)
        return new, new

    _, rest = lax.scan(step, first, (jnp.arange(1, t_max), emit[1:]))
    alphas = jnp.concatenate([first[None], rest], 0)  # (T, N, S')
    alphas = jnp.where(jnp.asarray(in_lengths > 0)[None, :, None], alphas, neginf)
    last = alphas[np.maximum(in_lengths - 1, 0), np.arange(n)]  # (N, S')
    l1 = last[np.arange(n), 2 * lengths]
    l2 = last[np.arange(n), np.maximum(2 * lengths - 1, 0)]
    m = jnp.maximum(l1, l2)
    m = jnp.where(m == -jnp.inf, 0, m)
    both = jnp.log(jnp.exp(l1 - m) + jnp.exp(l2 - m)) + m
    likelihood = jnp.where(jnp.asarray(lengths == 0), l1, both)
    empty = jnp.where(jnp.asarray(lengths == 0), 0, neginf)
    likelihood = jnp.where(jnp.asarray(in_lengths == 0), empty, likelihood)
    return -likelihood, jnp.swapaxes(alphas, 0, 1)


# ---- linear algebra ---------------------------------------------------------------------------

@lower(*torch_compat.aten_overloads("cholesky.default"))
def cholesky(a, upper=False):
    """The deprecated torch.cholesky. A matrix that is not positive-definite gives nans
    (PyTorch raises; a lowering cannot)."""
    if a.size == 0:
        return jnp.zeros_like(a)
    return cholesky_ex(a, upper)[0]


@lower(aten.linalg_householder_product.default)
def householder_product(a, tau):
    return lax.linalg.householder_product(a, tau)


@lower(aten.ormqr.default)
def ormqr(a, tau, other, left=True, transpose=False):
    """Q (from reflectors `a`, `tau`) applied to `other`; `transpose` is the adjoint."""
    return lax.linalg.ormqr(a, tau, other, left=left, transpose=transpose)


@lower(aten.linalg_eig.default)
def eig(a):
    """LAPACK's geev (on the host for GPU programs; XLA has no TPU kernel): eigenvectors of
    unit norm with their largest component real, as PyTorch's."""
    dtype = jnp.result_type(a.dtype, jnp.complex64)
    values, vectors = lax.linalg.eig(a, compute_left_eigenvectors=False)
    return values.astype(dtype), vectors.astype(dtype)
