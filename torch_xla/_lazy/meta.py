"""Output shapes and dtypes of a traced op, from PyTorch's own kernels.

PyTorch's meta kernels give each op's outputs; they are run once per (op, argument
signature) and cached. Errors must be PyTorch's own, raised at the op: on a meta error, and
for ops whose meta kernels check less than their CPU kernels, PyTorch's CPU kernel is run
on stand-ins of the arguments (zero-stride tensors of the same shapes, or one-element
tensors for pointwise ops) so users get the CPU's message.
"""
import torch
from torch.utils import _pytree as pytree

from . import runtime
from .tensor import XLATensor

aten = torch.ops.aten
_cache = {}


def _to_meta(obj):
    if isinstance(obj, torch.Tensor):
        return torch.empty(obj.shape, dtype=obj.dtype, device="meta")
    if isinstance(obj, torch.device) and obj.type == "xla":
        return torch.device("meta")
    return obj


# Ops whose meta kernels accept what the CPU kernels reject (mixed dtypes, empty inputs,
# shapes of boundaries and sources).
_CPU_CHECKED = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
                aten.mv.default, aten.addmv.default, aten.dot.default, aten.vdot.default,
                aten.max.default, aten.min.default, aten.argmax.default, aten.argmin.default,
                aten.bucketize.Tensor, aten.index_add.default}


def _cpu_stand_in(tiny):
    def stand_in(obj):
        if isinstance(obj, XLATensor):
            if tiny:  # pointwise ops: one element per dimension keeps broadcasting and dtypes
                return torch.ones((1,) * obj.dim(), dtype=obj.dtype)
            return torch.zeros((), dtype=obj.dtype).expand(obj.shape)
        if isinstance(obj, torch.device) and obj.type == "xla":
            return torch.device("cpu")
        return obj
    return stand_in


def cpu_error(func, args, kwargs, tiny=False):
    """The error PyTorch's CPU kernel raises for these arguments (its message is the one
    users know), or None. Runs on zero-stride tensors of the same shapes and dtypes, or for
    pointwise ops (`tiny`) on one-element tensors of the same dtypes and ranks."""
    cargs, ckwargs = pytree.tree_map(_cpu_stand_in(tiny), (args, kwargs))
    try:
        func(*cargs, **ckwargs)
    except (RuntimeError, ValueError, IndexError, TypeError, ZeroDivisionError) as e:
        return e
    return None


# Normalisations whose CPU kernels return their statistics (and new running statistics) in
# a float16/bfloat16 input's dtype, or in float32 when a parameter is float32 ("mixed
# type"), where their meta kernels say float32 (layer and batch norm) or the input's dtype
# (group norm).
_NORM_STATS = {aten.native_layer_norm.default, aten.native_group_norm.default,
               aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
               aten._native_batch_norm_legit.no_stats,
               aten._native_batch_norm_legit_functional.default,
               aten._native_batch_norm_legit_no_training.default,
               aten._batch_norm_with_update.default, aten._batch_norm_with_update_functional.default,
               aten._batch_norm_no_update.default}
_HALF = (torch.float16, torch.bfloat16)


def _cpu_norm_stats(args, kwargs, avals):
    """avals with the statistics' dtypes the CPU kernels give."""
    x = args[0]
    if x.dtype not in _HALF:
        return avals
    params = [a for a in (*args[1:], *kwargs.values()) if isinstance(a, torch.Tensor)]
    stats = torch.float32 if any(p.dtype == torch.float32 for p in params) else x.dtype
    return (avals[0],) + tuple(a if a is None or not a[1].is_floating_point else (a[0], stats)
                               for a in avals[1:])


def _conv_params_out_of_range(args) -> bool:
    """Convolution's meta kernel accepts negative padding and non-positive strides and
    dilations, which its CPU kernel rejects (checked on the CPU only then: it is costly)."""
    _, _, _, stride, padding, dilation, _, output_padding, _ = args
    return (any(p < 0 for p in (*padding, *output_padding)) or any(s <= 0 for s in stride)
            or any(d <= 0 for d in dilation))


# Elementwise ops PyTorch does not tag pointwise whose CPU kernels check dtypes their meta
# kernels accept (complex(float, double), masked_scatter's uint8 mask).
_ELEMENTWISE = {aten.complex.default, aten.polar.default, aten.masked_scatter.default}


def _is_pointwise(func) -> bool:
    """Pointwise ops whose dtype rules PyTorch checks in its CPU kernels, not its meta ones."""
    return (torch.Tag.pointwise in func.tags and func.namespace == "aten"
            and not func._schema.is_mutable) or func in _ELEMENTWISE


def meta_outputs(func, args, kwargs, sig):
    """(structure, avals) of the op's outputs: structure is 't' for one tensor, or a tuple or
    list of 't' for several. `sig` is the call's hashable signature (the cache key)."""
    key = (id(func), sig)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    margs, mkwargs = pytree.tree_map(_to_meta, (args, kwargs))
    try:
        out = func(*margs, **mkwargs)
    except (RuntimeError, ValueError, IndexError, TypeError, AssertionError) as e:
        raise (cpu_error(func, args, kwargs) or e) from None
    checked = func in _CPU_CHECKED or (
        func is aten.convolution.default and _conv_params_out_of_range(args))
    if checked or _is_pointwise(func):
        error = cpu_error(func, args, kwargs, tiny=not checked)
        if error is not None:
            raise error
    if isinstance(out, torch.Tensor):
        result = ("t", ((tuple(out.shape), out.dtype),))
    elif isinstance(out, (tuple, list)) and all(o is None or isinstance(o, torch.Tensor) for o in out):
        # None: an output the op leaves out (a backward's output_mask); the lowering returns
        # None there too, and the node has no output for it
        result = (type(out), tuple(None if o is None else (tuple(o.shape), o.dtype) for o in out))
    else:
        raise NotImplementedError(f"{func}: output {type(out).__name__} is not a tensor")
    if func in _NORM_STATS:
        result = (result[0], _cpu_norm_stats(args, kwargs, result[1]))
    for aval in result[1]:
        if aval is not None:
            runtime.to_jax_dtype(aval[1])  # a dtype XLA devices lack is refused at the op
    _cache[key] = result
    return result
