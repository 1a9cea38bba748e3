"""Activations (`torch.nn.functional`'s relu ... mish) and the backward ops autograd emits
for them, lowered directly where PyTorch's decomposition is longer than the formula.

As in elementwise.py, float ops compute integer, bool and half inputs in float32, and take
their Scalar arguments at float32 precision for half inputs. For NaN inputs they follow
PyTorch's vectorized CPU kernels (the path all but a tensor's last few elements take; the
scalar tail path differs for some backward ops).
"""
import math

import jax
import jax.numpy as jnp

from . import aten, lower
from ._types import cast, float_opmath, opmath
from .elementwise import _zero, clamp


@lower(aten.relu.default)
def relu(x):
    return jnp.maximum(x, _zero(x))


@lower(aten.threshold.default)
def threshold(x, threshold, value):
    return jnp.where(x <= cast(threshold, x.dtype), cast(value, x.dtype), x)


@lower(aten.threshold_backward.default)
def threshold_backward(grad, x, threshold):
    return jnp.where(x <= cast(threshold, x.dtype), _zero(grad), grad)


_SQRT1_2 = 1 / math.sqrt(2)
_GELU_BETA = math.sqrt(2 / math.pi)
_GELU_KAPPA = 0.044715


@lower(aten.gelu.default)
def gelu(x, approximate="none"):
    x = cast(x, float_opmath(x.dtype))
    if approximate == "tanh":
        return 0.5 * x * (1 + jnp.tanh(_GELU_BETA * (x + _GELU_KAPPA * x * x * x)))
    return 0.5 * x * (1 + jax.lax.erf(x * _SQRT1_2))


@lower(aten.gelu_backward.default)
def gelu_backward(grad, x, approximate="none"):
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    if approximate == "tanh":
        t = jnp.tanh(_GELU_BETA * (x + _GELU_KAPPA * x * x * x))
        d_inner = _GELU_BETA * (1 + 3 * _GELU_KAPPA * x * x)
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)
    cdf = 0.5 * (1 + jax.lax.erf(x * _SQRT1_2))
    pdf = jnp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return grad * (cdf + x * pdf)


@lower(aten.silu.default)
def silu(x):
    x = cast(x, float_opmath(x.dtype))
    return x * jax.nn.sigmoid(x)


@lower(aten.silu_backward.default)
def silu_backward(grad, x):
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    s = jax.nn.sigmoid(x)
    return grad * s * (1 + x * (1 - s))


@lower(aten.sigmoid_backward.default)
def sigmoid_backward(grad, out):
    return grad * (1 - out) * out


@lower(aten.tanh_backward.default)
def tanh_backward(grad, out):
    return grad * (1 - out * out)


@lower(aten.elu.default)
def elu(x, alpha=1, scale=1, input_scale=1):
    x = cast(x, float_opmath(x.dtype))
    alpha, scale, input_scale = (cast(v, x.dtype) for v in (alpha, scale, input_scale))
    return jnp.where(x > 0, x * scale, jnp.expm1(x * input_scale) * alpha * scale)


@lower(aten.elu_backward.default)
def elu_backward(grad, alpha, scale, input_scale, is_result, x):
    """`x` is elu's output when `is_result` (in-place elu_), else its input."""
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    alpha, scale, input_scale = (cast(v, dtype) for v in (alpha, scale, input_scale))
    if is_result:
        neg = grad * input_scale * (x + alpha * scale)
    else:
        neg = grad * input_scale * alpha * scale * jnp.exp(x * input_scale)
    return jnp.where(x > 0, grad * scale, neg)


@lower(aten.leaky_relu.default)
def leaky_relu(x, negative_slope=0.01):
    x = cast(x, opmath(x.dtype))
    return jnp.where(x > 0, x, x * cast(negative_slope, x.dtype))


@lower(aten.leaky_relu_backward.default)
def leaky_relu_backward(grad, x, negative_slope, self_is_result):
    grad = cast(grad, opmath(grad.dtype))
    return jnp.where(x > 0, grad, grad * cast(negative_slope, grad.dtype))


@lower(aten.hardtanh.default)
def hardtanh(x, min_val=-1, max_val=1):
    return clamp(x, min_val, max_val)


