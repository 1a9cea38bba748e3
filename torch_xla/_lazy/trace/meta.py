"""Output shapes and dtypes of a traced op, from PyTorch's own kernels.

PyTorch's meta kernels give each op's outputs; they are run once per (op, argument
signature) and cached. Errors must be PyTorch's own, raised at the op, so PyTorch's CPU
kernel is probed on stand-ins of the arguments:
- for ops whose meta kernels check less than their CPU kernels (dtype rules of pointwise
  ops, mixed dtypes and empty inputs of the matmul family), on tensors of the same dtypes
  and ranks whose sizes are min(size, 1) (empty inputs stay empty, shapes that fit
  still fit): counted as `ErrorProbe`, no real work;
- on the error path only (a meta kernel or that probe raised, or the arguments' metadata
  show a check the small sizes would not reproduce: convolution's parameters, index_add's
  source shape), on zero-stride tensors of the same shapes, for the message the CPU gives
  for them (it may name the sizes): counted as `FullSizeErrorProbe`.
The cached entry also keeps the user's line of the first call with its signature, which
an error at compilation names.
"""
import torch
from torch.utils import _pytree as pytree

from ..base import counters, torch_compat, user_code
from ..runtime import pjrt
from ..base.caches import GenerationCache
from ..lowering import meta_stand_ins
from ..graph.tensor import XLATensor

aten = torch.ops.aten
_cache = GenerationCache("Meta", "XLA_IR_SHAPE_CACHE_SIZE", 12288)
_recent = _cache.recent.get


def _to_meta(obj):
    if isinstance(obj, torch.Tensor):
        return torch.empty(obj.shape, dtype=obj.dtype, device="meta")
    if isinstance(obj, torch.device) and obj.type == "xla":
        return torch.device("meta")
    return obj


# Ops whose meta kernels accept what the CPU kernels reject (mixed dtypes, empty inputs,
# the rank of boundaries).
_CPU_CHECKED = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
                aten.mv.default, aten.addmv.default, aten.dot.default, aten.vdot.default,
                aten.max.default, aten.min.default, aten.argmax.default, aten.argmin.default,
                aten.bucketize.Tensor, aten._scaled_dot_product_flash_attention_for_cpu.default}


def _stands_for_xla(obj) -> bool:
    """An XLA tensor, or a meta tensor standing for one (a bounded tensor at some sizes)."""
    return isinstance(obj, XLATensor) or (isinstance(obj, torch.Tensor) and obj.is_meta)


def _small_stand_in(obj):
    if _stands_for_xla(obj):
        return torch.ones([min(s, 1) for s in obj.shape], dtype=obj.dtype)
    if isinstance(obj, torch.device) and obj.type == "xla":
        return torch.device("cpu")
    return obj


def _full_stand_in(obj):
    if _stands_for_xla(obj):
        return torch.zeros((), dtype=obj.dtype).expand(obj.shape)
    if isinstance(obj, torch.device) and obj.type == "xla":
        return torch.device("cpu")
    return obj


def cpu_error(func, args, kwargs, full_size=False):
    """The error PyTorch's CPU kernel raises for these arguments (its message is the one
    users know), or None. Runs on tensors of sizes min(size, 1), or (`full_size`) on
    zero-stride tensors of the same shapes; both of the same dtypes and ranks."""
    counters.count("FullSizeErrorProbe" if full_size else "ErrorProbe")
    stand_in = _full_stand_in if full_size else _small_stand_in
    cargs, ckwargs = pytree.tree_map(stand_in, (args, kwargs))
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


def _conv_params_out_of_range(args, kwargs) -> bool:
    """Convolution's meta kernel accepts negative padding and non-positive strides and
    dilations, which its CPU kernel rejects."""
    _, _, _, stride, padding, dilation, _, output_padding, _ = args
    return (any(p < 0 for p in (*padding, *output_padding)) or any(s <= 0 for s in stride)
            or any(d <= 0 for d in dilation))


def _index_add_source_mismatch(args, kwargs) -> bool:
    """index_add's meta kernel accepts a source whose shape differs from self's outside
    `dim`, which its CPU kernel rejects (sizes the small stand-ins do not keep)."""
    self, dim, _, source = args[:4]
    if source.dim() == 0 or self.dim() == 0:
        return False
    dim = dim % self.dim()
    return source.dim() != self.dim() or any(
        s != o for d, (s, o) in enumerate(zip(self.shape, source.shape)) if d != dim)


