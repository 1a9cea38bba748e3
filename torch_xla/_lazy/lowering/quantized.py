"""Products over integer weights: XLA's DotGeneral with operands of their own dtypes
(`_XLAC._xla_dot_general`) and `xla::quantized_matmul`
(`torch_xla.experimental.xla_quantized_matmul`: weight-only int8/int4 linear layers).

A product of a bfloat16 activation and an int8 weight is one `dot(bf16, s8)` in the program,
as torch_xla lowers it: the weight is held as int8 (a quarter of float32's bytes) and the
backend widens it inside the program (TPU as it reads it; XLA's CPU into a temporary). jax's
own `lax.dot_general` converts mixed operands to one dtype before the dot on the CPU and GPU
(some of XLA's code generators fail on mixed dots), so the mixed product is a primitive of
its own (`dot_general`) whose lowering keeps the operands as they are where the backend
compiles such a dot: on TPU, and on the CPU where both operands are at least 8 bits wide
(XLA's CPU compiler rejects the widened copy of an s4 operand: its 4-bit element size stays
on the converted operand); elsewhere both operands are converted to the result's dtype
first, as jax does.

`xla::quantized_matmul(x, w, scale, zero_point, block_size, int4_weight, quantize_activation)`:
- per channel (`block_size` -1): `w` is [out, in] int8, `scale` and `zero_point` [out];
  `x @ wᵀ * scale - sum(x) * zero_point`, where `zero_point` is already scaled (the float
  offset of each output channel). With `quantize_activation`, `x` is first quantized to
  int8 per row (scale max|x| / 127), the product is an s32 dot of s8 operands, and the
  result is multiplied by each row's scale.
- blockwise: `w` is [in / block, block, out] int8, `scale` and `zero_point` [in / block, out];
  each block of `x`'s last dim is a batched dot with its block of `w`, and the blocks'
  products are summed weighted by `scale`.
- `int4_weight`: `w` holds int4 values (-8 to 7) in int8; the program narrows it to s4
  before the dot.
The result has the dtype PyTorch promotes `x` and `scale` to, computed in its opmath dtype
(float32 for half types) after the dot, rounded once.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from jax.extend.core import Primitive
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.interpreters import mlir

from . import Lowering, lower_on_demand
from ..runtime import pjrt
from ._types import opmath
from .precision import matmul_precision

_mixed_dot_p = Primitive("torch_xla_mixed_dot")


def dot_general(x, y, dimension_numbers, out_dtype):
    """XLA's DotGeneral of `x` and `y` ((contracting dims), (batch dims)) with result dtype
    `out_dtype`; operands of two dtypes keep them where the backend compiles that."""
    out_dtype = np.dtype(out_dtype)
    if x.dtype == y.dtype:
        return lax.dot_general(x, y, dimension_numbers, precision=matmul_precision(),
                               preferred_element_type=out_dtype)
    return _mixed_dot_p.bind(x, y, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                             precision=matmul_precision())


def _abstract_eval(x, y, *, dimension_numbers, out_dtype, precision):
    out = jax.eval_shape(lambda a, b: lax.dot_general(a, b, dimension_numbers),
                         jax.ShapeDtypeStruct(x.shape, np.float32),
                         jax.ShapeDtypeStruct(y.shape, np.float32))
    return jax.core.ShapedArray(out.shape, out_dtype)


def _lower_kept(ctx, x, y, *, dimension_numbers, out_dtype, precision):
    (lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch) = dimension_numbers
    numbers = hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
        lhs_contracting_dimensions=list(lhs_contracting),
        rhs_contracting_dimensions=list(rhs_contracting))
    precision_config = ir.ArrayAttr.get([hlo.PrecisionAttr.get(precision.name)] * 2)
    result_type = mlir.aval_to_ir_type(ctx.module_context, ctx.avals_out[0])
    return [hlo.dot_general(result_type, x, y, numbers, precision_config=precision_config)]


def _converted(x, y, *, dimension_numbers, out_dtype, precision):
    return lax.dot_general(x.astype(out_dtype), y.astype(out_dtype), dimension_numbers,
                           precision=precision, preferred_element_type=out_dtype)


_lower_converted = mlir.lower_fun(_converted, multiple_results=False)


def _bits(dtype):
    return (jnp.iinfo(dtype) if jnp.issubdtype(dtype, jnp.integer) else jnp.finfo(dtype)).bits


def _lower_on_cpu(ctx, x, y, **params):
    if all(_bits(aval.dtype) >= 8 for aval in ctx.avals_in):
        return _lower_kept(ctx, x, y, **params)
    return _lower_converted(ctx, x, y, **params)


_mixed_dot_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(_mixed_dot_p, _lower_converted)
mlir.register_lowering(_mixed_dot_p, _lower_on_cpu, platform="cpu")
mlir.register_lowering(_mixed_dot_p, _lower_kept, platform="tpu")


def _dot_general_node(x, y, dimension_numbers, dtype):
    return dot_general(x, y, dimension_numbers, pjrt.to_jax_dtype(getattr(torch, dtype)))


# XLA's DotGeneral (`_XLAC._xla_dot_general`), no ATen op: static dimension numbers
# ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) and the result's dtype name.
DOT_GENERAL = Lowering("xla::dot_general", _dot_general_node, static_scalars=True, rng=False,
                       dynamic_shape=False)


def _quantize_rows(x):
    """`x` as int8 values with one scale per row (its last dim): round(x / scale), scale =
    max|x| / 127, both in x's dtype, as torch_xla's `_quantize_tensor`."""
    scale = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / jnp.asarray(127, x.dtype)
    return jnp.round(x / scale).astype(jnp.int8), scale


@lower_on_demand("xla::quantized_matmul", static_scalars=True)
def quantized_matmul(x, w, scale, zero_point=None, block_size=-1, int4_weight=False,
                     quantize_activation=False):
    out_dtype = jnp.promote_types(x.dtype, scale.dtype)
    compute = opmath(out_dtype)
    if int4_weight:
        w = w.astype(jnp.int4)
    if block_size is None or block_size == -1:
        row_scale = None
        if quantize_activation:
            x, row_scale = _quantize_rows(x)
        product = dot_general(x, w, (((x.ndim - 1,), (1,)), ((), ())),
                              jnp.int32 if quantize_activation else compute)
        out = product.astype(compute) * scale.astype(compute)
        if zero_point is not None:
            row_sums = jnp.sum(x, axis=-1, keepdims=True, dtype=compute)
            out = out - row_sums * zero_point.astype(compute)
        if row_scale is not None:
            out = out * row_scale.astype(compute)
        return out.astype(out_dtype)
    lead = x.shape[:-1]
    blocks = x.reshape(math.prod(lead), w.shape[0], block_size)  # [rows, block count, block]
    per_block = dot_general(blocks, w, (((2,), (1,)), ((1,), (0,))), compute)  # [blocks, rows, out]
    out = jnp.einsum("srn,sn->rn", per_block.astype(compute), scale.astype(compute),
                     precision=matmul_precision())
    if zero_point is not None:
        out = out - jnp.einsum("rs,sn->rn", jnp.sum(blocks, axis=-1, dtype=compute),
                               zero_point.astype(compute), precision=matmul_precision())
    return out.reshape(*lead, out.shape[-1]).astype(out_dtype)
