"""Ops on bounded dynamic tensors (`dynamic_sizes`): their output sizes, and what makes the
padded computation give the real one.

Output sizes. PyTorch's meta kernels are run on the padded shapes (every dynamic size at
its bound: the op must hold there, else it raises PyTorch's error at the op), then once
more per dynamic size, that size doubled: an output dim that follows it is `a * size + c`
(or `size // m`), one that does not is static. An op that fails for a doubled size holds
only for some sizes (two dynamic sizes that must be equal, a static tensor viewed as a
dynamic size): the real sizes are read from the device (a host read at the op) and the op
must hold for them, and for both sizes doubled together (sizes that agree now agree at any
size); the output follows the size list it was given, else the first size.

Padding. Each padded dim holds values past the real size that no op may let into the real
part. Elementwise ops, views and broadcasts keep them apart; an op that reduces over a
dynamic dim (a dim of an input that no output follows: sum, mean, matrix products, max,
losses) or along one (softmax) gets the padding of its inputs replaced by the value that
leaves the result alone (0 for sums and products of matrices, -inf for max and softmax, 1
for products), the means divided by the real count. Any other op that reduces over a
dynamic dim, or reorders one (sort, flip), runs on the real sizes: its inputs sliced to
them, read from the device (`static_args`), its output static.
"""
import os
from fractions import Fraction

import jax.numpy as jnp
from jax import lax
import numpy as np
import torch
from torch.utils import _pytree as pytree

from ..base import counters
from .dynamic_sizes import leaf, node_of
from ..graph.ir import In, Node, Value
from ..lowering import Lowering
from ..lowering.indexing import masked_select_bounded, nonzero_bounded
from .meta import meta_outputs
from ..graph.tensor import BoundedXLATensor, XLATensor, wrap

aten = torch.ops.aten
_META_ERRORS = (RuntimeError, ValueError, IndexError, TypeError, AssertionError)


def has_bounded(args, kwargs) -> bool:
    """Whether a call has a bounded dynamic tensor or a dynamic size among its arguments."""
    return any(type(a) is BoundedXLATensor or node_of(a) is not None
               for a in pytree.tree_leaves((args, kwargs)))


def _variables(args, kwargs):
    """(key -> DynamicSize of every dynamic size in the call, the keys of the tensors' sizes)."""
    found, in_tensors = {}, set()
    for a in pytree.tree_leaves((args, kwargs)):
        sizes = a._value.sizes if type(a) is BoundedXLATensor else (a,)
        for s in sizes:
            node = node_of(s)
            if node is not None:
                found.setdefault(node.key, node)
                if type(a) is BoundedXLATensor:
                    in_tensors.add(node.key)
    return found, in_tensors


def _size_at(s, values):
    node = node_of(s)
    return int(s) if node is None else values[node.key]


def _stand_ins(args, kwargs, values):
    """The call with each dynamic size at `values[key]`: tensors as meta tensors."""
    def stand_in(a):
        if type(a) is BoundedXLATensor:
            return torch.empty([_size_at(s, values) for s in a._value.sizes], dtype=a.dtype,
                               device="meta")
        return _size_at(a, values) if node_of(a) is not None else a
    return pytree.tree_map(stand_in, (args, kwargs))


def _signature(obj):
    if isinstance(obj, torch.Tensor):
        return (tuple(obj.shape), obj.dtype)
    if isinstance(obj, (list, tuple)):
        return (type(obj),) + tuple(_signature(o) for o in obj)
    if isinstance(obj, dict):
        return tuple((k, _signature(v)) for k, v in obj.items())
    try:
        hash(obj)
    except TypeError:
        return object()  # (no key: a miss of meta's cache)
    return (type(obj), obj)


def _meta(func, args, kwargs, values):
    sargs, skwargs = _stand_ins(args, kwargs, values)
    return meta_outputs(func, sargs, skwargs, ("bounded", _signature((sargs, skwargs))))


def _shapes(avals):
    return [None if a is None else a[0] for a in avals]


class Plan:
    """A call's outputs: `structure` and `avals` (padded) as `meta.meta_outputs` gives them,
    `sizes` per output (None: static), `origin`, and `vanished`: the keys of the inputs'
    dynamic sizes that no output follows (reduced over)."""

    def __init__(self, structure, avals, sizes, origin, vanished):
        self.structure, self.avals, self.sizes = structure, avals, sizes
        self.origin, self.vanished = origin, vanished