def _zero_divisor_override(args, kwargs) -> bool:
    """torch 2.9's avg_pool3d meta kernel accepts `divisor_override=0` (it tests `not
    divisor_override or ...`), which its CPU kernel rejects."""
    divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
    return divisor == 0


def _reduces_an_empty_dim(args, kwargs) -> bool:
    """max/min/median/mode along a dim: their meta kernels accept a dim of size 0, which
    the CPU kernels reject (there is no identity to reduce nothing to)."""
    self = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", -1)
    return self.dim() > 0 and self.shape[dim % self.dim()] == 0


# Ops whose meta kernels miss a check of their CPU kernels that the small stand-ins would
# not reproduce, with a test on the arguments' metadata that the check fails: then the CPU
# kernel is probed on the full-size stand-ins (the error path only).
_CPU_CHECKED_WHEN = {aten.convolution.default: _conv_params_out_of_range,
                     aten.index_add.default: _index_add_source_mismatch,
                     aten.avg_pool3d.default: _zero_divisor_override,
                     **dict.fromkeys((aten.max.dim, aten.min.dim, aten.median.dim,
                                      aten.mode.default), _reduces_an_empty_dim)}


# Elementwise ops PyTorch does not tag pointwise whose CPU kernels check dtypes their meta
# kernels accept (complex(float, double), masked_scatter's uint8 mask).
_ELEMENTWISE = {aten.complex.default, aten.polar.default, aten.masked_scatter.default}


def _is_pointwise(func) -> bool:
    """Pointwise ops whose dtype rules PyTorch checks in its CPU kernels, not its meta ones."""
    return (torch.Tag.pointwise in func.tags and func.namespace == "aten"
            and not func._schema.is_mutable) or func in _ELEMENTWISE


def meta_outputs(func, args, kwargs, sig):
    """(structure, avals, origin) of the op's outputs. structure is 't' for one tensor, or a
    tuple or list of 't' for several; `sig` is the call's hashable signature (the cache
    key); origin is the user's line (`user_code.user_line`) of the first call with that
    signature. A lowering that fails for a signature fails for every call with it, so that
    line says where a failing op was made, found once per signature, not per op traced."""
    key = (id(func), sig)
    hit = _recent(key) or _cache.get(key)
    if hit is not None:
        return hit
    margs, mkwargs = pytree.tree_map(_to_meta, (args, kwargs))
    try:
        out = (torch_compat.meta_stand_in(func) or meta_stand_ins.stand_in(func) or func)(*margs, **mkwargs)
    except (RuntimeError, ValueError, IndexError, TypeError, AssertionError) as e:
        raise (cpu_error(func, args, kwargs, full_size=True) or e) from None
    fails = _CPU_CHECKED_WHEN.get(func)
    if fails is not None and fails(args, kwargs):
        error = cpu_error(func, args, kwargs, full_size=True)
        if error is not None:
            raise error
    if func in _CPU_CHECKED or _is_pointwise(func):
        # the error path: the message from the same shapes (and no error where the small
        # sizes alone made one)
        if cpu_error(func, args, kwargs) is not None:
            error = cpu_error(func, args, kwargs, full_size=True)
            if error is not None:
                raise error
    if isinstance(out, torch.Tensor):
        result = ["t", ((tuple(out.shape), out.dtype),)]
    elif isinstance(out, (tuple, list)) and all(o is None or isinstance(o, torch.Tensor) for o in out):
        # None: an output the op leaves out (a backward's output_mask); the lowering returns
        # None there too, and the node has no output for it
        result = [type(out), tuple(None if o is None else (tuple(o.shape), o.dtype) for o in out)]
    else:
        raise NotImplementedError(f"{func}: output {type(out).__name__} is not a tensor")
    if func in _NORM_STATS:
        result[1] = _cpu_norm_stats(args, kwargs, result[1])
    for aval in result[1]:
        if aval is not None:
            pjrt.to_jax_dtype(aval[1])  # a dtype XLA devices lack is refused at the op
    result = (result[0], result[1], user_code.user_line())
    _cache.put(key, result)
    return result
