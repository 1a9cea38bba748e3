"""The dispatch entry: every ATen op on an XLATensor arrives here.

In order: ops with a meaning to the engine beyond a lowering (`engine_op`s: transfers,
host reads, aliases; `_lazy/engine_ops` registers them), ops with a lowering (traced into
the graph), in-place and `out=` forms (their functional form, then the result written
back), ops PyTorch can decompose (their decomposition, traced op by op), and last the
explicit, counted CPU fallback (`_lazy/fallback`). Shapes and dtypes of traced ops come
from PyTorch's meta kernels (`_lazy/meta`), cached per op and argument signature, so
errors are PyTorch's own and are raised at the op.
"""
import functools

import jax
import torch
from torch._decomp import decomposition_table

from . import metrics, rng, runtime
from .caches import GenerationCache
from .execution import from_cpu, materialize, to_cpu
from .fallback import cpu_fallback
from .ir import In, Node, Sc, Value, fill_template
from .lowering import load_all, lookup, scalar_arguments
from .meta import cpu_error, meta_outputs
from .tensor import XLATensor, set_dispatch_entry, wrap

aten = torch.ops.aten
load_all()

_NUMBER = (int, float, bool, complex)


def _encode_call(func, args, kwargs, dynamic):
    """The node's argument template (tensors -> `In`, dynamic numbers -> `Sc`), its inputs,
    its scalars, its device, and a hashable signature of the call for the meta cache."""
    flags, names = scalar_arguments(func)
    inputs, scalars, sig, state = [], [], [], [None]

    def encode(obj, dyn):
        t = type(obj)
        if t is XLATensor:
            v = obj._value
            if v.data is None and v.node is None:
                raise v.failure()
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
        # 3 and 3.0 (and True and 1) are equal keys but give other dtypes: typed in the key
        sig.append((t, obj) if t in _NUMBER else obj)
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


# ---- tracing -----------------------------------------------------------------------------

def trace(func, lowering, args, kwargs):
    template, inputs, scalars, device, sig = _encode_call(
        func, args, kwargs, dynamic=not lowering.static_scalars)
    if lowering.dynamic_shape:
        return _run_eagerly(lowering, template, inputs, scalars, device)
    structure, avals, origin = meta_outputs(func, args, kwargs, sig)
    if lowering.rng:
        scalars = scalars + (rng.next_seed(device),)
    if structure == "t":
        node = Node(lowering, template, inputs, scalars, avals, origin)
        shape, dtype = avals[0]
        return wrap(Value(shape, dtype, device, node, 0))
    present = tuple(a for a in avals if a is not None)
    node = Node(lowering, template, inputs, scalars, present, origin)
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

_ENGINE_OPS = {}  # op -> handler
# id(op) -> (engine op, lowering)
_routes = GenerationCache("Route", "XLA_DISPATCH_CACHE_SIZE", 4096)
_recent_route = _routes.recent.get


def engine_op(*ops, with_op=False):
    """Registers the decorated function as the handler of `ops`, called with the op's
    arguments in place of any lowering (`with_op`: the op itself comes first)."""
    def register(fn):
        for op in ops:
            _ENGINE_OPS[op] = functools.partial(fn, op) if with_op else fn
            _routes.discard(id(op))
        return fn
    return register


def dispatch(func, args, kwargs):
    route = _recent_route(id(func)) or _routes.get(id(func))
    if route is None:
        route = (_ENGINE_OPS.get(func), lookup(func))
        _routes.put(id(func), route)
    engine, lowering = route
    if engine is not None:
        return engine(*args, **kwargs)
    if lowering is not None:
        return trace(func, lowering, args, kwargs)
    if func._schema.is_mutable:
        return _mutating(func, args, kwargs)
    decomp = decomposition_table.get(func)
    if decomp is not None:
        return _decomposed(decomp, func, args, kwargs)
    out = func.decompose(*args, **kwargs)
    if out is not NotImplemented:
        return out
    return cpu_fallback(func, args, kwargs)


def _decomposed(decomp, func, args, kwargs):
    """A decomposition's own checks word their errors their own way: users get the CPU
    kernel's error for the same arguments instead, where it raises one."""
    try:
        return decomp(*args, **kwargs)
    except (RuntimeError, ValueError, IndexError, TypeError) as e:
        raise (cpu_error(func, args, kwargs, full_size=True) or e) from None


def _functional_variant(func):
    name = func._schema.name.split("::")[1]
    overload = func._overloadname
    if name.startswith("__i") and name.endswith("__"):  # __ior__: __or__ is its functional form
        packet = getattr(aten, "__" + name[3:], None)
        op = getattr(packet, overload, None) if packet is not None else None
        return op if op is not None and not op._schema.is_mutable else None
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


set_dispatch_entry(dispatch)
