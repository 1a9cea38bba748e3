"""XLA's operations, by XlaBuilder's names, as jax functions: `OPS[name](values, **args)`.

Each is the jax `lax` primitive of XLA's semantics for that operation (the operation
semantics XlaBuilder documents); the few jax cannot express refuse, naming why. A
computation argument (a reducer, a branch, a loop body) is a function of jax values.
"""
import numpy as np
import jax.numpy as jnp
from jax import lax
import torch

from .._lazy.runtime import pjrt


class Type:
    F32 = 'f32'
    F64 = 'f64'
    BF16 = 'bf16'
    F16 = 'f16'
    U8 = 'u8'
    S8 = 's8'
    U16 = 'u16'
    S16 = 's16'
    U32 = 'u32'
    S32 = 's32'
    U64 = 'u64'
    S64 = 's64'
    C64 = 'c64'
    C128 = 'c128'
    PRED = 'pred'


XLA_PT_TYPE_MAP = {
    Type.F32: torch.float32, Type.F64: torch.float64, Type.BF16: torch.bfloat16,
    Type.F16: torch.float16, Type.U8: torch.uint8, Type.S8: torch.int8,
    Type.U16: torch.uint16, Type.S16: torch.int16, Type.U32: torch.uint32,
    Type.S32: torch.int32, Type.U64: torch.uint64, Type.S64: torch.int64,
    Type.C64: torch.complex64, Type.C128: torch.complex128, Type.PRED: torch.bool,
}
PT_XLA_TYPE_MAP = {v: k for k, v in XLA_PT_TYPE_MAP.items()}


def jax_type(xla_type):
    """The jax dtype of an XLA type name ('f32', 'pred', ...)."""
    return pjrt.to_jax_dtype(XLA_PT_TYPE_MAP[xla_type])


def xla_type(jax_dtype):
    """The XLA type name of a jax dtype."""
    return PT_XLA_TYPE_MAP[pjrt.to_torch_dtype(jnp.dtype(jax_dtype))]


def _scalar_fn(computation):
    """A computation of two scalars as jax's reducers take it (a function of values)."""
    return lambda a, b: computation(a, b)


def _padding(padding, rank=None):
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding: {padding}")
        return padding.upper()
    return tuple(tuple(p) for p in padding)


def _broadcast_pair(a, b):
    """XLA's implicit broadcasting of a binary op: a scalar against anything, or equal
    ranks whose differing dimensions are 1."""
    if a.shape == b.shape:
        return a, b
    if a.ndim and b.ndim and a.ndim != b.ndim:
        raise ValueError(f"Binary op with incompatible shapes: {xla_type(a.dtype)}"
                         f"{list(a.shape)} and {xla_type(b.dtype)}{list(b.shape)}")
    shape = np.broadcast_shapes(a.shape, b.shape)
    return jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)


def _binary(fn):
    return lambda ops, **_: fn(*_broadcast_pair(ops[0], ops[1]))


def _unary(fn):
    return lambda ops, **_: fn(ops[0])


def _precision(kw):
    return {None: None, "default": lax.Precision.DEFAULT, "high": lax.Precision.HIGH,
            "highest": lax.Precision.HIGHEST}[kw.get("precision_config")]


def _conv(ops, window_strides, padding="valid", lhs_dilation=None, rhs_dilation=None,
          input_batch_dimension=0, input_feature_dimension=1, input_spatial_dimensions=None,
          kernel_output_feature_dimension=0, kernel_input_feature_dimension=1,
          kernel_spatial_dimensions=None, output_batch_dimension=0, output_feature_dimension=1,
          output_spatial_dimensions=None, feature_group_count=1, batch_group_count=1,
          precision_config=None, **_):
    lhs, rhs = ops
    spatial = tuple(range(2, lhs.ndim))
    numbers = lax.ConvDimensionNumbers(
        (input_batch_dimension, input_feature_dimension)
        + tuple(input_spatial_dimensions or spatial),
        (kernel_output_feature_dimension, kernel_input_feature_dimension)
        + tuple(kernel_spatial_dimensions or spatial),
        (output_batch_dimension, output_feature_dimension)
        + tuple(output_spatial_dimensions or spatial))
    return lax.conv_general_dilated(
        lhs, rhs, tuple(window_strides), _padding(padding), lhs_dilation, rhs_dilation,
        numbers, feature_group_count, batch_group_count,
        precision=_precision({"precision_config": precision_config}))