def plan(func, args, kwargs) -> Plan:
    """The outputs of `func` on a call with dynamic sizes (see the module docstring)."""
    found, in_tensors = _variables(args, kwargs)
    bounds = {k: n.upper_bound for k, n in found.items()}
    structure, base, origin = _meta(func, args, kwargs, bounds)
    slopes = {}  # key -> per output, per dim: the dim's change per unit of that size
    try:
        for k in found:
            step = bounds[k] or 1
            _, out, _ = _meta(func, args, kwargs, {**bounds, k: bounds[k] + step})
            slopes[k] = _slopes(base, out, step)
    except _META_ERRORS:
        return _plan_at_real_sizes(func, args, kwargs, found, in_tensors, bounds, structure,
                                   base, origin)
    sizes = [None if shape is None else _dims(shape, i, slopes, found, bounds, func, args, kwargs)
             for i, shape in enumerate(_shapes(base))]
    vanished = {k for k in in_tensors
                if all(a == 0 for per_out in slopes[k] for a in (per_out or ()))}
    return Plan(structure, base, sizes, origin, vanished)


def _slopes(base, out, step):
    result = []
    for b, o in zip(_shapes(base), _shapes(out)):
        if b is None:
            result.append(None)
            continue
        if len(b) != len(o):
            raise RuntimeError("the rank of the output depends on a dynamic size")
        result.append(tuple(Fraction(y - x, step) for x, y in zip(b, o)))
    return result


def _dims(shape, i, slopes, found, bounds, func, args, kwargs):
    """Output i's sizes (a dim following dynamic sizes: a SymInt of them), None if static."""
    dims, dynamic = [], False
    for d, padded in enumerate(shape):
        terms = {k: s[i][d] for k, s in slopes.items() if s[i][d] != 0}
        if not terms:
            dims.append(padded)
            continue
        if len(terms) > 1:
            _check_linear(func, args, kwargs, terms, bounds, i, d, padded)
        dims.append(_linear(terms, found, bounds, padded))
        dynamic = True
    return tuple(dims) if dynamic else None


def _check_linear(func, args, kwargs, terms, bounds, i, d, padded):
    """A dim following several sizes must be their sum (not their product: a flatten)."""
    doubled = {**bounds, **{k: 2 * bounds[k] or 1 for k in terms}}
    _, out, _ = _meta(func, args, kwargs, doubled)
    expected = padded + sum(a * (bounds[k] or 1) for k, a in terms.items())
    if out[i][0][d] != expected:
        raise NotImplementedError("a size that is a product of dynamic sizes")


def _linear(terms, found, bounds, padded):
    """sum(a_k * size_k) + c, its bound `padded`, as a SymInt."""
    const = Fraction(padded) - sum(a * bounds[k] for k, a in terms.items())
    expr = None
    for k, a in terms.items():
        node = found[k]
        if a.denominator == 1:
            term = node.mul(node.wrap_int(a.numerator))
        elif a.numerator == 1 and const == 0 and len(terms) == 1:
            term = node.floordiv(node.wrap_int(a.denominator))
        else:
            raise NotImplementedError("a size that is a fraction of a dynamic size")
        expr = term if expr is None else expr.add(term)
    if const.denominator != 1:
        raise NotImplementedError("a size that is a fraction of a dynamic size")
    expr = expr.add(expr.wrap_int(int(const)))
    if expr.upper_bound > padded:
        raise NotImplementedError(f"an output size {expr.str()} above its padding {padded}")
    return torch.SymInt(expr)


def _plan_at_real_sizes(func, args, kwargs, found, in_tensors, bounds, structure, base, origin):
    """The plan of an op that holds only for some sizes (the module docstring). The sizes it
    relates agree: an output following none of them reduces over all of them."""
    real = {k: int(n.value()) for k, n in found.items()}
    counters.count("DynamicSizeRead")
    _meta(func, args, kwargs, real)  # PyTorch's error for the real sizes
    listed = _size_list(args, kwargs)
    shapes = _shapes(base)
    if listed is not None and len(shapes) == 1 and len(listed) == len(shapes[0]):
        sizes = [tuple(s if node_of(s) is not None else p for s, p in zip(listed, shapes[0]))]
    else:
        doubled = {k: 2 * b or 1 for k, b in bounds.items()}
        try:
            _, out, _ = _meta(func, args, kwargs, doubled)
        except _META_ERRORS:
            raise RuntimeError(
                f"{func}: holds for the real sizes but not for every size up to their bounds "
                f"({', '.join(n.str() for n in found.values())}): a program traced with them "
                "could not run for other sizes") from None
        first = next(iter(found))
        step = bounds[first] or 1
        slopes = {first: [None if b is None else tuple(Fraction(y - x, step) for x, y in zip(b, o))
                          for b, o in zip(shapes, _shapes(out))]}
        sizes = [None if s is None else _dims(s, i, slopes, found, bounds, func, args, kwargs)
                 for i, s in enumerate(shapes)]
    followed = any(s is not None for s in sizes)
    return Plan(structure, base, sizes, origin, set() if followed else set(in_tensors))


