"""The CPU's checks of `out=` arguments: an `out` of a dtype the CPU kernel refuses, or
one that overlaps itself or an input ("unsupported operation: ..."), for the elementwise
ops and the others whose CPU kernels check them.

Functionalization writes an op's result into `out` with a cast and checks neither: its meta
run of the op sees fresh meta tensors (no aliasing), and meta kernels check out dtypes less
than CPU kernels. These kernels, on the AutogradXLA key (above functionalization, reached by
XLA tensors only), look at the arguments' metadata: an `out` whose dtype differs from the
result's where the CPU refuses it (elementwise ops: a dtype the result cannot be cast to),
an `out` with a zero stride (as `expand` makes), or one over some of the elements of
another argument (over all of them too, for the ops that are not elementwise). Only then
the op's CPU kernel runs on CPU stand-ins with the same views of the same bases (zeros),
and its error, if any, is raised at the op with the CPU's message. The autograd kernel's
refusal of `out=` with an argument requiring grad (for the ops with a derivative) is asked
of the CPU kernel too, on stand-ins of size 1, when an argument requires grad.
"""
import math
import warnings

import torch
from torch._prims_common import make_contiguous_strides_for
from torch.utils import _pytree as pytree

from ..base import counters
from ..base.frames import run_without_dynamo
from .kernel_libraries import installs_kernels
from ..lowering import overload_named

# out= overloads that are not elementwise -> (functional overload, what the CPU accepts as
# out's dtype: "same" as the result's, "cast" (any the result casts to), or None: any)
_CHECKED = {
    "amax.out": ("amax.default", "same"), "amin.out": ("amin.default", "same"),
    "aminmax.out": ("aminmax.default", "same"), "gather.out": ("gather.default", "same"),
    "take.out": ("take.default", "same"), "index_select.out": ("index_select.default", "same"),
    "masked_select.out": ("masked_select.default", "same"),
    "kthvalue.values": ("kthvalue.default", "same"),
    "multinomial.out": ("multinomial.default", "same"), "complex.out": ("complex.default", "same"),
    "cat.out": ("cat.default", "cast"), "bernoulli.out": ("bernoulli.default", None),
    "mm.out": ("mm.default", "same"), "bmm.out": ("bmm.default", "same"),
    "addmm.out": ("addmm.default", "same"), "mv.out": ("mv.default", "same"),
    "addmv.out": ("addmv.default", "same"), "baddbmm.out": ("baddbmm.default", "same"),
    "addbmm.out": ("addbmm.default", "same"), "dot.out": ("dot.default", "same"),
    "vdot.out": ("vdot.default", "same"), "sort.values": ("sort.default", "same"),
    "sort.values_stable": ("sort.stable", "same"), "topk.values": ("topk.default", "same"),
    "argmax.out": ("argmax.default", "same"), "argmin.out": ("argmin.default", "same"),
    "max.dim_max": ("max.dim", "same"), "min.dim_min": ("min.dim", "same"),
    "median.dim_values": ("median.dim", "same"), "mode.values": ("mode.default", "same"),
    "cummax.out": ("cummax.default", "same"), "cummin.out": ("cummin.default", "same"),
    "where.self_out": ("where.self", "same"), "index_add.out": ("index_add.default", "same"),
    "nonzero.out": ("nonzero.default", "same"),
}
_ERRORS = (RuntimeError, ValueError, IndexError, TypeError)


def _root(t):
    return t if t._base is None else t._base


def _layout(t):
    """(storage offset, sizes, strides) of t in its base's elements."""
    if t._base is None:
        return 0, tuple(t.shape), make_contiguous_strides_for(t.shape)
    base = t._base
    v = t._view_func(torch.empty(base.shape, dtype=base.dtype, device="meta"))
    return v.storage_offset(), tuple(v.shape), v.stride()


def _span(offset, sizes, strides, numel):
    """[first, last + 1) of the elements a layout touches (None when empty)."""
    if numel == 0:
        return None
    return offset, offset + sum((s - 1) * abs(st) for s, st in zip(sizes, strides)) + 1


_RESULTS = {}  # (functional op, its arguments' metadata) -> its results' (shape, dtype)
_BAD = "bad arguments"


def _results(functional, args, inputs, outs):
    """(shape, dtype) of the functional op's results (from its meta kernel, kept per argument
    metadata), or _BAD when the meta kernel refuses the arguments."""
    leaves = pytree.tree_leaves((args, inputs))
    key = (functional, tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor)
                             else (type(x), x) for x in leaves))
    try:
        hit = _RESULTS.get(key)
    except TypeError:  # an argument that is not hashable: not kept
        key, hit = None, None
    if hit is not None:
        return hit
    meta = pytree.tree_map(
        lambda x: torch.empty(x.shape, dtype=x.dtype, device="meta")
        if isinstance(x, torch.Tensor) else x, (args, inputs))
    try:
        out = functional(*meta[0], **meta[1])
        out = out if isinstance(out, (tuple, list)) else (out,)
        result = [(tuple(r.shape), r.dtype) for r in out]
    except NotImplementedError:  # an output size that depends on values: no meta kernel
        dtype = torch.int64 if functional is torch.ops.aten.nonzero.default else meta[0][0].dtype
        result = [(tuple(o.shape), dtype) for o in outs]
    except _ERRORS:
        result = _BAD
    if key is not None:
        if len(_RESULTS) >= 4096:
            _RESULTS.clear()
        _RESULTS[key] = result
    return result


