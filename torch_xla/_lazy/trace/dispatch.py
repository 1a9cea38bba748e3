"""The dispatch entry: every ATen op on an XLATensor arrives here.

In order: ops with a meaning to the engine beyond a lowering (`engine_op`s: transfers,
host reads, aliases; `_lazy/trace/engine_ops` registers them), ops with a lowering (traced into
the graph), in-place and `out=` forms (their functional form, then the result written
back), ops PyTorch can decompose (their decomposition, traced op by op), ops of other
libraries with a kernel of their own for XLA tensors (`op_rules.has_own_kernel`: that
kernel, its ops traced as any others), and last the explicit, counted CPU fallback
(`_lazy/trace/fallback`). Shapes and dtypes of traced ops come from PyTorch's meta kernels
(`_lazy/trace/meta`), cached per op and argument signature, so errors are PyTorch's own and are
raised at the op.
"""
import functools
import time

import jax
import torch
from torch._decomp import decomposition_table

from ..base import counters
from . import dynamic_ops, eager
from ..graph import ir, rng
from ..runtime import pjrt
from ..base.caches import GenerationCache
from ..step.execution import materialize, to_cpu
from .fallback import cpu_fallback
from ..graph.ir import (NUMBER_TYPES, ArgumentEncoder, Node, Value, fill_template, node_type,
                        value_signature)
from ..lowering import load_all, lookup
from ..lowering.schema import scalar_arguments
from .meta import cpu_error, meta_outputs
from .op_rules import has_own_kernel, run_own_kernel
from ..graph.tensor import BoundedXLATensor, XLATensor, set_dispatch_entry, wrap
from ..launch.transfers import from_cpu

aten = torch.ops.aten
load_all()

_NO_PARAMETERS = ((), frozenset())


def _encode_call(func, args, kwargs, parameters):
    """The node's argument template (`ir.ArgumentEncoder`: tensors -> `In`, numbers where
    `parameters` (`_scalar_flags`) says -> `Sc`), its inputs, its scalars, its device, and a
    hashable signature of the call for the meta cache."""
    flags, names = parameters
    e = _Encoding()
    template = e.encode_call(args, kwargs, flags, names)
    device = e.device
    if device is None:
        device = _factory_device(kwargs)
    inputs = e.inputs
    if any(type(x) is _CpuScalar for x in inputs):
        inputs = [from_cpu(x.t, device) if type(x) is _CpuScalar else x for x in inputs]
    return template, tuple(inputs), tuple(e.scalars), device, tuple(e.sig)


def encode_constant_call(func, args, kwargs):
    """(template, inputs, device) of a call encoded as the lazy path encodes it, every number
    a constant: for engine ops that record a node of their own."""
    template, inputs, _, device, _ = _encode_call(func, args, kwargs, _NO_PARAMETERS)
    return template, inputs, device


_XLA = torch.device("xla")


class _Encoding(ArgumentEncoder):
    """One call's arguments as the lazy path encodes them: XLA tensors (all on one device)
    and 0-d CPU tensors are the inputs; what it sees is written down as the call's
    signature for the meta cache (`sig`)."""
    __slots__ = ("sig", "device")

    def __init__(self):
        super().__init__()
        self.sig, self.device = [], None

    def input(self, obj, t):
        if t is XLATensor or t is BoundedXLATensor:
            v = obj._value
            if v.data is None and v.node is None:
                raise v.failure()
            if self.device is None:
                self.device = v.device
            elif v.device != self.device:
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two "
                    f"devices, xla:{self.device} and xla:{v.device}!")
            self.inputs.append(v)
            self.sig.append((v.shape, v.dtype))
            return len(self.inputs) - 1
        if isinstance(obj, torch.Tensor):
            if obj.device.type == "cpu" and obj.dim() == 0:
                # PyTorch lets a CPU scalar tensor meet a tensor on any device.
                self.inputs.append(_CpuScalar(obj))
                self.sig.append((obj.shape, obj.dtype, "cpu"))
                return len(self.inputs) - 1
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"xla:{self.device if self.device is not None else 0} and {obj.device}!")
        return None

    def scalar(self, t):
        self.sig.append(t)

    def keyword(self, name):
        self.sig.append(name)  # PyTorch drops keyword arguments equal to their defaults: name them

    def constant(self, obj, t, dynamic):
        if t is torch.SymInt:
            obj, t = int(obj), int
        # 3 and 3.0 (and True and 1) are equal keys but give other dtypes: typed in the key
        self.sig.append((t, obj) if t in NUMBER_TYPES else obj)
        if t is torch.device and obj.type == "xla":
            # A program runs on the device its key names: the graph names none, so that the
            # replicas' graphs (a factory's device=xla:N) are one.
            return _XLA
        return obj