def _size_list(args, kwargs):
    """The first list of sizes in a call that holds a dynamic size (view's, expand's)."""
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)) and any(node_of(s) is not None for s in a):
            return a
    return None


# ---- the call as the lowering gets it -----------------------------------------------------

def concrete_args(args, kwargs, scalar_positions):
    """The call with each dynamic size where a size is expected as its bound, and where a
    number is expected (`scalar_positions`: (per position, keyword names)) as a 0-d tensor
    the program computes."""
    flags, names = scalar_positions

    def as_scalar(a):
        node = node_of(a)
        return a if node is None else wrap(node.device_value())

    def as_size(a):
        node = node_of(a)
        return a if node is None else node.upper_bound

    cargs = tuple(as_scalar(a) if i < len(flags) and flags[i] else pytree.tree_map(as_size, a)
                  for i, a in enumerate(args))
    ckwargs = {k: as_scalar(v) if k in names else pytree.tree_map(as_size, v)
               for k, v in kwargs.items()}
    return cargs, ckwargs


def output_values(plan, node, device):
    """The node's outputs as values, each with its sizes."""
    node.bounded = tuple(() if s is None else tuple(d for d, x in enumerate(s) if node_of(x))
                         for s, a in zip(plan.sizes, plan.avals) if a is not None)
    values, index = [], 0
    for aval, sizes in zip(plan.avals, plan.sizes):
        if aval is None:
            values.append(None)
            continue
        v = Value(aval[0], aval[1], device, node, index)
        v.sizes = sizes
        values.append(v)
        index += 1
    return values


# ---- padding ------------------------------------------------------------------------------

_ZERO, _ONE, _LOW, _HIGH, _MEAN = "zero", "one", "low", "high", "mean"

# ops reducing over a dim: what a dynamic dim's padding becomes in their inputs
_REDUCTIONS = {
    **dict.fromkeys([aten.sum.default, aten.sum.dim_IntList, aten.nansum.default,
                     aten.mm.default, aten.bmm.default, aten.addmm.default, aten.mv.default,
                     aten.addmv.default, aten.dot.default, aten.baddbmm.default,
                     aten.addbmm.default, aten.count_nonzero.default,
                     aten.count_nonzero.dim_IntList, aten.any.default, aten.any.dim,
                     aten.any.dims], _ZERO),
    **dict.fromkeys([aten.prod.default, aten.prod.dim_int, aten.all.default, aten.all.dim,
                     aten.all.dims], _ONE),
    **dict.fromkeys([aten.amax.default, aten.max.default, aten.max.dim, aten.argmax.default,
                     aten.logsumexp.default], _LOW),
    **dict.fromkeys([aten.amin.default, aten.min.default, aten.min.dim, aten.argmin.default],
                    _HIGH),
    **dict.fromkeys([aten.mean.default, aten.mean.dim], _MEAN),
}
# losses: the position of their `reduction` argument (1: mean, 2: sum)
_LOSSES = {aten.mse_loss.default: 2, aten.binary_cross_entropy.default: 3,
           aten.binary_cross_entropy_with_logits.default: 4, aten.smooth_l1_loss.default: 2,
           aten.huber_loss.default: 2, aten.soft_margin_loss.default: 2}
# their gradients (reduction at that position): a mean's divides by the padded count
_LOSS_GRADIENTS = {aten.mse_loss_backward.default: 3, aten.binary_cross_entropy_backward.default: 4,
                   aten.smooth_l1_loss_backward.default: 3, aten.huber_loss_backward.default: 3,
                   aten.soft_margin_loss_backward.default: 3}
# ops along a dim (the position of their `dim`): (fill of each tensor argument's padding)
_ALONG = {aten._softmax.default: (1, {0: _LOW}), aten._log_softmax.default: (1, {0: _LOW}),
          aten._softmax_backward_data.default: (2, {0: _ZERO}),
          aten._log_softmax_backward_data.default: (2, {0: _ZERO})}