@lower(aten.hardtanh_backward.default)
def hardtanh_backward(grad, x, min_val, max_val):
    inside = (x > cast(min_val, x.dtype)) & (x < cast(max_val, x.dtype))
    return jnp.where(inside, grad, _zero(grad))


@lower(aten.hardsigmoid.default)
def hardsigmoid(x):
    x = cast(x, float_opmath(x.dtype))
    return jnp.clip(x + 3, 0, 6) / 6


@lower(aten.hardsigmoid_backward.default)
def hardsigmoid_backward(grad, x):
    return jnp.where((x > -3) & (x < 3), grad * (1 / 6), _zero(grad))


@lower(aten.hardswish.default)
def hardswish(x):
    x = cast(x, float_opmath(x.dtype))
    return x * jnp.clip(x + 3, 0, 6) / 6


@lower(aten.hardswish_backward.default)
def hardswish_backward(grad, x):
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    return jnp.where(x <= -3, _zero(grad), jnp.where(x >= 3, grad, grad * (x / 3 + 0.5)))


@lower(aten.softplus.default)
def softplus(x, beta=1, threshold=20):
    x = cast(x, float_opmath(x.dtype))
    bx = x * cast(beta, x.dtype)
    return jnp.where(bx > cast(threshold, x.dtype), x, jnp.log1p(jnp.exp(bx)) / cast(beta, x.dtype))


@lower(aten.softplus_backward.default)
def softplus_backward(grad, x, beta, threshold):
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    bx = x * cast(beta, dtype)
    z = jnp.exp(bx)
    return jnp.where(bx > cast(threshold, dtype), grad, grad * z / (z + 1))


@lower(aten.mish.default)
def mish(x):
    x = cast(x, float_opmath(x.dtype))
    return x * jnp.tanh(jnp.log1p(jnp.exp(x)))


@lower(aten.mish_backward.default)
def mish_backward(grad, x):
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    t = jnp.tanh(jnp.log1p(jnp.exp(x)))
    return grad * (t + x * jax.nn.sigmoid(x) * (1 - t * t))


@lower(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(x):
    """(output, buffer): the buffer holds exp(-|x|), as PyTorch's CPU kernel."""
    x = cast(x, float_opmath(x.dtype))
    z = jnp.exp(-jnp.abs(x))
    return jnp.minimum(x, _zero(x)) - jnp.log1p(z), z


@lower(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad, x, buffer):
    """Recomputed from x: the buffer may be empty (PyTorch's CUDA kernel leaves it so)."""
    dtype = float_opmath(x.dtype)
    grad, x = cast(grad, dtype), cast(x, dtype)
    z = jnp.exp(-jnp.abs(x))
    neg = x < 0
    return grad * (jnp.where(neg, 1, 0).astype(dtype) - jnp.where(neg, 1, -1).astype(dtype) * z / (1 + z))


@lower(aten._prelu_kernel.default)
def prelu_kernel(x, weight):
    return jnp.where(x > 0, x, weight * x)


@lower(aten._prelu_kernel_backward.default)
def prelu_kernel_backward(grad, x, weight):
    """(grad_input, grad_weight), both of x's broadcast shape; PyTorch sums the latter."""
    pos = x > 0
    return jnp.where(pos, grad, weight * grad), jnp.where(pos, _zero(x), x * grad)


@lower(aten.glu.default)
def glu(x, dim=-1):
    a, b = jnp.split(x, 2, axis=dim)
    return a * jax.nn.sigmoid(b)


@lower(aten.glu_backward.default)
def glu_backward(grad, x, dim):
    a, b = jnp.split(x, 2, axis=dim)
    s = jax.nn.sigmoid(b)
    return jnp.concatenate([grad * s, grad * a * s * (1 - s)], axis=dim % x.ndim)


@lower(aten.hardshrink.default)
def hardshrink(x, lambd=0.5):
    return jnp.where(jnp.abs(x) <= cast(lambd, x.dtype), _zero(x), x)


@lower(aten.softshrink.default)
def softshrink(x, lambd=0.5):
    lambd = cast(lambd, x.dtype)
    return jnp.where(jnp.abs(x) <= lambd, _zero(x), x - jnp.sign(x) * lambd)


@lower(aten.hardshrink_backward.default, aten.softshrink_backward.default)
def shrink_backward(grad, x, lambd):
    return jnp.where(jnp.abs(x) > cast(lambd, x.dtype), grad, _zero(grad))
