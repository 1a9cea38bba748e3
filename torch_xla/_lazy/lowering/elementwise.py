"""Elementwise ops: arithmetic, comparisons, logic and unary math, with PyTorch's promotion
(activations are in activations.py).

Every op whose decomposition would end in `prims.*` ops is lowered here directly. Float
ops compute integer and bool inputs in float32, and float16/bfloat16 inputs in float32 as
PyTorch's CPU kernels do (the engine rounds the result to the op's dtype). Like those
kernels, mul, div, addcmul and lerp take their Scalar arguments at float32 precision for
half inputs, while add and sub round a Scalar operand to the tensor's dtype first.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from . import REGISTRY, _unbounded, aten, lower, lower_on_demand
from ._types import cast, float_of, float_opmath, opmath, promote, result_type

prims = torch.ops.prims
_special = jax.scipy.special


def _is_int(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.integer)


def _is_bool(dtype) -> bool:
    return dtype == np.bool_


def _zero(x):
    return jnp.zeros((), x.dtype)


# ---- arithmetic ------------------------------------------------------------------------------

def _binary(fn, round_scalars=True):
    """fn on x and y promoted; `round_scalars=False` keeps a Python scalar operand at
    float32 precision for half x (mul and div kernels read the original value). alpha is
    rounded to the dtype, as PyTorch's add kernel does."""
    def lowering(x, y, alpha=None):
        dtype = result_type(x, y)
        if round_scalars:
            x, y = cast(x, dtype), cast(y, dtype)
        x, y = cast(x, opmath(dtype)), cast(y, opmath(dtype))
        if alpha is not None:
            y = y * cast(cast(alpha, dtype), y.dtype)
        xs, ys = np.shape(x), np.shape(y)
        if xs != ys and (_unbounded.is_symbolic(xs) or _unbounded.is_symbolic(ys)):
            x, y = _unbounded.broadcast_operands(x, y)
        return fn(x, y)
    return lowering


def _float_binary(fn):
    def lowering(x, y):
        dtype = float_opmath(result_type(x, y))
        return fn(cast(x, dtype), cast(y, dtype))
    return lowering


def _broadcast_to(x, shape):
    if x.shape == shape:
        return x
    return lax.broadcast_in_dim(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))


def _direct(lax_fn, jnp_fn, commutative=False):
    """`jnp_fn`, as `lax_fn` on operands of one non-bool dtype (after promotion, nearly every
    call): jnp's functions are jitted, and in a program's trace each call traces a nested
    function that the primitive does not.

    A commutative op takes a 0-d operand first. A scalar is one parameter for all its uses
    (`compiler`), so its broadcast is shared by every kernel that reads it, and XLA fuses it
    into them in turn: with the scalar second, the last kernel to take it in lists its
    operands in another order than the rest, and XLA compiles it again instead of reusing
    theirs (in a chain of `tanh(x @ w) * a + b` blocks, a third of the compile time).
    """
    def fn(x, y):
        if x.dtype != y.dtype or x.dtype == np.bool_:
            return jnp_fn(x, y)
        if x.shape != y.shape:
            if commutative and y.ndim == 0:
                x, y = y, x
            shape = lax.broadcast_shapes(x.shape, y.shape)
            x, y = _broadcast_to(x, shape), _broadcast_to(y, shape)
        return lax_fn(x, y)
    return fn


lower(aten.add.Tensor, aten.add.Scalar, f32_scalars=True)(
    _binary(_direct(lax.add, jnp.add, commutative=True)))
lower(aten.sub.Tensor, aten.sub.Scalar, f32_scalars=True)(_binary(_direct(lax.sub, jnp.subtract)))
lower(aten.mul.Tensor, aten.mul.Scalar, f32_scalars=True)(
    _binary(_direct(lax.mul, jnp.multiply, commutative=True), round_scalars=False))