def _reshape(ops, sizes, dimensions=None, inferred_dimension=None, **_):
    x = ops[0] if dimensions is None else lax.transpose(ops[0], tuple(dimensions))
    return lax.reshape(x, tuple(sizes)) if inferred_dimension is None else x.reshape(sizes)


def _gather(ops, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
            slice_sizes, indices_are_sorted=None, **_):
    operand, indices = ops
    if index_vector_dim != indices.ndim - 1:
        indices = jnp.moveaxis(indices, index_vector_dim, -1)
    numbers = lax.GatherDimensionNumbers(tuple(offset_dims), tuple(collapsed_slice_dims),
                                         tuple(start_index_map))
    return lax.gather(operand, indices, numbers, tuple(slice_sizes),
                      indices_are_sorted=bool(indices_are_sorted))


def _sort(ops, comparator=None, dimension=None, is_stable=None, **_):
    dimension = -1 if dimension is None else dimension
    if comparator is not None:
        raise NotImplementedError(
            "xla_builder.Op.sort with a comparator computation: jax sorts by its keys "
            "(ascending, the first operand the key); pass comparator=None")
    out = lax.sort(tuple(ops), dimension=dimension, is_stable=bool(is_stable), num_keys=1)
    return out if len(ops) > 1 else out[0]


def _refuse(name, why):
    def refuse(ops, **_):
        raise NotImplementedError(f"xla_builder op {name!r}: {why}")
    return refuse


_DYNAMIC = "dynamic shapes (bounded dynamic dimensions) are not built by jax's lowering"

