"""`stablehlo.custom_call` as a node kind: a call of a target XLA resolves by name (a
kernel the backend registered, or an annotation such as `annotate_device_placement`).

jax's public `jax.ffi.ffi_call` makes only typed-FFI calls (api_version 4, a dictionary
backend config); torch_xla's `stablehlo_custom_call` takes any api version, a string
backend config, side effects and frontend attributes, so the call is a primitive of its own
whose MLIR lowering builds the op with jax's internal `custom_call` builder (jax_compat). Several
results are one tuple-typed result and its elements, as torch_xla's custom calls are.

A node of `CUSTOM_CALL` has template `(In(0), ...)` and static `target`, `results`
(((shape), dtype name), ...), `has_side_effect`, `backend_config`, `api_version` and
`frontend_attributes` (sorted (name, value) pairs): equal calls make equal node keys.
"""
import jax
import numpy as np
import torch
from jax.extend.core import Primitive
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo as hlo
from jax.interpreters import mlir

from . import Lowering
from ..base import jax_compat
from ..runtime import pjrt

_custom_call_p = Primitive("torch_xla_custom_call")
_custom_call_p.multiple_results = True


def _abstract_eval(*operands, target, results, has_side_effect, backend_config, api_version,
                   frontend_attributes):
    return [jax.core.ShapedArray(shape, np.dtype(pjrt.to_jax_dtype(getattr(torch, dtype))))
            for shape, dtype in results]


def _lower(ctx, *operands, target, results, has_side_effect, backend_config, api_version,
           frontend_attributes):
    types = [mlir.aval_to_ir_type(ctx.module_context, aval) for aval in ctx.avals_out]
    extra = None
    if frontend_attributes:
        extra = {"mhlo.frontend_attributes": ir.DictAttr.get(
            {name: ir.StringAttr.get(value) for name, value in frontend_attributes})}
    op = jax_compat.custom_call(
        target, result_types=[ir.TupleType.get_tuple(types)] if len(types) > 1 else types,
        operands=list(operands), backend_config=backend_config, has_side_effect=has_side_effect,
        api_version=max(api_version, 1), extra_attributes=extra)
    if len(types) == 1:
        return op.results
    return [hlo.get_tuple_element(op.result, mlir.i32_attr(i)) for i in range(len(types))]


_custom_call_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(_custom_call_p, _lower)


def call_attributes(target, results, has_side_effect=False, backend_config="", api_version=0,
                    frontend_attributes=()):
    """A call's attributes as the primitive and a node's key take them: `results` as
    (((shape), dtype name), ...), `frontend_attributes` (a dict or pairs) as sorted pairs."""
    return dict(
        target=str(target), has_side_effect=bool(has_side_effect),
        results=tuple((tuple(int(d) for d in shape), _dtype_name(dtype)) for shape, dtype in results),
        backend_config=str(backend_config), api_version=int(api_version),
        frontend_attributes=tuple(sorted((str(k), str(v)) for k, v in dict(frontend_attributes).items())))


def custom_call(*operands, **attributes):
    """`stablehlo.custom_call @target` on jax values (`call_attributes`' arguments; `results`
    are ((shape), torch dtype or its name) pairs). Returns a tuple of jax values, one per
    result. API version 0 (XLA's "unspecified") is emitted as 1, the original API, as
    torch_xla does."""
    return tuple(_custom_call_p.bind(*operands, **call_attributes(**attributes)))


def _dtype_name(dtype):
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")


def targets_in(plan) -> set:
    """The custom call targets of a traced plan (`_lazy/launch/subgraph`): the names an export
    allows past its safety check."""
    return {dict(template[1])["target"] for op, template, *_ in plan if op is CUSTOM_CALL}


def _run(*operands, **attributes):  # a node's attributes, already `call_attributes`'
    return tuple(_custom_call_p.bind(*operands, **attributes))


CUSTOM_CALL = Lowering("xla::custom_call", _run, static_scalars=True, rng=False, dynamic_shape=False)
