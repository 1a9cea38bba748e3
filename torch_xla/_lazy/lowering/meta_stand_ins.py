"""Meta kernels written here for ops whose PyTorch meta kernel is missing (geqrf, histogram)
or skips checks the op's kernel makes; `meta` tries them before PyTorch's."""

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
