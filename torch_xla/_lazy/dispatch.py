"""The dispatch entry: every ATen op on an XLATensor arrives here.

In order: ops with special meaning to the engine (transfers, scalars, aliases), ops with a
lowering (traced into the graph), in-place and `out=` forms (their functional form, then the
result written back), ops PyTorch can decompose (their decomposition, traced op by op), and
last an explicit, counted CPU fallback. Shapes and dtypes of traced ops come from PyTorch's
meta kernels, cached per op and argument signature, so errors are PyTorch's own and are
raised at the op.
"""
import os
import warnings

import jax
import torch
from torch._decomp import decomposition_table

from . import metrics, rng, runtime
from .ir import In, Node, Sc, Value, fill_template
from .lowering import REGISTRY, load_all
from .lowering._types import is_weak
from .tensor import XLATensor, from_cpu, materialize, to_cpu, wrap

aten = torch.ops.aten
load_all()

def _is_scalar_type(t) -> bool:
    """Scalar-typed arguments, and Tensor-typed ones (where a Python number arrives as a
    wrapped number, as in `x * 0.5`), are values: their numbers become program parameters."""
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    if isinstance(t, torch.ListType):
        t = t.getElementType()
    return isinstance(t, (torch.NumberType, torch.TensorType))


_dynamic_args = {}  # op -> (positional flags, kwarg names) of Scalar-typed arguments


def _scalar_args(func):
    info = _dynamic_args.get(id(func))
    if info is None:
        args = func._schema.arguments
        flags = tuple(_is_scalar_type(a.type) for a in args)
        names = frozenset(a.name for a, f in zip(args, flags) if f)
        info = _dynamic_args[id(func)] = (flags, names)
    return info


_NUMBER = (int, float, bool, complex)


def _encode_call(func, args, kwargs, dynamic):
    """The node's argument template (tensors -> `In`, dynamic numbers -> `Sc`), its inputs,
    its scalars, its device, and a hashable signature of the call for the meta cache."""
    flags, names = _scalar_args(func)
    inputs, scalars, sig, state = [], [], [], [None]

    def encode(obj, dyn):
        t = type(obj)
        if t is XLATensor:
            v = obj._value
            if state[0] is None:
                state[0] = v.device
            elif v.device != state[0]:
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two "
                    f"devices, xla:{state[0]} and xla:{v.device}!")
            inputs.append(v)
            sig.append((v.shape, v.dtype))
            return In(len(inputs) - 1)
        if dyn and t in _NUMBER:
            scalars.append(obj)
            sig.append(t)
            return Sc(len(scalars) - 1, t)
        if t is list or t is tuple:
            return tuple(encode(o, dyn) for o in obj)
        if isinstance(obj, torch.Tensor):
            return cpu_tensor(obj)
        if t is torch.SymInt:
            obj = int(obj)
        sig.append(obj)
        return obj

    def cpu_tensor(t):
        if t.device.type == "cpu" and t.dim() == 0:
            # PyTorch lets a CPU scalar tensor meet a tensor on any device.
            inputs.append(_CpuScalar(t))
            sig.append((t.shape, t.dtype, "cpu"))
            return In(len(inputs) - 1)
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"xla:{state[0] if state[0] is not None else 0} and {t.device}!")

    n = len(flags)
    targs = tuple([encode(a, dynamic and i < n and flags[i]) for i, a in enumerate(args)])
    def encode_kwarg(k, v):
        sig.append(k)  # PyTorch drops keyword arguments equal to their defaults: name them
        return k, encode(v, dynamic and k in names)
    tkwargs = tuple([encode_kwarg(k, v) for k, v in kwargs.items()]) if kwargs else ()
    device = state[0]
    if device is None:
        device = _factory_device(kwargs)
    if any(type(x) is _CpuScalar for x in inputs):
        inputs = [from_cpu(x.t, device) if type(x) is _CpuScalar else x for x in inputs]
    return (targs, tkwargs), tuple(inputs), tuple(scalars), device, tuple(sig)


class _CpuScalar:
    """A 0-d CPU tensor argument, uploaded once the op's device is known."""
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


def _factory_device(kwargs):
    d = kwargs.get("device")
    if isinstance(d, torch.device) and d.type == "xla":
        return d.index or 0
    return 0


# ---- shapes and dtypes from PyTorch's meta kernels ----------------------------------------

_meta_cache = {}


def _to_meta(obj):
    if isinstance(obj, torch.Tensor):
        return torch.empty(obj.shape, dtype=obj.dtype, device="meta")
    if isinstance(obj, torch.device) and obj.type == "xla":
        return torch.device("meta")
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_meta(o) for o in obj)
    return obj