class _CpuScalar:
    """A 0-d CPU tensor argument, uploaded once the op's device is known."""
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


def _factory_device(kwargs):
    """The index of the XLA device a factory makes its tensor on; a device the runtime lacks
    (`xla:7` in a 1-device process, or a GPU runtime without jax's plugin) raises here, at the
    user's line, not when it runs."""
    d = kwargs.get("device")
    index = d.index or 0 if isinstance(d, torch.device) and d.type == "xla" else 0
    pjrt.jax_device(index)
    return index


# ---- tracing -----------------------------------------------------------------------------

class _Plan:
    """What every call of one op with one argument signature shares: the node's lowering,
    argument template and structural key, and the outputs' structure, avals, signatures
    (`Value.key`) and device."""
    __slots__ = ("lowering", "template", "key", "type", "structure", "avals", "present", "device",
                 "signatures", "single", "origin")

    def __init__(self, lowering, template, structure, avals, device, origin):
        self.lowering = lowering
        self.template = template
        self.structure = structure  # 't' (one tensor), or the tuple/list type of several
        self.avals = avals          # per output (shape, dtype), None where the op leaves one out
        self.present = tuple(a for a in avals if a is not None)
        self.key = Node.key_of(lowering, template, self.present)
        self.type = node_type(self.key)
        self.device = device
        self.signatures = tuple(None if a is None else value_signature(a[0], a[1], device)
                                for a in avals)
        # (shape, dtype, signature) of the one output of an op without randomness (the
        # common case)
        self.single = (*avals[0], self.signatures[0]) if structure == "t" and not lowering.rng else None
        self.origin = origin        # `user_code.user_line()` of the first call (meta's cache miss)


def _plan_call(func, lowering, args, kwargs):
    """(plan, inputs, scalars) of a call, its template encoded and its avals from meta."""
    template, inputs, scalars, device, sig = _encode_call(
        func, args, kwargs, _scalar_flags(func, lowering))
    structure, avals, origin = meta_outputs(func, args, kwargs, sig)
    return _Plan(lowering, template, structure, avals, device, origin), inputs, scalars


def _emit(plan, inputs, scalars):
    """The call's outputs: a new node of `plan` on these inputs and scalars."""
    device = plan.device
    if plan.lowering.rng:
        scalars = scalars + (rng.next_seed(device),)
    node = Node(plan.lowering, plan.template, inputs, scalars, plan.present, plan.origin,
                plan.key, plan.type)
    if plan.structure == "t":
        shape, dtype = plan.avals[0]
        return wrap(Value(shape, dtype, device, node, 0, None, plan.signatures[0]))
    index = iter(range(len(plan.present)))
    return plan.structure([None if a is None else
                           wrap(Value(a[0], a[1], device, node, next(index), None, sig))
                           for a, sig in zip(plan.avals, plan.signatures)])


def trace(func, lowering, args, kwargs):
    """The outputs of a call of `func` traced with `lowering` (engine ops that trace their
    op come here): through the plan cache where the arguments have a key."""
    if not lowering.dynamic_shape:
        dynamic, names = _scalar_flags(func, lowering)
        out = _trace_cached(func, lowering, dynamic, names, args, kwargs)
        if out is not None:
            return out
    return _trace_uncached(func, lowering, args, kwargs)


def _trace_uncached(func, lowering, args, kwargs):
    bounded = dynamic_ops.has_bounded(args, kwargs)
    if lowering.dynamic_shape:
        if bounded:  # nonzero of a bounded tensor: of its real part
            args, kwargs = dynamic_ops.static_args(args, kwargs)
        template, inputs, scalars, device, _ = _encode_call(
            func, args, kwargs, _scalar_flags(func, lowering))
        source = dynamic_ops.bounded_source(func)
        if source is not None:
            return dynamic_ops.source_outputs(source, template, inputs, device)
        return _run_eagerly(lowering, template, inputs, scalars, device)
    if bounded:
        return _trace_bounded(func, lowering, args, kwargs)
    return _emit(*_plan_call(func, lowering, args, kwargs))


