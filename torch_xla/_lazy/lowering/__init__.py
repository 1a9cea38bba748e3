"""Lowerings: one small function per ATen overload, mapping jax values to jax values.

A lowering receives its op's arguments as PyTorch passed them, with every tensor replaced
by a jax array (a tracer while a program is compiled) and every `Scalar`-typed Python
number replaced by a weakly typed 0-d jax value (a parameter of the program, so a changing
learning rate never recompiles). It returns a jax array, or a tuple for ops with several
outputs. Output shapes and dtypes are PyTorch's (from its meta kernels); the engine casts
each output to the expected dtype and checks its shape.

Modules in this package each cover one family of ops and register with `@lower(...)`;
`call_lowering` is how a compiled program replays a recorded node.
"""
import importlib

import jax
import torch

from .. import runtime
from ..caches import GenerationCache
from ..ir import fill_template
from ._types import cast, is_weak

aten = torch.ops.aten
REGISTRY = {}


class Lowering:
    __slots__ = ("name", "fn", "static_scalars", "rng", "dynamic_shape", "collective")

    def __init__(self, name, fn, static_scalars, rng, dynamic_shape, collective=False):
        self.name = name
        self.fn = fn
        self.static_scalars = static_scalars  # Scalar arguments are constants, not parameters
        self.rng = rng                        # fn takes `key=`, a jax PRNG key
        self.dynamic_shape = dynamic_shape    # output shape depends on values: run eagerly
        self.collective = collective          # runs over the replicas' mesh axis (SPMD program)

    def __repr__(self):
        return f"Lowering({self.name})"


def overloads(op):
    """The functional overloads `op` stands for: itself if an overload, else its packet's
    overloads less the in-place and `out=` forms."""
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    out = []
    for name in op.overloads():
        overload = getattr(op, name)
        schema = overload._schema
        if name == "out" or name.endswith("_out") or schema.is_mutable:
            continue
        out.append(overload)
    return out


def overload_named(name):
    """The ATen overload spelt 'packet.overload' ('add_.Tensor'; 'eye' for eye.default)."""
    packet, _, overload = name.partition(".")
    return getattr(getattr(aten, packet), overload or "default")


def lower(*ops, static_scalars=False, rng=False, dynamic_shape=False):
    """Registers the decorated function as the lowering of `ops` (overloads or packets;
    a packet stands for its functional overloads)."""
    def register(fn):
        for op in ops:
            for overload in overloads(op):
                REGISTRY[overload] = Lowering(str(overload), fn, static_scalars, rng, dynamic_shape)
        return fn
    return register


_ON_DEMAND = {}  # schema name -> (fn, options) of ops PyTorch defines only when first used


def lower_on_demand(name, **options):
    """Registers the decorated function as the lowering of op `name` (a schema name, such
    as 'prims::fma') once that op exists: PyTorch defines some (inductor's prims, that
    dynamo's decompositions emit) only when torch.compile first runs."""
    def register(fn):
        _ON_DEMAND[name] = (fn, options)
        return fn
    return register


_STAND_INS = {}  # op -> a function of meta arguments giving its meta outputs


def meta_stand_in(op):
    """Registers the decorated function as the meta kernel of `op` (an overload, or the
    schema name of an op PyTorch defines only when first used), where PyTorch's lacks
    (geqrf, histogram) or skips checks the op's kernel makes: called on the op's meta
    arguments, it returns meta outputs (and raises PyTorch's errors)."""
    def register(fn):
        _STAND_INS[op] = fn
        return fn
    return register


def stand_in(op):
    """The meta kernel registered for `op` by `meta_stand_in`, or None."""
    return _STAND_INS.get(op) or _STAND_INS.get(op._schema.name)


def lookup(op):
    """The lowering of `op`, or None (an on-demand lowering is registered at its first use)."""
    hit = REGISTRY.get(op)
    if hit is None and isinstance(op, torch._ops.OpOverload) and op._schema.name in _ON_DEMAND:
        fn, options = _ON_DEMAND[op._schema.name]
        lower(op, **options)(fn)
        hit = REGISTRY[op]
    return hit


_FAMILIES = ("elementwise", "activations", "reductions", "shape", "factories", "linalg", "nn",
             "conv", "pooling", "resampling", "indexing", "sorting", "random", "foreach",
             "training_ops", "fft", "special", "householder", "histograms",
             "linear_cross_entropy", "ldl")


def load_all() -> None:
    for family in _FAMILIES:
        importlib.import_module(f"{__name__}.{family}")


def _is_scalar_type(t) -> bool:
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    if isinstance(t, torch.ListType):
        t = t.getElementType()
    return isinstance(t, (torch.NumberType, torch.TensorType))


# id(op) -> (positional flags, kwarg names) of Scalar-typed arguments
_scalar_args = GenerationCache("ScalarArguments", "XLA_DISPATCH_CACHE_SIZE", 4096)
_recent_scalar_args = _scalar_args.recent.get


def scalar_arguments(func):
    """Which arguments of `func` a lowering receives as values: Scalar-typed ones, and
    Tensor-typed ones (where a Python number arrives as a wrapped number, as in `x * 0.5`).
    Their Python numbers reach the lowering as weakly typed 0-d jax values (the lazy path
    makes them program parameters). (positional flags, keyword names)."""
    info = _recent_scalar_args(id(func)) or _scalar_args.get(id(func))
    if info is None:
        args = func._schema.arguments
        flags = tuple(_is_scalar_type(a.type) for a in args)
        names = frozenset(a.name for a, f in zip(args, flags) if f)
        info = (flags, names)
        _scalar_args.put(id(func), info)
    return info


def call_lowering(op, template, inputs, scalars, avals):
    """Runs lowering `op` of a recorded node on jax values (tracers while a program is
    compiled): its outputs as a tuple, each cast to PyTorch's dtype and checked against
    PyTorch's shape (`avals`)."""
    args, kwargs = fill_template(template, inputs, scalars)
    kwargs = dict(kwargs)
    if op.rng:
        kwargs["key"] = jax.random.PRNGKey(scalars[-1])
    out = op.fn(*args, **kwargs)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    out = [o for o in out if o is not None]  # outputs the op leaves out (a backward's mask)
    result = []
    for o, (shape, dtype) in zip(out, avals):
        jdtype = runtime.to_jax_dtype(dtype)
        if o.dtype != jdtype or is_weak(o):
            o = cast(o, jdtype)
        if tuple(o.shape) != shape:
            raise RuntimeError(f"internal error: lowering of {op.name} gave shape {tuple(o.shape)}, "
                               f"PyTorch expects {shape}")
        result.append(o)
    return tuple(result)
