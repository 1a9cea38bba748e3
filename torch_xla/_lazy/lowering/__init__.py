"""Lowerings: one small function per ATen overload, mapping jax values to jax values.

A lowering receives its op's arguments as PyTorch passed them, with every tensor replaced
by a jax array (a tracer while a program is compiled) and every `Scalar`-typed Python
number replaced by a weakly typed 0-d jax value (a parameter of the program, so a changing
learning rate never recompiles). It returns a jax array, or a tuple for ops with several
outputs. Output shapes and dtypes are PyTorch's (from its meta kernels); the engine casts
each output to the expected dtype and checks its shape.

Modules in this package each cover one family of ops and register with `@lower(...)`.
"""
import importlib

import torch

aten = torch.ops.aten
REGISTRY = {}


class Lowering:
    __slots__ = ("name", "fn", "static_scalars", "rng", "dynamic_shape")

    def __init__(self, name, fn, static_scalars, rng, dynamic_shape):
        self.name = name
        self.fn = fn
        self.static_scalars = static_scalars  # Scalar arguments are constants, not parameters
        self.rng = rng                        # fn takes `key=`, a jax PRNG key
        self.dynamic_shape = dynamic_shape    # output shape depends on values: run eagerly

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


def lower(*ops, static_scalars=False, rng=False, dynamic_shape=False):
    """Registers the decorated function as the lowering of `ops` (overloads or packets;
    a packet stands for its functional overloads)."""
    def register(fn):
        for op in ops:
            for overload in overloads(op):
                REGISTRY[overload] = Lowering(str(overload), fn, static_scalars, rng, dynamic_shape)
        return fn
    return register


_FAMILIES = ("elementwise", "activations", "reductions", "shape", "factories", "linalg", "nn",
             "conv", "pooling", "resampling", "indexing", "sorting", "random", "foreach",
             "training_ops", "fft", "special")


def load_all() -> None:
    for family in _FAMILIES:
        try:
            importlib.import_module(f"{__name__}.{family}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{family}":
                raise