def _trace_bounded(func, lowering, args, kwargs):
    """A call with bounded dynamic tensors or sizes (`dynamic_ops`): one node of padded
    values whose outputs keep their sizes symbolic, or, for an op that cannot run padded,
    the op on the real sizes."""
    plan = None
    if not dynamic_ops.runs_static(func):
        try:
            plan = dynamic_ops.plan(func, args, kwargs)
        except NotImplementedError:
            plan = None
    if plan is None or dynamic_ops.runs_static(func, plan):
        return dispatch(func, *dynamic_ops.static_args(args, kwargs))
    flags = _scalar_flags(func, lowering)
    cargs, ckwargs = dynamic_ops.concrete_args(args, kwargs, flags)
    lowering, ckwargs = dynamic_ops.masked(func, lowering, args, kwargs, plan, ckwargs)
    template, inputs, scalars, device, _ = _encode_call(func, cargs, ckwargs, flags)
    if lowering.rng:
        scalars = scalars + (rng.next_seed(device),)
    present = tuple(a for a in plan.avals if a is not None)
    node = Node(lowering, template, inputs, scalars, present, plan.origin)
    values = dynamic_ops.output_values(plan, node, device)
    if plan.structure == "t":
        return wrap(values[0])
    return plan.structure([None if v is None else wrap(v) for v in values])


# Plans of calls whose arguments are XLA tensors, numbers, and lists of them, dtypes, devices,
# strings and None (nearly every call): keyed by the op and each argument's (shape, dtype,
# device), number type (a program parameter) or static value.
_plans = GenerationCache("TracePlan", "XLA_IR_SHAPE_CACHE_SIZE", 12288)
_recent_plan = _plans.recent.get
_STATIC = frozenset({type(None), str, torch.dtype, torch.device, torch.memory_format, torch.layout})


class _Uncached(Exception):
    """An argument `_trace_cached` does not key (the call takes `trace`'s way)."""


def _arg_key(a, dyn, inputs, scalars):
    """The plan key of argument `a` (`dyn`: a number there is a program parameter): what of
    it `_encode_call`'s template depends on. Its tensors and parameters are appended to
    `inputs` and `scalars` as the encoder appends them (`ir.ArgumentEncoder.encode`: in
    order, items of lists and tuples in place), so a cached plan's template fits them."""
    t = type(a)
    if t is XLATensor:
        v = a._value
        inputs.append(v)
        return v.key
    if t is float or t is int or t is bool:
        if dyn:
            scalars.append(a)
            return t
        if t is float and not (a == a and a != 0.0):
            raise _Uncached  # -0.0 and 0.0 (and NaNs) are equal keys of different constants
        return (t, a)
    if t is list or t is tuple:
        return (list, *[_arg_key(o, dyn, inputs, scalars) for o in a])
    if t in _STATIC:
        return a
    raise _Uncached


def _scalar_flags(func, lowering):
    """Which arguments of `func` traced with `lowering` are program parameters: (per
    position, keyword names), `_trace_cached`'s `dynamic` and `names`."""
    flags, names = scalar_arguments(func, lowering.parameters)
    return ((False,) * len(flags), frozenset()) if lowering.static_scalars else (flags, names)


def _trace_cached(func, lowering, dynamic, names, args, kwargs, launch=False):
    """`trace` through the plan cache (`dynamic`: per position, whether a number there is a
    program parameter; `names`: the same for keywords); None where an argument has no key.
    `launch`: an op-by-op eager op, run at once by its cached program where it has one."""
    key, inputs, scalars = [id(func)], [], []
    try:
        i = 0
        for a in args:  # the common cases, tensors and parameters, inline
            t = type(a)
            if t is XLATensor:
                v = a._value
                inputs.append(v)
                key.append(v.key)
            elif (t is float or t is int) and dynamic[i]:
                scalars.append(a)
                key.append(t)
            else:
                key.append(_arg_key(a, dynamic[i], inputs, scalars))
            i += 1
        if kwargs:
            for k, a in kwargs.items():  # (never a positional's key)
                t = type(a)
                if (t is float or t is int) and k in names:
                    scalars.append(a)
                    key.append((k, t))
                else:
                    key.append((k, _arg_key(a, k in names, inputs, scalars)))
    except _Uncached:
        return None
    key = tuple(key)
    plan = _recent_plan(key) or _plans.get(key)
    if plan is None:
        plan, inputs, scalars = _plan_call(func, lowering, args, kwargs)
        _plans.put(key, plan)
        return _emit(plan, inputs, scalars)
    if launch and not ir.IR_DEBUG[0] and ir.node_observer is None:  # (both see every node)
        out = _relaunched(plan, inputs, scalars)
        if out is not None:
            return out
    single = plan.single
    if single is not None:  # `_emit`, inline
        node = Node(plan.lowering, plan.template, tuple(inputs), tuple(scalars), plan.present,
                    plan.origin, plan.key, plan.type)
        return wrap(Value(single[0], single[1], plan.device, node, 0, None, single[2]))
    return _emit(plan, tuple(inputs), tuple(scalars))


