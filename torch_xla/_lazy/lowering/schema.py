"""What an op's schema tells a lowering: which of its arguments arrive as values."""
import torch

from ..base.caches import GenerationCache


def _is_scalar_type(t) -> bool:
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    if isinstance(t, torch.ListType):
        t = t.getElementType()
    return isinstance(t, (torch.NumberType, torch.TensorType))


# (id(op), parameters) -> (positional flags, kwarg names) of the arguments that are values
_scalar_args = GenerationCache("ScalarArguments", "XLA_DISPATCH_CACHE_SIZE", 4096)
_recent_scalar_args = _scalar_args.recent.get


def scalar_arguments(func, parameters=()):
    """Which arguments of `func` a lowering receives as values: Scalar-typed ones, Tensor-typed
    ones (where a Python number arrives as a wrapped number, as in `x * 0.5`), and those
    named in `parameters` (a lowering's `int` arguments it takes as values on the lazy path:
    `Lowering.parameters`). Their Python numbers reach the lowering as weakly typed 0-d jax
    values (the lazy path makes them program parameters). (positional flags, keyword names)."""
    key = (id(func), parameters)
    info = _recent_scalar_args(key) or _scalar_args.get(key)
    if info is None:
        args = func._schema.arguments
        flags = tuple(_is_scalar_type(a.type) or a.name in parameters for a in args)
        names = frozenset(a.name for a, f in zip(args, flags) if f)
        info = (flags, names)
        _scalar_args.put(key, info)
    return info
