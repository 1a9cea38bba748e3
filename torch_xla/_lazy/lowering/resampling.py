"""Resampling: upsampling (F.interpolate's nearest, linear and cubic modes, 1d to 3d, and
its anti-aliased bilinear mode) and grid sampling (F.grid_sample), with their backward ops.

Upsampling is linear: its backward is the transpose of the forward function. Grid
sampling's backward is the vjp of the forward, whose gradient formulas are the chain rule
through the same arithmetic; where PyTorch's pick particular values at non-differentiable
points (clipping at a border), the code says so and follows PyTorch.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import aten, lower
from ._linear import linear_backward
from ._types import float_opmath


# ---- upsampling ---------------------------------------------------------------------------

def _scale(n, o, scale, align_corners, dt):
    """PyTorch's area_pixel_compute_scale, in the kernel's float type."""
    if align_corners:
        return dt((n - 1) / (o - 1)) if o > 1 else dt(0)
    return dt(1.0 / scale) if scale is not None and scale > 0 else dt(n) / dt(o)


def _cubic_weights(t, a=-0.75):
    """The weights of the taps at -1, 0, 1 and 2 around a point at fractional offset `t`:
    PyTorch's cubic convolution (Keys, with a = -0.75), in the type of `t` and `a`."""
    def near(z):  # |z| <= 1
        return ((a + 2) * z - (a + 3)) * z * z + 1

    def far(z):  # 1 < |z| < 2
        return ((a * z - 5 * a) * z + 8 * a) * z - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(n, o, scale, mode, align_corners, dt):
    """[(input indices (o,), weights (o,) or None)] of one dim."""
    dst = np.arange(o)
    if mode in ("nearest", "nearest-exact"):
        if mode == "nearest" and o == n:
            return [(dst, None)]
        if mode == "nearest" and o == 2 * n:
            return [(dst >> 1, None)]
        s = _scale(n, o, scale, False, np.float32)
        src = dst.astype(np.float32) + np.float32(0.5 if mode == "nearest-exact" else 0)
        return [(np.minimum(np.floor(src * s).astype(np.int64), n - 1), None)]
    s = _scale(n, o, scale, align_corners, dt)
    src = s * dst.astype(dt) if align_corners else s * (dst.astype(dt) + dt(0.5)) - dt(0.5)
    if mode == "linear":
        src = np.maximum(src, dt(0))
        i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
        i1 = np.minimum(i0 + 1, n - 1)
        l1 = np.clip(src - i0.astype(dt), dt(0), dt(1))
        return [(i0, dt(1) - l1), (i1, l1)]
    i = np.floor(src).astype(np.int64)
    weights = _cubic_weights(src - i.astype(dt), dt(-0.75))
    return [(np.clip(i + j - 1, 0, n - 1), w) for j, w in enumerate(weights)]


def _rounded_like(out, x):
    """An interpolation of integer (uint8) pixels back to their type: rounded half up and
    saturated, as PyTorch's CPU kernels do after each separable pass (its fixed-point path
    can land a unit apart where the exact value is near a half)."""
    if not jnp.issubdtype(x.dtype, jnp.integer):
        return out
    info = jnp.iinfo(x.dtype)
    return jnp.clip(jnp.floor(out + 0.5), info.min, info.max).astype(x.dtype)


def _upsample(x, output_size, scales, mode, align_corners=False):
    """One separable pass per spatial dim, the last first; integer pixels are interpolated in
    float32 and rounded back after each pass, as on the CPU."""
    nd = len(output_size)
    for i in reversed(range(nd)):
        ax = x.ndim - nd + i
        dt = np.float64 if x.dtype == np.float64 else np.float32
        taps = _taps(x.shape[ax], output_size[i], scales[i], mode, align_corners, dt)
        if taps[0][1] is None:
            x = jnp.take(x, taps[0][0], axis=ax)
            continue
        xf = x.astype(float_opmath(x.dtype))
        bshape = (-1,) + (1,) * (x.ndim - ax - 1)
        out = sum(jnp.take(xf, idx, axis=ax) * jnp.asarray(w, xf.dtype).reshape(bshape)
                  for idx, w in taps)
        x = _rounded_like(out, x)
    return x


def _register_upsample(nd, mode, forward, backward, align=False):
    def fwd(x, output_size, *rest):
        if align:
            return _upsample(x, output_size, _scales(rest[1:], nd), mode, rest[0])
        return _upsample(x, output_size, _scales(rest, nd), mode)

    def bwd(grad, output_size, input_size, *rest):
        dtype = grad.dtype if mode in ("nearest", "nearest-exact") else float_opmath(grad.dtype)
        return linear_backward(lambda v: fwd(v, output_size, *rest), input_size, dtype)(grad)
    lower(forward)(fwd)
    lower(backward)(bwd)


def _scales(rest, nd):
    return tuple(rest) + (None,) * (nd - len(rest))


for _nd, _name in [(1, "1d"), (2, "2d"), (3, "3d")]:
    _register_upsample(_nd, "nearest", getattr(aten, f"upsample_nearest{_name}").default,
                       getattr(aten, f"upsample_nearest{_name}_backward").default)
    _register_upsample(_nd, "nearest-exact", getattr(aten, f"_upsample_nearest_exact{_name}").default,
                       getattr(aten, f"_upsample_nearest_exact{_name}_backward").default)
_register_upsample(1, "linear", aten.upsample_linear1d.default, aten.upsample_linear1d_backward.default, True)
_register_upsample(2, "linear", aten.upsample_bilinear2d.default, aten.upsample_bilinear2d_backward.default, True)
_register_upsample(3, "linear", aten.upsample_trilinear3d.default, aten.upsample_trilinear3d_backward.default, True)
_register_upsample(2, "cubic", aten.upsample_bicubic2d.default, aten.upsample_bicubic2d_backward.default, True)


# ---- anti-aliased bilinear resizing -------------------------------------------------------

def _aa_weights(n_in, n_out, align_corners, scale):
    """(n_out, n_in) weights of PyTorch's anti-aliased linear filter: a triangle as wide
    as the scale when downsampling, each row normalised to sum 1."""
    scale = _scale(n_in, n_out, scale, align_corners, float)
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
    acc = float_opmath(x.dtype)
    wh, ww = _aa_matrices(x.shape[-2:], output_size, align_corners, scales_h, scales_w, acc)
    if jnp.issubdtype(x.dtype, jnp.integer):  # two passes, rounded after each (see above)
        rows = _rounded_like(jnp.einsum("nchw,pw->nchp", x.astype(acc), ww,
                                        precision=lax.Precision.HIGHEST), x)
        return _rounded_like(jnp.einsum("oh,nchp->ncop", wh, rows.astype(acc),
                                        precision=lax.Precision.HIGHEST), x)
    return jnp.einsum("oh,nchw,pw->ncop", wh, x.astype(acc), ww, precision=lax.Precision.HIGHEST)


@lower(aten._upsample_bilinear2d_aa_backward.default)
def upsample_bilinear2d_aa_backward(grad, output_size, input_size, align_corners, scales_h=None,
                                    scales_w=None):
    acc = float_opmath(grad.dtype)
    wh, ww = _aa_matrices(input_size[-2:], output_size, align_corners, scales_h, scales_w, acc)
    return jnp.einsum("oh,ncop,pw->nchw", wh, grad.astype(acc), ww, precision=lax.Precision.HIGHEST)


# ---- grid sampling ------------------------------------------------------------------------

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
        wy, wx = jnp.stack(_cubic_weights(y - by), 1), jnp.stack(_cubic_weights(x_ - bx), 1)
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
