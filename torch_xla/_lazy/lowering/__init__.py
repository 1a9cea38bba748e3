"""Lowerings: one small function per ATen overload, mapping jax values to jax values.

A lowering receives its op's arguments as PyTorch passed them, with every tensor replaced
by a jax array (a tracer while a program is compiled) and every `Scalar`-typed Python
number replaced by a weakly typed 0-d jax value (a parameter of the program, so a changing
learning rate never recompiles). It returns a jax array, or a tuple for ops with several
outputs. Output shapes and dtypes are PyTorch's (from its meta kernels); the engine casts
each output to the expected dtype and checks its shape.

This package is the registry: modules in it each cover one family of ops and register
with `@lower(...)`; `replay.call_lowering` is how a compiled program replays a recorded
node, `schema` tells which arguments a lowering receives as values, and `meta_stand_ins`
holds the meta kernels written here where PyTorch's lack or check less.
`collectives` (the replicas' collectives) and `sharding_constraint` (SPMD's sharding
constraints) are the lowerings of nodes the trace records itself.

Called by every folder above but graph, runtime and base; lowerings may import only those.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("custom_call", "overloads", "precision", "quantized")

import importlib

import torch

aten = torch.ops.aten
REGISTRY = {}


class Lowering:
    __slots__ = ("name", "fn", "static_scalars", "rng", "dynamic_shape", "collective", "parameters",
                 "f32_scalars")

    def __init__(self, name, fn, static_scalars, rng, dynamic_shape, collective=False,
                 parameters=(), f32_scalars=False):
        self.name = name
        self.fn = fn
        self.static_scalars = static_scalars  # Scalar arguments are constants, not parameters
        # on float32 tensors, the Scalar arguments are used as float32 (converted first, as
        # PyTorch's kernels do): the program may take them as float32 parameters
        self.f32_scalars = f32_scalars
        # names of int arguments that are program parameters on the lazy path (an index a
        # loop changes each step: one program for every value; the engine checks the range)
        self.parameters = parameters
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


def lower(*ops, static_scalars=False, rng=False, dynamic_shape=False, parameters=(),
          f32_scalars=False):
    """Registers the decorated function as the lowering of `ops` (overloads or packets;
    a packet stands for its functional overloads)."""
    def register(fn):
        for op in ops:
            for overload in overloads(op):
                REGISTRY[overload] = Lowering(str(overload), fn, static_scalars, rng, dynamic_shape,
                                              parameters=tuple(parameters), f32_scalars=f32_scalars)
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
             "linear_cross_entropy", "ldl", "quantized")


def load_all() -> None:
    for family in _FAMILIES:
        importlib.import_module(f"{__name__}.{family}")