# Ops whose meta kernels accept what the CPU kernels reject (mixed dtypes, empty inputs).
_CPU_CHECKED = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.baddbmm.default,
                aten.mv.default, aten.addmv.default, aten.dot.default, aten.vdot.default,
                aten.max.default, aten.min.default, aten.argmax.default, aten.argmin.default}


def _to_cpu_probe(obj, tiny):
    if isinstance(obj, XLATensor):
        if tiny:  # pointwise ops: one element per dimension keeps broadcasting and dtypes
            return torch.ones((1,) * obj.dim(), dtype=obj.dtype)
        return torch.zeros((), dtype=obj.dtype).expand(obj.shape)
    if isinstance(obj, torch.device) and obj.type == "xla":
        return torch.device("cpu")
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu_probe(o, tiny) for o in obj)
    return obj


def _cpu_error(func, args, kwargs, tiny=False):
    """The error PyTorch's CPU kernel raises for these arguments (its message is the one
    users know), or None. Runs on zero-stride tensors of the same shapes and dtypes, or for
    pointwise ops (`tiny`) on one-element tensors of the same dtypes and ranks."""
    try:
        func(*_to_cpu_probe(args, tiny), **{k: _to_cpu_probe(v, tiny) for k, v in kwargs.items()})
    except (RuntimeError, ValueError, IndexError, TypeError, ZeroDivisionError) as e:
        return e
    return None


def _is_pointwise(func) -> bool:
    """Pointwise ops whose dtype rules PyTorch checks in its CPU kernels, not its meta ones."""
    return torch.Tag.pointwise in func.tags and func.namespace == "aten" and not func._schema.is_mutable


def _meta_outputs(func, args, kwargs, sig):
    """(structure, avals) of the op's outputs: structure is 't' for one tensor, or a tuple or
    list of 't' for several."""
    key = (id(func), sig)
    hit = _meta_cache.get(key)
    if hit is not None:
        return hit
    try:
        out = func(*_to_meta(args), **{k: _to_meta(v) for k, v in kwargs.items()})
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        raise (_cpu_error(func, args, kwargs) or e) from None
    if func in _CPU_CHECKED or _is_pointwise(func):
        error = _cpu_error(func, args, kwargs, tiny=func not in _CPU_CHECKED)
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
    _meta_cache[key] = result
    return result


# ---- tracing -----------------------------------------------------------------------------

def call_lowering(op, template, inputs, scalars, avals):
    """Runs a lowering on jax values; returns its outputs as a tuple, cast and checked."""
    args, kwargs = fill_template(template, inputs, scalars)
    kwargs = dict(kwargs)
    if op.rng:
        kwargs["key"] = jax.random.PRNGKey(scalars[-1])
    out = op.fn(*args, **kwargs)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    out = [o for o in out if o is not None]  # outputs the op leaves out (see _meta_outputs)
    result = []
    for o, (shape, dtype) in zip(out, avals):
        jdtype = runtime.to_jax_dtype(dtype)
        if o.dtype != jdtype or is_weak(o):
            o = o.astype(jdtype)
        if tuple(o.shape) != shape:
            raise RuntimeError(f"internal error: lowering of {op.name} gave shape {tuple(o.shape)}, "
                               f"PyTorch expects {shape}")
        result.append(o)
    return tuple(result)


def trace(func, lowering, args, kwargs):
    template, inputs, scalars, device, sig = _encode_call(
        func, args, kwargs, dynamic=not lowering.static_scalars)
    if lowering.dynamic_shape:
        return _run_eagerly(lowering, template, inputs, scalars, device)
    structure, avals = _meta_outputs(func, args, kwargs, sig)
    if lowering.rng:
        scalars = scalars + (rng.next_seed(device),)
    if structure == "t":
        node = Node(lowering, template, inputs, scalars, avals)
        shape, dtype = avals[0]
        return wrap(Value(shape, dtype, device, node, 0))
    present = tuple(a for a in avals if a is not None)
    node = Node(lowering, template, inputs, scalars, present)
    index = iter(range(len(present)))
    return structure([None if a is None else wrap(Value(a[0], a[1], device, node=node, index=next(index)))
                      for a in avals])


def _run_eagerly(lowering, template, inputs, scalars, device):
    """Ops whose output shape depends on values (nonzero, masked_select, unique...): the
    inputs are materialised and the lowering runs on them at once."""
    materialize(inputs)
    metrics.count("DynamicShapeOp")
    args, kwargs = fill_template(template, [v.data for v in inputs], scalars)
    with jax.default_device(runtime.jax_device(device)):
        out = lowering.fn(*args, **dict(kwargs))
    single = not isinstance(out, (tuple, list))
    outs = [wrap(Value(tuple(o.shape), runtime.to_torch_dtype(o.dtype), device, data=o))
            for o in ((out,) if single else out)]
    return outs[0] if single else tuple(outs)