def _relaunched(plan, inputs, scalars):
    """The call's outputs computed at once by the program its op ran as before
    (`eager.relaunch`), as values holding their buffers; None where it takes the node's way."""
    device = plan.device
    outputs = eager.relaunch(plan.lowering, plan.type, inputs, tuple(scalars), device)
    if outputs is None:
        return None
    if plan.structure == "t":
        shape, dtype = plan.avals[0]
        return wrap(Value(shape, dtype, device, None, 0, outputs[0], plan.signatures[0]))
    buffers = iter(outputs)
    return plan.structure([None if a is None else
                           wrap(Value(a[0], a[1], device, None, 0, next(buffers), sig))
                           for a, sig in zip(plan.avals, plan.signatures)])


def _run_eagerly(lowering, template, inputs, scalars, device):
    """Ops whose output shape depends on values (nonzero, masked_select, unique...): the
    inputs are materialised and the lowering runs on them at once."""
    materialize(inputs)
    counters.count("DynamicShapeOp")
    args, kwargs = fill_template(template, [v.data for v in inputs], scalars)
    with jax.default_device(pjrt.jax_device(device)):
        out = lowering.fn(*args, **dict(kwargs))
    single = not isinstance(out, (tuple, list))
    outs = [wrap(Value(tuple(o.shape), pjrt.to_torch_dtype(o.dtype), device, data=o))
            for o in ((out,) if single else out)]
    return outs[0] if single else tuple(outs)


# ---- the entry ---------------------------------------------------------------------------

_ENGINE_OPS = {}  # op -> handler
# id(op) -> (engine op, lowering, (`dynamic`, `names`) of `_trace_cached` or None where it
# does not apply)
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


def _route(func):
    engine, lowering = _ENGINE_OPS.get(func), lookup(func)
    cached = None
    if engine is None and lowering is not None and not lowering.dynamic_shape:
        cached = _scalar_flags(func, lowering)
    route = (engine, lowering, cached, counters.op_counter("xla::" + func._schema.name.split("::")[-1]))
    _routes.put(id(func), route)
    return route


_eager_on, _op_by_op = eager.ON, eager.OP_BY_OP
_tracing = counters.op_metric("LazyTracing")
_clock = time.perf_counter_ns


def dispatch(func, args, kwargs):
    """Each op counts as `xla::NAME` (its ATen name, as torch_xla counts the ops its device
    runs), and the time it takes is sampled as `LazyTracing` (as torch_xla's, an op's time
    includes the ops it is made of)."""
    if _eager_on[0] and eager.outermost():
        return eager.call(_eager_op if _op_by_op[0] else dispatch, func, args, kwargs)
    start = _clock()
    out = _trace_op(func, args, kwargs)
    _tracing((start, _clock() - start))  # (an op that raises is not sampled)
    return out


def _eager_op(func, args, kwargs):
    """`dispatch` of an op the user calls in op-by-op eager mode: an op seen before, on
    computed inputs, runs at once by its program, without a node (`_relaunched`)."""
    start = _clock()
    out = _trace_op(func, args, kwargs, True)
    _tracing((start, _clock() - start))
    return out


def _trace_op(func, args, kwargs, launch=False):
    engine, lowering, cached, counter = _recent_route(id(func)) or _routes.get(id(func)) or _route(func)
    next(counter)
    if cached is not None:
        out = _trace_cached(func, lowering, cached[0], cached[1], args, kwargs, launch)
        if out is not None:
            return out
    if engine is not None:
        return engine(*args, **kwargs)
    if lowering is not None:  # (arguments `_trace_cached` does not key)
        return _trace_uncached(func, lowering, args, kwargs)
    if func._schema.is_mutable:
        return _mutating(func, args, kwargs)
    decomp = decomposition_table.get(func)
    if decomp is not None:
        return _decomposed(decomp, func, args, kwargs)
    out = func.decompose(*args, **kwargs)
    if out is not NotImplemented:
        return out
    if has_own_kernel(func):
        return run_own_kernel(func, args, kwargs)
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
