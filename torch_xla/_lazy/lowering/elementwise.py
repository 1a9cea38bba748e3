"""Elementwise ops: arithmetic, comparisons, logic and unary math, with PyTorch's promotion."""
import jax
import jax.numpy as jnp
import numpy as np

from . import aten, lower
from ._types import cast, float_of, result_type


def _binary(fn):
    def lowering(x, y, alpha=None):
        dtype = result_type(x, y)
        x, y = cast(x, dtype), cast(y, dtype)
        if alpha is not None:
            y = y * cast(alpha, dtype)
        return fn(x, y)
    return lowering


def _compare(fn):
    def lowering(x, y):
        dtype = result_type(x, y)
        return fn(cast(x, dtype), cast(y, dtype))
    return lowering


def _float_unary(fn):
    def lowering(x):
        return fn(cast(x, float_of(x.dtype)))
    return lowering


lower(aten.add.Tensor, aten.add.Scalar)(_binary(jnp.add))
lower(aten.sub.Tensor, aten.sub.Scalar)(_binary(jnp.subtract))
lower(aten.mul.Tensor, aten.mul.Scalar)(_binary(jnp.multiply))
lower(aten.maximum.default)(_binary(jnp.maximum))
lower(aten.minimum.default)(_binary(jnp.minimum))
lower(aten.eq.Tensor, aten.eq.Scalar)(_compare(jnp.equal))
lower(aten.ne.Tensor, aten.ne.Scalar)(_compare(jnp.not_equal))
lower(aten.lt.Tensor, aten.lt.Scalar)(_compare(jnp.less))
lower(aten.le.Tensor, aten.le.Scalar)(_compare(jnp.less_equal))
lower(aten.gt.Tensor, aten.gt.Scalar)(_compare(jnp.greater))
lower(aten.ge.Tensor, aten.ge.Scalar)(_compare(jnp.greater_equal))


@lower(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(x, y, alpha=1):
    dtype = result_type(x, y)
    return cast(y, dtype) - cast(x, dtype) * cast(alpha, dtype)


@lower(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def div(x, y, rounding_mode=None):
    dtype = result_type(x, y)
    if rounding_mode is None:
        dtype = float_of(dtype)
        return cast(x, dtype) / cast(y, dtype)
    x, y = cast(x, dtype), cast(y, dtype)
    if rounding_mode == "trunc":
        return jnp.trunc(x / y) if jnp.issubdtype(dtype, jnp.floating) else _int_trunc_div(x, y)
    return jnp.floor_divide(x, y) if not jnp.issubdtype(dtype, jnp.floating) else jnp.floor(x / y)


def _int_trunc_div(x, y):
    q = jnp.floor_divide(x, y)
    return jnp.where((q < 0) & (q * y != x), q + 1, q)


@lower(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar)
def pow_(x, y):
    dtype = result_type(x, y)
    return jnp.power(cast(x, dtype), cast(y, dtype))


@lower(aten.neg.default)
def neg(x):
    return jnp.negative(x)


@lower(aten.abs.default)
def abs_(x):
    return jnp.abs(x)


@lower(aten.relu.default)
def relu(x):
    return jnp.maximum(x, jnp.zeros((), x.dtype))


@lower(aten.where.self)
def where(cond, x, y):
    dtype = result_type(x, y)
    return jnp.where(cond, cast(x, dtype), cast(y, dtype))


@lower(aten.threshold_backward.default)
def threshold_backward(grad, x, threshold):
    return jnp.where(x <= cast(threshold, x.dtype), jnp.zeros((), grad.dtype), grad)


for _op, _fn in [(aten.exp, jnp.exp), (aten.log, jnp.log), (aten.sqrt, jnp.sqrt),
                 (aten.rsqrt, jax.lax.rsqrt), (aten.sin, jnp.sin), (aten.cos, jnp.cos),
                 (aten.tanh, jnp.tanh), (aten.sigmoid, jax.nn.sigmoid), (aten.erf, jax.scipy.special.erf),
                 (aten.log1p, jnp.log1p), (aten.expm1, jnp.expm1), (aten.reciprocal, jnp.reciprocal)]:
    lower(_op.default)(_float_unary(_fn))