# ---- the entry ---------------------------------------------------------------------------

_routes = {}  # id(op) -> (special, lowering): OpOverloads live as long as the process


def dispatch(func, args, kwargs):
    route = _routes.get(id(func))
    if route is None:
        route = _routes[id(func)] = (SPECIAL.get(func), REGISTRY.get(func))
    special, lowering = route
    if special is not None:
        return special(*args, **kwargs)
    if lowering is not None:
        return trace(func, lowering, args, kwargs)
    if func._schema.is_mutable:
        return _mutating(func, args, kwargs)
    decomp = decomposition_table.get(func)
    if decomp is not None:
        return decomp(*args, **kwargs)
    out = func.decompose(*args, **kwargs)
    if out is not NotImplemented:
        return out
    return cpu_fallback(func, args, kwargs)


def _functional_variant(func):
    name = func._schema.name.split("::")[1]
    overload = func._overloadname
    base = name[:-1] if name.endswith("_") else name
    packet = getattr(aten, base, None)
    if packet is None:
        return None
    if overload in ("out", "default") or not name.endswith("_"):
        for candidate in (overload.replace("_out", "").replace("out", "") or "default", "default"):
            op = getattr(packet, candidate or "default", None)
            if op is not None and not op._schema.is_mutable:
                return op
        return None
    op = getattr(packet, overload, None)
    return op if op is not None and not op._schema.is_mutable else None


def _mutating(func, args, kwargs):
    """In-place and out= ops below functionalization (from decompositions): run the
    functional form and point the mutated tensors at the result."""
    if func is aten.copy_.default and not isinstance(args[0], XLATensor):
        return args[0].copy_(to_cpu(args[1]._value))  # into a CPU tensor (C++ code, e.g. DDP's)
    functional = _functional_variant(func)
    if functional is None:
        return cpu_fallback(func, args, kwargs)
    name = func._schema.name
    if "out" in kwargs:
        out = kwargs.pop("out")
        result = dispatch(functional, args, kwargs)
        for dst, src in zip(out if isinstance(out, (tuple, list)) else (out,),
                            result if isinstance(result, (tuple, list)) else (result,)):
            _assign(dst, src)
        return out
    self = args[0]
    result = dispatch(functional, args, kwargs)
    _assign(self, result if isinstance(result, torch.Tensor) else result[0])
    return self


def _assign(dst, src):
    if tuple(dst.shape) != tuple(src.shape):
        raise RuntimeError(f"output with shape {list(dst.shape)} doesn't match the broadcast "
                           f"shape {list(src.shape)}")
    if src.dtype != dst.dtype:
        src = dispatch(aten._to_copy.default, (src,), {"dtype": dst.dtype})
    dst._value = src._value


# ---- CPU fallback ------------------------------------------------------------------------

_warned = set()


def cpu_fallback(func, args, kwargs):
    """Runs an op without a lowering on the CPU: counted as `aten::NAME`, warned once, or an
    error naming the op when XLA_NO_CPU_FALLBACK=1."""
    name = func._schema.name
    if os.environ.get("XLA_NO_CPU_FALLBACK") == "1":
        raise NotImplementedError(
            f"{name} ({func}) has no XLA lowering and XLA_NO_CPU_FALLBACK=1 forbids the CPU fallback")
    metrics.count(name)
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"{name} has no XLA lowering: it runs on the CPU (counted in metrics as {name})",
                      stacklevel=4)
    device = [None]

    def to_cpu_arg(x):
        if isinstance(x, XLATensor):
            device[0] = x._value.device
            return to_cpu(x._value)
        if isinstance(x, torch.device) and x.type == "xla":
            device[0] = x.index or 0
            return torch.device("cpu")
        if isinstance(x, (list, tuple)):
            return type(x)(to_cpu_arg(o) for o in x)
        return x

    cargs = to_cpu_arg(args)
    ckwargs = {k: to_cpu_arg(v) for k, v in kwargs.items()}
    out = func(*cargs, **ckwargs)
    dev = device[0] or 0

    def back(o):
        if isinstance(o, torch.Tensor):
            return wrap(from_cpu(o, dev))
        if isinstance(o, (list, tuple)):
            return type(o)(back(x) for x in o)
        return o
    return back(out)


from .special import SPECIAL  # noqa: E402  (special ops use the helpers above)