OPS = {
    'Add': _binary(lax.add), 'Sub': _binary(lax.sub), 'Mul': _binary(lax.mul),
    'Div': _binary(lax.div), 'Rem': _binary(lax.rem), 'Pow': _binary(lax.pow),
    'Max': _binary(lax.max), 'Min': _binary(lax.min), 'Atan2': _binary(lax.atan2),
    'And': _binary(lax.bitwise_and), 'Or': _binary(lax.bitwise_or),
    'Xor': _binary(lax.bitwise_xor), 'Not': _unary(lax.bitwise_not),
    'Eq': _binary(lax.eq), 'Ne': _binary(lax.ne), 'Le': _binary(lax.le),
    'Lt': _binary(lax.lt), 'Ge': _binary(lax.ge), 'Gt': _binary(lax.gt),
    'ShiftLeft': _binary(lax.shift_left), 'ShiftRight': _binary(lax.shift_right_logical),
    'Neg': _unary(lax.neg), 'Acos': _unary(lax.acos), 'Asin': _unary(lax.asin),
    'Atan': _unary(lax.atan), 'Ceil': _unary(lax.ceil), 'Cos': _unary(lax.cos),
    'Cosh': _unary(lax.cosh), 'Erf': _unary(lax.erf), 'Erfc': _unary(lax.erfc),
    'ErfInv': _unary(lax.erf_inv), 'Exp': _unary(lax.exp), 'Expm1': _unary(lax.expm1),
    'Floor': _unary(lax.floor), 'Log': _unary(lax.log), 'Log1p': _unary(lax.log1p),
    'Sqrt': _unary(lax.sqrt), 'Rsqrt': _unary(lax.rsqrt), 'Real': _unary(lax.real),
    'Imag': _unary(lax.imag), 'Clz': _unary(lax.clz), 'Conj': _unary(lax.conj),
    'Sin': _unary(lax.sin), 'Sinh': _unary(lax.sinh), 'Tan': _unary(lax.tan),
    'Tanh': _unary(lax.tanh),
    'Dot': lambda ops, **kw: lax.dot(ops[0], ops[1], precision=_precision(kw)),
    'Reshape': _reshape,
    'DynamicReshape': _refuse('DynamicReshape', _DYNAMIC),
    'SetDimensionSize': _refuse('SetDimensionSize', _DYNAMIC),
    'GetDimensionSize': lambda ops, dimension, **_: jnp.int32(ops[0].shape[dimension]),
    'Broadcast': lambda ops, sizes, **_: lax.broadcast(ops[0], tuple(sizes)),
    'BroadcastInDim': lambda ops, sizes, dimensions, **_: lax.broadcast_in_dim(
        ops[0], tuple(sizes), tuple(dimensions)),
    'Slice': lambda ops, start_indices, limit_indices, strides=None, **_: lax.slice(
        ops[0], tuple(start_indices), tuple(limit_indices),
        None if strides is None else tuple(strides)),
    'SliceInDim': lambda ops, start_index, limit_index, dimno, stride=1, **_:
        lax.slice_in_dim(ops[0], start_index, limit_index, stride, dimno),
    'DynamicSlice': lambda ops, start_indices, slice_sizes, **_: lax.dynamic_slice(
        ops[0], [i.op for i in start_indices], tuple(slice_sizes)),
    'DynamicUpdateSlice': lambda ops, start_indices, **_: lax.dynamic_update_slice(
        ops[0], ops[1], [i.op for i in start_indices]),
    'Gather': _gather,
    'Scatter': _refuse('Scatter', "jax's scatter combines updates by add, mul, min, max or "
                       "replacement, not by a user computation (use jax's .at[] through "
                       "xla_builder.call_jax)"),
    'Conv': _conv, 'ConvWithGeneralPadding': _conv, 'ConvWithGeneralDimensions': _conv,
    'ConvGeneral': _conv, 'ConvGeneralDilated': _conv,
    'Convert': lambda ops, to_type, **_: lax.convert_element_type(ops[0], jax_type(to_type)),
    'BitcastConvert': lambda ops, to_type, **_: lax.bitcast_convert_type(
        ops[0], jax_type(to_type)),
    'Pad': lambda ops, config, **_: lax.pad(ops[0], ops[1], [tuple(c) for c in config]),
    'Reduce': lambda ops, computation, dimensions, **_: lax.reduce(
        ops[0], ops[1], _scalar_fn(computation), tuple(dimensions)),
    'ReduceAll': lambda ops, computation, **_: lax.reduce(
        ops[0], ops[1], _scalar_fn(computation), tuple(range(ops[0].ndim))),
    'ReduceWindow': lambda ops, computation, window_dimensions, window_strides,
        padding='valid', **_: lax.reduce_window(
            ops[0], ops[1], _scalar_fn(computation), tuple(window_dimensions),
            tuple(window_strides), _padding(padding)),
    'MaxPool': lambda ops, kernel_size, stride, padding='valid', **_: lax.reduce_window(
        ops[0], -jnp.inf, lax.max, tuple(kernel_size), tuple(stride), _padding(padding)),
    'SelectAndScatter': _refuse('SelectAndScatter', "jax exposes no select-and-scatter "
                                "with user computations (use ReduceWindow's gradient)"),
    'SelectAndScatterWithGeneralPadding': _refuse(
        'SelectAndScatterWithGeneralPadding',
        "jax exposes no select-and-scatter with user computations"),
    'Select': lambda ops, **_: lax.select(*ops),
    'Transpose': lambda ops, permutation, **_: lax.transpose(ops[0], tuple(permutation)),
    'TriangularSolve': lambda ops, left_side=None, lower=None, unit_diagonal=None,
        transpose_a=None, **_: lax.linalg.triangular_solve(
            ops[0], ops[1], left_side=bool(left_side), lower=bool(lower),
            unit_diagonal=bool(unit_diagonal), transpose_a=bool(transpose_a)),
    'Clamp': lambda ops, **_: lax.clamp(ops[1], ops[0], ops[2]),
    'GetTupleElement': lambda ops, index, **_: ops[0][index],
    'Tuple': lambda ops, **_: tuple(ops),
    'ConcatInDim': lambda ops, dimension, **_: lax.concatenate(list(ops), dimension),
    'Call': lambda ops, computation, **_: computation(*ops),
    'Conditional': lambda ops, true_computation, false_computation, **_: lax.cond(
        ops[0], lambda t, f: true_computation(t), lambda t, f: false_computation(f),
        ops[1], ops[2]),
    'While': lambda ops, condition_computation, body_computation, **_: lax.while_loop(
        condition_computation, body_computation, ops[0]),
    'Rev': lambda ops, dimensions, **_: lax.rev(ops[0], tuple(dimensions)),
    'Sort': _sort,
    'Map': lambda ops, computation, dimensions, static_operands=(), **_: jnp.vectorize(
        lambda *xs: computation(*xs, *static_operands))(*ops),
    'Constant': lambda ops, value, **_: _constant(value),
    'Iota': lambda ops, shape, iota_dimension, **_: lax.broadcasted_iota(
        jax_type(shape['type']), tuple(shape['sizes']), iota_dimension),
}


def _constant(value):
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        dtype = pjrt.to_jax_dtype(value.dtype)
        wide = value.to(torch.float32) if value.dtype == torch.bfloat16 else value
        return jnp.asarray(wide.numpy(), dtype=dtype)
    return jnp.asarray(value)

