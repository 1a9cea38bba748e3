"""Reductions, segment reductions and scans, with PyTorch's dims, output dtypes and NaN rules.

`dim` conventions differ between ops: for most reductions both None and [] reduce every
axis; `any.dims`/`all.dims` with [] reduce nothing. float16/bfloat16 inputs accumulate in
float32 (as PyTorch's CPU kernels do); the engine casts results back to PyTorch's dtype.
"""
import math

import jax
import jax.numpy as jnp
import torch
from jax import lax

from ..runtime import pjrt
from . import aten, lower
from ._types import cast, float_opmath, opmath
from .elementwise import complex_logaddexp
from .meta_stand_ins import meta_stand_in


def _axes(x, dim, empty_means_all=True):
    """PyTorch's `dim` as jnp's `axis`: None for every axis, else a sorted tuple."""
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    if len(dim) == 0:
        return None if empty_means_all else ()
    if x.ndim == 0:
        return ()
    return tuple(sorted({d % x.ndim for d in dim}))


def _integral(dtype) -> bool:
    return dtype == jnp.bool_ or jnp.issubdtype(dtype, jnp.integer)


def _sum_input(x, dtype):
    """The input of sum-like ops: cast to `dtype`, else bool/int widened to int64."""
    if dtype is not None:
        return x.astype(pjrt.to_jax_dtype(dtype))
    return x.astype(jnp.int64) if _integral(x.dtype) else cast(x, opmath(x.dtype))


def _count(x, axes):
    if axes is None:
        return x.size
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@lower(aten.sum.default, aten.sum.dim_IntList)
def sum_(x, dim=None, keepdim=False, dtype=None):
    x = _sum_input(x, dtype)
    return jnp.sum(x, axis=_axes(x, dim), keepdims=keepdim)


@lower(aten.nansum.default)
def nansum(x, dim=None, keepdim=False, dtype=None):
    x = _sum_input(x, dtype)
    if not _integral(x.dtype):
        x = jnp.where(jnp.isnan(x), jnp.zeros((), x.dtype), x)
    return jnp.sum(x, axis=_axes(x, dim), keepdims=keepdim)