def _suspect(accepts, whole_overlap, functional, args, kwargs, out_names):
    """Whether the metadata show something the CPU kernel may refuse (whole_overlap: an out
    over exactly an input's elements is suspect too)."""
    outs = [kwargs[n] for n in out_names]
    inputs = {k: v for k, v in kwargs.items() if k not in out_names}
    results = _results(functional, args, inputs, outs)
    if results is _BAD:  # the CPU's message for them
        return True
    for out, (_, dtype) in zip(outs, results):
        if out.dtype != dtype and (accepts == "same" or (
                accepts == "cast" and not torch.can_cast(dtype, out.dtype))):
            return True
    leaves = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    for out, (shape, _) in zip(outs, results):
        offset, sizes, strides = _layout(out)
        if any(st == 0 and s > 1 for s, st in zip(sizes, strides)):
            return True
        numel = math.prod(shape)
        if out.numel() != numel:  # resized to the result's size first
            sizes, strides = shape, make_contiguous_strides_for(shape)
        span = _span(offset, sizes, strides, numel)
        times = 0
        for t in leaves:
            if t is out:
                times += 1
                if times > 1 and whole_overlap:  # out is an input too
                    return True
            elif _root(t) is _root(out) and span is not None:
                layout = _layout(t)
                other = _span(*layout, t.numel())
                if other is not None and other[0] < span[1] and span[0] < other[1] and (
                        whole_overlap or layout != (offset, sizes, tuple(strides))):
                    return True
    return False


_GRAD_REFUSED = "functions with out=... arguments don't support automatic differentiation"


def _grad_error(op, args, kwargs):
    """The autograd kernel's refusal on the CPU (stand-ins of size 1 requiring grad as the
    arguments do), or None."""
    def stand_in(x):
        if isinstance(x, torch.Tensor):
            t = torch.ones([min(s, 1) for s in x.shape], dtype=x.dtype)
            return t.requires_grad_() if x.requires_grad else t
        return torch.device("cpu") if isinstance(x, torch.device) else x

    cargs, ckwargs = pytree.tree_map(stand_in, (args, kwargs))
    error = _run(op, cargs, ckwargs)
    return error if error is not None and _GRAD_REFUSED in str(error) else None


def _run(op, args, kwargs):
    """The op's error on CPU arguments, or None (the CPU's random state kept)."""
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")  # the op's own warnings come from its real run
        try:
            op(*args, **kwargs)
        except _ERRORS as e:
            return e
    return None


def _cpu_error(op, args, kwargs):
    """The CPU kernel's error on stand-ins with the same views of the same bases, or None
    (counted as `OutArgumentProbe`)."""
    counters.count("OutArgumentProbe")
    bases = {}

    def stand_in(x):
        if not isinstance(x, torch.Tensor):
            return torch.device("cpu") if isinstance(x, torch.device) else x
        root = _root(x)
        if id(root) not in bases:
            bases[id(root)] = torch.zeros(root.shape, dtype=root.dtype)
        base = bases[id(root)]
        return base if x is root else x._view_func(base)

    cargs, ckwargs = pytree.tree_map(stand_in, (args, kwargs))
    with torch.no_grad():
        return _run(op, cargs, ckwargs)


def _out_names(op):
    return [a.name for a in op._schema.arguments
            if a.alias_info is not None and a.alias_info.is_write]


def _kernel(op, functional, accepts, whole_overlap):
    out_names = _out_names(op)

    def kernel(*args, **kwargs):
        if torch._C._len_torch_dispatch_stack() == 0:  # (not under a tracing mode)
            if torch.is_grad_enabled() and any(
                    x.requires_grad for x in pytree.tree_leaves((args, kwargs))
                    if isinstance(x, torch.Tensor)):
                error = _grad_error(op, args, kwargs)
                if error is not None:
                    raise error from None
            if all(n in kwargs for n in out_names) and \
                    _suspect(accepts, whole_overlap, functional, args, kwargs, out_names):
                error = _cpu_error(op, args, kwargs)
                if error is not None:
                    raise error from None
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args, **kwargs)
    run_without_dynamo(kernel)
    return kernel


def _elementwise():
    """(out= overload, its functional overload) of ATen's elementwise ops."""
    aten = torch.ops.aten
    pairs = []
    for schema in torch._C._jit_get_all_schemas():
        if not (schema.name.startswith("aten::") and schema.is_mutable
                and "out" in schema.overload_name):
            continue
        packet = getattr(aten, schema.name[len("aten::"):], None)
        op = getattr(packet, schema.overload_name, None)
        if op is None or torch.Tag.pointwise not in op.tags or \
                torch._C._dispatch_has_kernel_for_dispatch_key(
                    f"{schema.name}.{schema.overload_name}", "CompositeImplicitAutograd"):
            continue  # (composite ops: their parts are checked)
        outs = _out_names(op)
        inputs = [(a.name, str(a.type)) for a in op._schema.arguments if a.name not in outs]
        for overload in packet.overloads():
            functional = getattr(packet, overload)
            if not functional._schema.is_mutable and \
                    [(a.name, str(a.type)) for a in functional._schema.arguments] == inputs:
                pairs.append((op, functional))
                break
    return pairs



@installs_kernels("aten")
def install(lib) -> None:
    for name, (functional, accepts) in _CHECKED.items():
        try:
            op, functional = overload_named(name), overload_named(functional)
        except AttributeError:  # not in this torch release
            continue
        lib.impl(name, _kernel(op, functional, accepts, whole_overlap=True), "AutogradXLA")
    for op, functional in _elementwise():
        lib.impl(op._schema.name.split("::")[1] + "." + op._overloadname,
                 _kernel(op, functional, "cast", whole_overlap=False), "AutogradXLA")