# ops that reorder along a dim: they run on the real sizes
_REORDERING = {aten.flip.default, aten.roll.default, aten.sort.default, aten.sort.stable,
               aten.argsort.default, aten.argsort.stable, aten.topk.default,
               aten.kthvalue.default, aten.median.dim, aten.median.default, aten.mode.default,
               aten.cumsum.default, aten.cumprod.default, aten.cummax.default,
               aten.cummin.default}


def runs_static(func, plan_=None) -> bool:
    """Whether `func` must run on the real sizes (a host read): it reorders, or reduces over
    a dynamic dim without a rule for its padding."""
    if func in _REORDERING:
        return True
    return bool(plan_ is not None and plan_.vanished and func not in _REDUCTIONS
                and func not in _LOSSES)


def _fill(kind, dtype):
    if kind == _ZERO or kind == _MEAN:
        return np.zeros((), dtype)
    if kind == _ONE:
        return np.ones((), dtype)
    low = kind == _LOW
    if jnp.issubdtype(dtype, jnp.floating):
        return np.array(-np.inf if low else np.inf, dtype)
    if dtype == np.bool_:
        return np.array(not low)
    info = jnp.iinfo(dtype)
    return np.array(info.min if low else info.max, dtype)


def _mask(x, dim, size, kind):
    keep = lax.broadcasted_iota(np.int64, x.shape, dim) < size
    return jnp.where(keep, x, _fill(kind, x.dtype))


def _reduction_arg(args, kwargs, position, name="reduction"):
    return args[position] if len(args) > position else kwargs.get(name, 1)


def _masking(func, args, kwargs, plan_):
    """(kind, [(argument position, dim, key)]) of the padding a call must replace, or None."""
    if func in _ALONG:
        dim_pos, fills = _ALONG[func]
        dim = args[dim_pos]
        spec = []
        for pos, kind in fills.items():
            a = args[pos]
            if type(a) is BoundedXLATensor:
                node = node_of(a._value.sizes[dim % a.dim()])
                if node is not None:
                    spec.append((pos, dim % a.dim(), node.key))
        return (fills[0], spec) if spec else None
    if func in _LOSS_GRADIENTS:
        if _reduction_arg(args, kwargs, _LOSS_GRADIENTS[func]) != 1:
            return None
        kind = ("loss_gradient", _LOSS_GRADIENTS[func])
        self = args[1]
        spec = [(1, d, node_of(s).key) for d, s in enumerate(self._value.sizes)
                if node_of(s) is not None] if type(self) is BoundedXLATensor else []
        return (kind, spec) if spec else None
    if not plan_.vanished:
        return None
    kind = ("loss", _LOSSES[func]) if func in _LOSSES else _REDUCTIONS[func]
    spec = [(pos, d, node_of(s).key)
            for pos, a in enumerate(args) if type(a) is BoundedXLATensor
            for d, s in enumerate(a._value.sizes)
            if node_of(s) is not None and node_of(s).key in plan_.vanished]
    return (kind, spec) if spec else None


_masked_lowerings = {}


def masked(func, lowering, args, kwargs, plan_, ckwargs):
    """(lowering, keyword arguments) of a call whose inputs' padding must be replaced: the
    lowering masks it (the real sizes given as `_bounded_sizes`, 0-d tensors)."""
    found = _masking(func, args, kwargs, plan_)
    if found is None:
        return lowering, ckwargs
    kind, spec = found
    keys = list(dict.fromkeys(k for _, _, k in spec))
    nodes, _ = _variables(args, kwargs)
    positions = tuple((pos, dim, keys.index(k)) for pos, dim, k in spec)
    bounds = tuple(nodes[k].upper_bound for k in keys)
    name = f"{lowering.name}[padding {kind}: {positions}, bounds {bounds}]"
    made = _masked_lowerings.get(name)
    if made is None:
        made = _masked_lowerings.setdefault(name, Lowering(
            name, _masked_fn(lowering.fn, kind, positions, bounds), lowering.static_scalars,
            lowering.rng, False, parameters=lowering.parameters,
            f32_scalars=lowering.f32_scalars))
    sizes = tuple(wrap(nodes[k].device_value()) for k in keys)
    return made, {**ckwargs, "_bounded_sizes": sizes}


