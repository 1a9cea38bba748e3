"""Implicit broadcasting of operands with unbounded (symbolic) dimensions, as torch_xla's
unbounded dynamism lowers it.

A dimension marked dynamic (`_XLAC._xla_mark_dynamic`) is a jax symbolic dimension of its
own when the graph is lowered for its StableHLO text, unrelated to every other size, so
jax's broadcasting rules, which must prove sizes equal, refuse `?` against `10` or against
another `?`. torch_xla's rule, for dims aligned from the right: a size against 1 is the
size; a symbolic size against a static one (not 1) is the static one; two symbolic sizes
are their maximum. Each operand with a symbolic dimension, or of another shape than the
result, is then broadcast to the result by `stablehlo.dynamic_broadcast_in_dim` on the
result's shape computed at run time (torch_xla's lowering, which this text mirrors). Where
the operands' shapes are the same, nothing changes.
"""
import jax
from jax.extend.core import Primitive
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.interpreters import mlir

from ..base import jax_compat


def is_symbolic(shape) -> bool:
    return not jax_compat.is_constant_shape(shape)


def _dim(a, b):
    if jax_compat.definitely_equal(a, b) or jax_compat.definitely_equal(b, 1):
        return a
    if jax_compat.definitely_equal(a, 1):
        return b
    a_static, b_static = isinstance(a, int), isinstance(b, int)
    if a_static and b_static:
        raise ValueError(f"the sizes {a} and {b} do not broadcast")
    if a_static or b_static:
        return a if a_static else b
    return jax_compat.max_dim(a, b)


def broadcast_shape(*shapes) -> tuple:
    """The shape `shapes` broadcast to, by torch_xla's rule for unbounded dimensions."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for shape in shapes:
        for i, d in enumerate(shape, rank - len(shape)):
            out[i] = _dim(out[i], d)
    return tuple(out)


def broadcast_operands(*xs):
    """`xs` (jax values, some with symbolic dimensions, of different shapes) broadcast to
    their common shape."""
    out = broadcast_shape(*(x.shape for x in xs))
    return tuple(x if (x.shape == out and not is_symbolic(x.shape)) else
                 _broadcast_p.bind(x, shape=out, dims=tuple(range(len(out) - x.ndim, len(out))))
                 for x in xs)


_broadcast_p = Primitive("unbounded_broadcast_in_dim")
_broadcast_p.def_abstract_eval(lambda x, *, shape, dims: jax.core.ShapedArray(shape, x.dtype))


def _lower(ctx, x, *, shape, dims):
    aval_out, = ctx.avals_out
    result_type, = mlir.aval_to_ir_types(ctx.module_context, aval_out)
    target = jax_compat.eval_dynamic_shape_as_tensor(ctx, aval_out.shape)
    return [hlo.dynamic_broadcast_in_dim(result_type, x, target, mlir.dense_int_array(dims))]


mlir.register_lowering(_broadcast_p, _lower)
