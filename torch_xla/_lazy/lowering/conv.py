"""Convolutions, plain and transposed, 1d to 3d, with PyTorch's layouts (N, C, spatial...)
for activations and (O, I/groups, spatial...) for weights ((I, O/groups, ...) transposed).

The backward is the vector-Jacobian product of the same jax function, which XLA turns
into the usual pair of convolutions. float16/bfloat16 convolutions give float32 results
and add their bias in float32, rounded once (the engine casts), as PyTorch's CPU kernels.
float32 convolutions take the products' precision (`precision.setting()`).

A 1×1 convolution without padding or groups is lowered as the matrix product it is (its
strides a strided slice first): XLA's CPU backend runs its products several times faster
than its convolutions (forward and backward of a 64×1024×14×14 1×1 convolution, 2 cores:
2.3 s against 12 s), and its backward is then products too.
"""
import math

import jax
import jax.numpy as jnp
from jax import lax

from . import aten, lower
from ._types import opmath
from .precision import matmul_precision


def _dimension_numbers(nd):
    spatial = "DHW"[3 - nd:]
    return ("NC" + spatial, "OI" + spatial, "NC" + spatial)


def _transposed_weight(w, groups):
    """(I, O/g, k...) of a transposed convolution as the (O, I/g, k...) weight of the plain
    convolution it equals, kernel flipped."""
    i, og, *k = w.shape
    w = w.reshape(groups, i // groups, og, *k)
    w = jnp.swapaxes(w, 1, 2).reshape(groups * og, i // groups, *k)
    return jnp.flip(w, axis=tuple(range(2, w.ndim)))


def _pointwise(x, w, stride):
    """A 1×1 convolution (no padding, one group) as a product over the channels."""
    if any(s != 1 for s in stride):
        x = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)]
    n, c, *spatial = x.shape
    out = lax.dot_general(x.reshape(n, c, math.prod(spatial)), w.reshape(w.shape[0], c),
                          (((1,), (1,)), ((), ())), precision=matmul_precision(),
                          preferred_element_type=opmath(x.dtype))
    return jnp.transpose(out, (0, 2, 1)).reshape(n, w.shape[0], *spatial)


def _conv(x, w, stride, padding, dilation, transposed, output_padding, groups):
    nd = x.ndim - 2
    dn = _dimension_numbers(nd)
    if not transposed and groups == 1 and not any(padding) and all(k == 1 for k in w.shape[2:]):
        return _pointwise(x, w, stride)
    if not transposed:
        return jax.lax.conv_general_dilated(
            x, w, window_strides=stride, padding=[(p, p) for p in padding],
            rhs_dilation=dilation, dimension_numbers=dn, feature_group_count=groups,
            precision=matmul_precision(), preferred_element_type=opmath(x.dtype))
    k = w.shape[2:]
    pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op)
            for kk, p, d, op in zip(k, padding, dilation, output_padding)]
    return jax.lax.conv_general_dilated(
        x, _transposed_weight(w, groups), window_strides=(1,) * nd, padding=pads,
        lhs_dilation=stride, rhs_dilation=dilation, dimension_numbers=dn,
        feature_group_count=groups, precision=matmul_precision(),
        preferred_element_type=opmath(x.dtype))


def _expand(v, nd):
    return tuple(v) * nd if len(v) == 1 else tuple(v)


@lower(aten.convolution.default)
def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    nd = x.ndim - 2
    out = _conv(x, w, _expand(stride, nd), _expand(padding, nd), _expand(dilation, nd),
                transposed, _expand(output_padding, nd), groups)
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape((1, -1) + (1,) * nd)
    return out


@lower(aten.convolution_backward.default)
def convolution_backward(grad, x, w, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    nd = x.ndim - 2
    args = (_expand(stride, nd), _expand(padding, nd), _expand(dilation, nd), transposed,
            _expand(output_padding, nd), groups)
    _, pullback = jax.vjp(lambda a, b: _conv(a, b, *args), x, w)
    dx, dw = pullback(grad.astype(opmath(x.dtype)))
    db = jnp.sum(grad, axis=(0,) + tuple(range(2, grad.ndim))) if output_mask[2] else None
    return (dx if output_mask[0] else None, dw if output_mask[1] else None, db)
