"""What an op's schema tells a lowering: which of its arguments arrive as values."""
import torch

from ..caches import GenerationCache


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