def _masked_fn(fn, kind, positions, bounds):
    def run(*args, _bounded_sizes, **kwargs):
        args = list(args)
        if isinstance(kind, tuple) and kind[0] == "loss":
            return _masked_loss(fn, kind[1], args, kwargs, positions, _bounded_sizes)
        if isinstance(kind, tuple):  # a loss's gradient of a mean: by the real count
            return fn(*args, **kwargs) * _padded_over_real(positions, bounds, _bounded_sizes)
        for pos, dim, j in positions:
            args[pos] = _mask(args[pos], dim, _bounded_sizes[j], kind)
        out = fn(*args, **kwargs)
        if kind == _MEAN:
            out = out * _padded_over_real(positions, bounds, _bounded_sizes).astype(out.dtype)
        return out
    return run


def _padded_over_real(positions, bounds, sizes):
    """The padded count over the real count of the elements of the dims masked."""
    used = sorted({j for _, _, j in positions})
    ratio = jnp.asarray(1.0, np.float32)
    for j in used:
        ratio = ratio * (bounds[j] / jnp.maximum(sizes[j], 1).astype(np.float32))
    return ratio


def _masked_loss(fn, position, args, kwargs, positions, sizes):
    """A loss reduced over the real elements alone: its elementwise form, the padding
    zeroed, summed (and for a mean, divided by the real count)."""
    reduction = args[position] if len(args) > position else kwargs.pop("reduction", 1)
    if len(args) > position:
        args[position] = 0
    else:
        kwargs["reduction"] = 0
    out = fn(*args, **kwargs)
    count = jnp.asarray(1, np.int64)
    shape = out.shape
    real = list(shape)
    for pos, dim, j in positions:
        if pos == 0:
            out = _mask(out, dim, sizes[j], _ZERO)
            real[dim] = sizes[j]
    for n in real:
        count = count * n
    total = jnp.sum(out)
    return total if reduction == 2 else total / jnp.maximum(count, 1).astype(total.dtype)


# ---- on the real sizes --------------------------------------------------------------------

_TO_STATIC = Lowering("xla::bounded_to_static",
                      lambda x, sizes: x[tuple(slice(0, n) for n in sizes)],
                      static_scalars=True, rng=False, dynamic_shape=False)


def to_static(t: XLATensor) -> XLATensor:
    """A bounded tensor's real part as a static tensor (its sizes read from the device)."""
    v = t._value
    sizes = tuple(int(s) for s in v.sizes)
    counters.count("DynamicSizeRead")
    node = Node(_TO_STATIC, ((In(0), sizes), ()), (v,), (), ((sizes, v.dtype),))
    return wrap(Value(sizes, v.dtype, v.device, node, 0))


def static_args(args, kwargs):
    """The call with its bounded tensors sliced to their real sizes and its dynamic sizes
    read (host reads)."""
    def static(a):
        if type(a) is BoundedXLATensor:
            return to_static(a)
        return int(a) if node_of(a) is not None else a
    return pytree.tree_map(static, (args, kwargs))


# ---- the ops whose sizes the program computes ---------------------------------------------

_SOURCES = {aten.nonzero.default: Lowering("aten.nonzero.default[bounded]", nonzero_bounded,
                                           static_scalars=True, rng=False, dynamic_shape=False),
            aten.masked_select.default: Lowering("aten.masked_select.default[bounded]",
                                                 masked_select_bounded, static_scalars=True,
                                                 rng=False, dynamic_shape=False)}


def bounded_source(func):
    """The bounded lowering of `func` where XLA_EXPERIMENTAL names it (torch_xla's switch:
    `nonzero:masked_select`), else None."""
    lowering = _SOURCES.get(func)
    if lowering is None:
        return None
    names = os.environ.get("XLA_EXPERIMENTAL", "").split(":")
    return lowering if func._schema.name.split("::")[-1] in names else None


def source_outputs(lowering, template, inputs, device):
    """The bounded tensor of a nonzero or masked_select node: its data padded to the bound
    and its first dim the node's second output, the count."""
    shapes = [v.shape for v in inputs]
    if lowering is _SOURCES[aten.nonzero.default]:
        bound = int(np.prod(shapes[0], dtype=np.int64)) if shapes[0] else 1
        aval, dtype = (bound, len(shapes[0])), torch.int64
    else:
        bound = int(np.prod(np.broadcast_shapes(*shapes), dtype=np.int64))
        aval, dtype = (bound,), inputs[0].dtype
    node = Node(lowering, template, inputs, (), ((aval, dtype), ((), torch.int64)))
    node.bounded = ((0,), ())
    count = Value((), torch.int64, device, node, 1)
    out = Value(aval, dtype, device, node, 0)
    out.sizes = (leaf(count, bound),) + aval[1:]
    return wrap(out)