lower(aten.maximum.default)(_binary(jnp.maximum))
lower(aten.minimum.default)(_binary(jnp.minimum))
lower(aten.fmax.default)(_binary(jnp.fmax))
lower(aten.fmin.default)(_binary(jnp.fmin))
lower(aten.fmod.Tensor, aten.fmod.Scalar)(_binary(jnp.fmod))
lower(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)(_binary(jnp.remainder))
lower(aten.copysign.Tensor, aten.copysign.Scalar)(_float_binary(jnp.copysign))
lower(aten.atan2.default)(_float_binary(jnp.arctan2))
lower(aten.hypot.default)(_float_binary(jnp.hypot))
@lower(aten.logaddexp.default)
def logaddexp(x, y):
    dtype = float_opmath(result_type(x, y))
    x, y = cast(x, dtype), cast(y, dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return complex_logaddexp(x, y)
    return jnp.logaddexp(x, y)


def complex_logaddexp(x, y):
    """PyTorch's complex log-add-exp (logaddexp, logcumsumexp): max + log1p(exp(min - max))
    with min/max by real part, so the imaginary part stays on max's branch; a NaN anywhere
    makes NaN, equal infinite real parts are special."""
    x_min = jnp.real(x) < jnp.real(y)
    lo, hi = jnp.where(x_min, x, y), jnp.where(x_min, y, x)
    out = jnp.log1p(jnp.exp(lo - hi)) + hi
    nan = jnp.isnan(x) | jnp.isnan(y)
    same_inf = ~jnp.isfinite(jnp.real(lo)) & (jnp.real(lo) == jnp.real(hi))
    at_inf = jnp.where(jnp.real(lo) < 0, lo, jnp.log(jnp.exp(lo) + jnp.exp(hi)))
    out = jnp.where(same_inf, at_inf, out)
    return jnp.where(nan, jnp.asarray(complex(math.nan, math.nan), out.dtype), out)


lower(aten.logaddexp2.default)(_float_binary(jnp.logaddexp2))


@lower(aten.nextafter.default)
def nextafter(x, y):
    return jnp.nextafter(*promote(x, y))  # in the dtype itself: never widened


@lower(aten.rsub.Tensor, aten.rsub.Scalar, f32_scalars=True)
def rsub(x, y, alpha=1):
    return _binary(jnp.subtract)(y, x, alpha)


@lower(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode, f32_scalars=True)
def div(x, y, rounding_mode=None):
    dtype = result_type(x, y)
    if rounding_mode is None:
        dtype = float_of(dtype)
    x, y = cast(x, opmath(dtype)), cast(y, opmath(dtype))
    if rounding_mode is None:
        return x / y
    if rounding_mode == "trunc":
        return jax.lax.div(*jnp.broadcast_arrays(x, y)) if _is_int(x.dtype) else jnp.trunc(x / y)
    return jnp.floor_divide(x, y) if _is_int(x.dtype) else _float_floor_div(x, y)


def _float_floor_div(x, y):
    """PyTorch's floor division of floats: from the exact remainder, so 1 // 0.1 is 9, with
    a signed zero for zero quotients and x / y for y == 0."""
    mod = jnp.fmod(x, y)
    q = (x - mod) / y
    q = jnp.where((mod != 0) & ((y < 0) != (mod < 0)), q - 1, q)
    fq = jnp.floor(q)
    fq = jnp.where(q - fq > 0.5, fq + 1, fq)
    true_q = x / y
    fq = jnp.where(q == 0, jnp.copysign(_zero(q), true_q), fq)
    return jnp.where(y == 0, true_q, fq)


@lower(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(x, y):
    return div(x, y, "floor")


@lower(aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_(x, y):
    x, y = promote(x, y)
    out = jnp.power(x, y)
    if not _is_int(x.dtype):
        return out
    # Negative integer powers: 1 for base 1, +-1 for base -1, 0 otherwise.
    one = jnp.ones((), x.dtype)
    neg = jnp.where(x == 1, one, jnp.where(x == -1, jnp.where(y % 2 == 0, one, -one), _zero(x)))
    return jnp.where(y < 0, neg, out)


@lower(aten.pow.Tensor_Scalar, static_scalars=True)
def pow_tensor_scalar(x, exponent):
    """A Python exponent is a constant of the program, as in torch_xla (a program per
    exponent): XLA then computes `x ** 2` as `x * x`."""
    return pow_(x, jnp.asarray(exponent))


@lower(aten.neg.default)
def neg(x):
    return jnp.negative(x)


@lower(aten.abs.default)
def abs_(x):
    return jnp.abs(x)


@lower(aten.sign.default, aten.sgn.default)
def sign(x):
    if _is_bool(x.dtype):
        return x
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jnp.where(x == 0, _zero(x), x / jnp.abs(x))
    return jnp.where(jnp.isnan(x), _zero(x), jnp.sign(x))  # sign(nan) is 0 in PyTorch


def _promote_wide(*args):
    """Cast to the result dtype, computed wide: Scalar arguments at float32 precision."""
    dtype = opmath(result_type(*args))
    return tuple(cast(a, dtype) for a in args)


@lower(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(start, end, weight):
    """PyTorch's two-sided formula: exact at both ends."""
    start, end, weight = _promote_wide(start, end, weight)
    diff = end - start
    return jnp.where(jnp.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))


@lower(aten.addcmul.default)
def addcmul(x, t1, t2, value=1):
    x, t1, t2 = _promote_wide(x, t1, t2)
    return x + cast(value, x.dtype) * t1 * t2


@lower(aten.addcdiv.default)
def addcdiv(x, t1, t2, value=1):
    x, t1, t2 = _promote_wide(x, t1, t2)
    return x + cast(value, x.dtype) * (t1 / t2)


@lower(aten.clamp.default, aten.clamp.Tensor)
def clamp(x, min=None, max=None):
    """NaN in the input or a bound propagates; min > max gives max."""
    x, lo, hi = promote(x, min, max)
    if lo is not None:
        x = jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.minimum(x, hi)
    return x


@lower(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(x, min):
    return clamp(x, min=min)


@lower(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(x, max):
    return clamp(x, max=max)


@lower(aten.xlogy.Tensor, aten.xlogy.Scalar_Self, aten.xlogy.Scalar_Other)
def xlogy(x, y):
    """0 where x == 0, unless y is NaN. Half inputs round log(y) (as PyTorch's kernel)."""
    dtype = float_of(result_type(x, y))
    x, y = cast(x, dtype), cast(y, dtype)
    out = jnp.where(x == 0, _zero(x), x * jnp.log(y))
    return jnp.where(jnp.isnan(y), y, out)


@lower(aten.frac.default)
def frac(x):
    return x - jnp.trunc(x)


def _rounding(fn):
    def lowering(x):
        return x if not jnp.issubdtype(x.dtype, jnp.floating) else fn(x)
    return lowering


lower(aten.trunc.default)(_rounding(jnp.trunc))
lower(aten.floor.default)(_rounding(jnp.floor))
lower(aten.ceil.default)(_rounding(jnp.ceil))
lower(aten.round.default)(_rounding(jnp.round))  # half to even, as PyTorch's nearbyint


@lower(aten.round.decimals)
def round_decimals(x, decimals=0):
    x = cast(x, opmath(x.dtype))
    scale = jnp.asarray(10.0 ** abs(decimals), x.dtype)
    if decimals < 0:
        return jnp.round(x / scale) * scale
    return jnp.round(x * scale) / scale


@lower(aten.heaviside.default)
def heaviside(x, values):
    """values where x == 0, else (x > 0); NaN gives 0."""
    return jnp.where(x == 0, values, (x > 0).astype(x.dtype))


@lower(aten.nan_to_num.default)
def nan_to_num(x, nan=None, posinf=None, neginf=None):
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    info = jnp.finfo(x.dtype)
    x = jnp.where(jnp.isnan(x), jnp.asarray(0.0 if nan is None else nan, x.dtype), x)
    x = jnp.where(x == jnp.inf, jnp.asarray(info.max if posinf is None else posinf, x.dtype), x)
    return jnp.where(x == -jnp.inf, jnp.asarray(info.min if neginf is None else neginf, x.dtype), x)


lower(aten.isnan.default)(jnp.isnan)
lower(aten.isinf.default)(jnp.isinf)
lower(aten.isfinite.default)(jnp.isfinite)
lower(aten.isposinf.default)(jnp.isposinf)
lower(aten.isneginf.default)(jnp.isneginf)
lower(aten.signbit.default)(jnp.signbit)


@lower(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(cond, x, y):
    x, y = promote(x, y)
    return jnp.where(cond, x, y)


# ---- comparisons and logic -------------------------------------------------------------------

def _compare(fn):
    def lowering(x, y):
        return fn(*promote(x, y))
    return lowering


for _op, _fn in [(aten.eq, jnp.equal), (aten.ne, jnp.not_equal), (aten.lt, jnp.less),
                 (aten.le, jnp.less_equal), (aten.gt, jnp.greater), (aten.ge, jnp.greater_equal)]:
    lower(_op.Tensor, _op.Scalar)(_compare(_fn))


def _truth(x):
    return x if _is_bool(x.dtype) else x != 0


def _logical(fn):
    def lowering(x, y):
        return fn(_truth(x), _truth(y))
    return lowering


lower(aten.logical_and.default)(_logical(jnp.logical_and))
lower(aten.logical_or.default)(_logical(jnp.logical_or))
lower(aten.logical_xor.default)(_logical(jnp.logical_xor))


@lower(aten.logical_not.default)
def logical_not(x):
    return jnp.logical_not(_truth(x))


lower(aten.bitwise_and, aten.__and__)(_binary(jnp.bitwise_and))
lower(aten.bitwise_or, aten.__or__)(_binary(jnp.bitwise_or))
lower(aten.bitwise_xor, aten.__xor__)(_binary(jnp.bitwise_xor))
lower(aten.bitwise_not.default)(jnp.invert)
# XLA's shifts already give PyTorch's results for shift amounts < 0 or >= the bit width:
# 0 to the left, the sign to the right (arithmetic for signed types, logical for uint8).
lower(aten.bitwise_left_shift, aten.__lshift__)(_binary(jnp.left_shift))
lower(aten.bitwise_right_shift, aten.__rshift__)(_binary(jnp.right_shift))


# ---- unary math ------------------------------------------------------------------------------

def _float_unary(fn):
    def lowering(x):
        return fn(cast(x, float_opmath(x.dtype)))
    return lowering


def _digamma(x):
    # PyTorch: -inf at +0, +inf at -0 (jax gives NaN at zero).
    return jnp.where(x == 0, jnp.copysign(jnp.asarray(jnp.inf, x.dtype), -x), jax.lax.digamma(x))


for _op, _fn in [
        # (lax's primitives where jnp's function is just the primitive on a float input)
        (aten.exp, lax.exp), (aten.exp2, jnp.exp2), (aten.expm1, lax.expm1),
        (aten.log, lax.log), (aten.log2, jnp.log2), (aten.log10, jnp.log10), (aten.log1p, lax.log1p),
        (aten.sqrt, lax.sqrt), (aten.rsqrt, lax.rsqrt), (aten.reciprocal, jnp.reciprocal),
        (aten.sin, lax.sin), (aten.cos, lax.cos), (aten.tan, lax.tan),
        (aten.asin, jnp.arcsin), (aten.acos, jnp.arccos), (aten.atan, jnp.arctan),
        (aten.sinh, lax.sinh), (aten.cosh, lax.cosh), (aten.tanh, lax.tanh),
        (aten.asinh, jnp.arcsinh), (aten.acosh, jnp.arccosh), (aten.atanh, jnp.arctanh),
        (aten.erf, jax.lax.erf), (aten.erfc, jax.lax.erfc), (aten.erfinv, jax.lax.erf_inv),
        (aten.lgamma, jax.lax.lgamma), (aten.digamma, _digamma), (aten.i0, _special.i0),
        (aten.sigmoid, jax.nn.sigmoid), (aten.sinc, jnp.sinc),
        (aten.deg2rad, jnp.deg2rad), (aten.rad2deg, jnp.rad2deg)]:
    lower(_op.default)(_float_unary(_fn))


def _cot_pi(v):
    """cot(pi v) with pi v kept exact: from v's distance to the nearest integer (where cot
    has its poles), or, nearer a half-integer (its zeros), as -tan(pi (v - 1/2))."""
    to_int = v - jax.lax.stop_gradient(jnp.round(v))
    to_half = v - 0.5 - jax.lax.stop_gradient(jnp.round(v - 0.5))
    near_int = jnp.cos(math.pi * to_int) / jnp.sin(math.pi * to_int)
    return jnp.where(jnp.abs(to_int) <= 0.25, near_int, -jnp.tan(math.pi * to_half))


def _polygamma(n, x):
    """jax's polygamma is right for positive x only: below 0.5 the reflection formula
    psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x), derivatives by forward mode.
    The poles (0, -1, ...) give (-1)^(n+1) inf."""
    cot = _cot_pi
    for _ in range(n):
        cot = (lambda f: lambda v: jax.jvp(f, (v,), (jnp.ones_like(v),))[1])(cot)
    reflected = (-1) ** n * _special.polygamma(n, 1 - x) - math.pi * cot(x)
    pole = jnp.asarray((-1) ** (n + 1) * math.inf, x.dtype)
    reflected = jnp.where(x == jnp.round(x), pole, reflected)
    return jnp.where(x < 0.5, reflected, _special.polygamma(n, x))


@lower(aten.polygamma.default)
def polygamma(n, x):
    x = cast(x, float_opmath(x.dtype))
    return _digamma(x) if n == 0 else _polygamma(n, x)


@lower(aten.logit.default)
def logit(x, eps=None):
    """Half inputs round each step, as PyTorch's kernel does."""
    x = cast(x, float_of(x.dtype))
    if eps is not None:
        x = jnp.clip(x, eps, 1 - eps)
    return jnp.log(x / (1 - x))


@lower(aten.angle.default)
def angle(x):
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jnp.angle(x)
    x = cast(x, float_opmath(x.dtype))
    return jnp.where(x < 0, jnp.asarray(math.pi, x.dtype), jnp.where(jnp.isnan(x), x, _zero(x)))


lower(aten.conj_physical.default, aten._conj_physical.default, aten._conj_copy.default)(jnp.conj)
lower(aten._neg_view_copy.default)(jnp.negative)


_FREXP_BITS = {np.dtype(np.float16): np.uint16, np.dtype(jnp.bfloat16): np.uint16,
               np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}


@lower(aten.frexp.Tensor, prims.frexp.default)
def frexp(x):
    """(mantissa, int32 exponent): x = mantissa * 2**exponent, |mantissa| in [0.5, 1), from
    the bits (subnormals too, which XLA's float arithmetic may flush to zero); 0, inf and
    NaN are their own mantissa with exponent 0."""
    info = jnp.finfo(x.dtype)
    uint = _FREXP_BITS[np.dtype(x.dtype)]
    width, nmant, bias = np.iinfo(uint).bits, info.nmant, info.maxexp - 1
    bits = jax.lax.bitcast_convert_type(x, uint)
    field = (bits >> nmant) & uint((1 << (width - 1 - nmant)) - 1)
    frac = bits & uint((1 << nmant) - 1)
    sign = bits & uint(1 << (width - 1))
    top = (width - 1) - jax.lax.clz(frac).astype(np.int32)  # a subnormal's leading bit
    subnormal = (field == 0) & (frac != 0)
    special = ((field == 0) & (frac == 0)) | ~jnp.isfinite(x)
    shift = jnp.where(subnormal, nmant - top, 0).astype(uint)
    frac = jnp.where(subnormal, (frac << shift) & uint((1 << nmant) - 1), frac)
    exponent = jnp.where(subnormal, top + 2 - bias - nmant, field.astype(np.int32) - (bias - 1))
    mantissa = jax.lax.bitcast_convert_type(sign | (uint(bias - 1) << nmant) | frac, x.dtype)
    return jnp.where(special, x, mantissa), jnp.where(special, 0, exponent).astype(np.int32)


# ---- prims -----------------------------------------------------------------------------------
# Decompositions (of this family's ops or others') can end in elementwise prims: their
# inputs are already promoted, and each means what the aten op named here means.
# (prims.signbit is left to the CPU: its meta kernel says float32 where it returns bool.)

_PRIM_TO_ATEN = {
    "add": aten.add.Tensor, "sub": aten.sub.Tensor, "mul": aten.mul.Tensor, "pow": aten.pow.Tensor_Tensor,
    "maximum": aten.maximum.default, "minimum": aten.minimum.default, "fmax": aten.fmax.default,
    "fmin": aten.fmin.default, "fmod": aten.fmod.Tensor, "remainder": aten.remainder.Tensor,
    "atan2": aten.atan2.default, "hypot": aten.hypot.default, "nextafter": aten.nextafter.default,
    "eq": aten.eq.Tensor, "ne": aten.ne.Tensor, "lt": aten.lt.Tensor, "le": aten.le.Tensor,
    "gt": aten.gt.Tensor, "ge": aten.ge.Tensor, "bitwise_and": aten.bitwise_and.Tensor,
    "bitwise_or": aten.bitwise_or.Tensor, "bitwise_xor": aten.bitwise_xor.Tensor,
    "bitwise_not": aten.bitwise_not.default, "shift_left": aten.bitwise_left_shift.Tensor,
    "abs": aten.abs.default, "neg": aten.neg.default, "sign": aten.sign.default,
    "trunc": aten.trunc.default, "floor": aten.floor.default,
    "ceil": aten.ceil.default, "round": aten.round.default, "isfinite": aten.isfinite.default,
    "where": aten.where.self,
    "erf_inv": aten.erfinv.default, "bessel_i0": aten.i0.default,
    **{name: getattr(aten, name).default for name in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
        "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
        "atanh", "erf", "erfc", "lgamma", "digamma")},
}
for _name, _aten_op in _PRIM_TO_ATEN.items():
    lower(getattr(prims, _name).default)(REGISTRY[_aten_op].fn)


@lower(prims.div.default)
def prim_div(x, y):
    """Truncating for integers, true division for floats."""
    return div(x, y, "trunc" if _is_int(result_type(x, y)) else None)


@lower(prims.shift_right_arithmetic.default)
def prim_shift_right_arithmetic(x, y):
    return jax.lax.shift_right_arithmetic(*jnp.broadcast_arrays(*promote(x, y)))


@lower_on_demand("prims::fma")
def prim_fma(a, b, c):
    """a * b + c: dynamo's decomposition of addcmul_ (AdamW's step) under torch.compile."""
    a, b, c = promote(a, b, c)
    return a * b + c