@lower(aten.mean.default, aten.mean.dim)
def mean(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.astype(pjrt.to_jax_dtype(dtype))
    return jnp.mean(cast(x, opmath(x.dtype)), axis=_axes(x, dim), keepdims=keepdim)


@lower(aten.prod.default)
def prod(x, dtype=None):
    return jnp.prod(_sum_input(x, dtype))


@lower(aten.prod.dim_int)
def prod_dim(x, dim, keepdim=False, dtype=None):
    x = _sum_input(x, dtype)
    return jnp.prod(x, axis=_axes(x, dim), keepdims=keepdim)


@lower(aten.amax.default, aten.max.default)
def amax(x, dim=(), keepdim=False):
    return jnp.max(x, axis=_axes(x, dim), keepdims=keepdim)


@lower(aten.amin.default, aten.min.default)
def amin(x, dim=(), keepdim=False):
    return jnp.min(x, axis=_axes(x, dim), keepdims=keepdim)


@lower(aten.aminmax.default)
def aminmax(x, dim=None, keepdim=False):
    return amin(x, dim, keepdim), amax(x, dim, keepdim)


@lower(aten.hash_tensor.default)
def hash_tensor(x, dim=(), keepdim=False, mode=0):
    """The xor of the elements' 64 bits (mode 0, the only one): floats widened to float64,
    signed integers sign-extended to int64, unsigned ones and bools zero-extended."""
    if jnp.issubdtype(x.dtype, jnp.floating):
        wide = x.astype(jnp.float64)
    elif jnp.issubdtype(x.dtype, jnp.signedinteger):
        wide = x.astype(jnp.int64)
    else:
        wide = x.astype(jnp.uint64)
    bits = lax.bitcast_convert_type(wide, jnp.uint64)
    axes = _axes(x, dim)
    axes = tuple(range(x.ndim)) if axes is None else axes
    out = lax.reduce(bits, jnp.uint64(0), lax.bitwise_xor, axes)
    if keepdim:
        out = jnp.expand_dims(out, axes)
    return out


@meta_stand_in(aten.hash_tensor.default)
def _hash_tensor_meta(x, *args, **kwargs):
    """PyTorch's meta kernel, and the CPU kernel's refusal of complex tensors."""
    if x.dtype.is_complex:
        aten.hash_tensor.default(torch.zeros(1, dtype=x.dtype))
    return aten.hash_tensor.default(x, *args, **kwargs)


def _arg(fn):
    """argmax/argmin: the first index of the extreme (NaN counts as the extreme, the first
    NaN wins); dim=None flattens."""
    def lowering(x, dim=None, keepdim=False):
        if x.ndim == 0:
            return jnp.zeros((), jnp.int64)
        return fn(x, axis=None if dim is None else dim % x.ndim, keepdims=keepdim)
    return lowering


argmax = lower(aten.argmax.default)(_arg(jnp.argmax))
argmin = lower(aten.argmin.default)(_arg(jnp.argmin))


@lower(aten.max.dim)
def max_dim(x, dim, keepdim=False):
    return amax(x, dim, keepdim), argmax(x, dim, keepdim)


@lower(aten.min.dim)
def min_dim(x, dim, keepdim=False):
    return amin(x, dim, keepdim), argmin(x, dim, keepdim)


def _var(x, dim, correction, keepdim):
    """(variance, mean): divisor max(N - correction, 0), so too few elements give inf/nan."""
    x = cast(x, opmath(x.dtype))
    axes = _axes(x, dim)
    m = jnp.mean(x, axis=axes, keepdims=True)
    d = x - m
    sq = jnp.real(d * jnp.conj(d)) if jnp.iscomplexobj(d) else d * d
    correction = 1 if correction is None else correction
    divisor = jnp.maximum(_count(x, axes) - correction, 0)
    var = jnp.sum(sq, axis=axes, keepdims=keepdim) / divisor
    return var, (m if keepdim else jnp.squeeze(m, axes))


@lower(aten.var.correction)
def var(x, dim=None, correction=None, keepdim=False):
    return _var(x, dim, correction, keepdim)[0]


@lower(aten.std.correction)
def std(x, dim=None, correction=None, keepdim=False):
    return jnp.sqrt(_var(x, dim, correction, keepdim)[0])


@lower(aten.var_mean.correction)
def var_mean(x, dim=None, correction=None, keepdim=False):
    return _var(x, dim, correction, keepdim)


@lower(aten.std_mean.correction)
def std_mean(x, dim=None, correction=None, keepdim=False):
    v, m = _var(x, dim, correction, keepdim)
    return jnp.sqrt(v), m


@lower(aten.logsumexp.default)
def logsumexp(x, dim, keepdim=False):
    x = x.astype(float_opmath(x.dtype))
    axes = _axes(x, dim)
    # the shift is the largest real part (complex inputs too, as PyTorch: the imaginary part
    # stays the principal angle of the sum)
    m = jnp.max(jnp.real(x), axis=axes, keepdims=True, initial=-jnp.inf)
    m = jnp.where(jnp.isinf(m), jnp.zeros((), m.dtype), m)  # all -inf (or an inf): no shift
    out = jnp.log(jnp.sum(jnp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdim else jnp.squeeze(out, axes)


def _bool_reduce(fn):
    def lowering(x, dim=None, keepdim=False):
        return fn(x != 0, axis=_axes(x, dim, empty_means_all=False), keepdims=keepdim)
    return lowering


lower(aten.any.default, aten.any.dim, aten.any.dims)(_bool_reduce(jnp.any))
lower(aten.all.default, aten.all.dim, aten.all.dims)(_bool_reduce(jnp.all))


@lower(aten.count_nonzero.default, aten.count_nonzero.dim_IntList)
def count_nonzero(x, dim=None):
    return jnp.sum(x != 0, axis=_axes(x, dim), dtype=jnp.int64)


@lower(aten.linalg_vector_norm.default, static_scalars=True)
def vector_norm(x, ord=2, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.astype(pjrt.to_jax_dtype(dtype))
    a = jnp.abs(cast(x, opmath(x.dtype)))
    axes = _axes(x, dim)
    if ord == float("inf"):
        return jnp.max(a, axis=axes, keepdims=keepdim)
    if ord == -float("inf"):
        return jnp.min(a, axis=axes, keepdims=keepdim)
    if ord == 0:
        return jnp.sum(a != 0, axis=axes, keepdims=keepdim, dtype=a.dtype)
    if ord == 1:
        return jnp.sum(a, axis=axes, keepdims=keepdim)
    if ord == 2:
        return jnp.sqrt(jnp.sum(a * a, axis=axes, keepdims=keepdim))
    return jnp.sum(a ** ord, axis=axes, keepdims=keepdim) ** (1.0 / ord)


# ---- segment reductions -------------------------------------------------------------------

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
    x = _flat(data, axis).astype(float_opmath(data.dtype))
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
    acc = float_opmath(data.dtype)
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


# ---- scans --------------------------------------------------------------------------------

def _scan(fn):
    """A scan along `dim` (a 0-d input is scanned as one element)."""
    def lowering(x, dim, dtype=None):
        x = _sum_input(x, dtype)
        if x.ndim == 0:
            return fn(x.reshape(1), axis=0).reshape(())
        return fn(x, axis=dim % x.ndim)
    return lowering


lower(aten.cumsum.default)(_scan(lax.cumsum))
lower(aten.cumprod.default)(_scan(lax.cumprod))


@lower(aten.logcumsumexp.default)
def logcumsumexp(x, dim):
    x = x.astype(float_opmath(x.dtype))
    if x.ndim == 0:
        return x
    if not jnp.issubdtype(x.dtype, jnp.complexfloating):
        return lax.cumlogsumexp(x, axis=dim % x.ndim)
    # complex: PyTorch's sequential scan of its complex log-add-exp, whose branches the
    # order of additions decides

    def step(acc, v):
        out = complex_logaddexp(v, acc)
        return out, out
    xs = jnp.moveaxis(x, dim, 0)
    start = jnp.full(xs.shape[1:], complex(-math.inf, 0), x.dtype)
    return jnp.moveaxis(lax.scan(step, start, xs)[1], 0, dim)


def _cum_extreme(later_wins):
    """cummax/cummin: (values, indices) where a later element replaces the running extreme
    when it ties or beats it, or is NaN; a running NaN is only replaced by a later NaN."""
    def combine(a, b):
        (av, ai), (bv, bi) = a, b
        take = jnp.isnan(bv) | (~jnp.isnan(av) & later_wins(bv, av))
        return jnp.where(take, bv, av), jnp.where(take, bi, ai)

    def lowering(x, dim):
        if x.ndim == 0:
            return x, jnp.zeros((), jnp.int64)
        axis = dim % x.ndim
        idx = lax.broadcasted_iota(jnp.int64, x.shape, axis)
        return lax.associative_scan(combine, (x, idx), axis=axis)
    return lowering


lower(aten.cummax.default)(_cum_extreme(jnp.greater_equal))
lower(aten.cummin.default)(_cum_extreme(jnp.less_equal))
