"""torch_xla.core.xla_op_registry: PyTorch ops defined by an XLA lowering function.

The lowering is written with XLA's Python op builder (`xla_builder.Op`), whose ops here
are jax values: the function is traced by jax into the lazy graph where the op is called,
one specialisation per input shapes and keyword values (`xla_builder.call_jax`).
"""
from . import xla_builder as xb


class Op:
    """Creates a PyTorch operation with an XLA lowering function.

    Args:
      name (str): The name of the operation.
      opfn (callable): The function implementing the XLA lowering: it takes one
        `xla_builder.Op` per tensor argument, and the keyword arguments.
    """

    def __init__(self, name, opfn):
        self._name = name
        self._opfn = opfn
        self._lowered = xb.lowering_function(name, opfn)

    def __call__(self, *args, **kwargs):
        """Runs the operation on XLA tensors `args`; `kwargs` are Python values passed
        to the lowering function. Returns a tensor, or a list of them where the lowering
        returns a tuple of more than one."""
        result = xb.call_jax(self._lowered, args, kwargs)
        if not isinstance(result, (tuple, list)):
            return result
        return result[0] if len(result) == 1 else list(result)


def register(name, opfn) -> Op:
    """Registers a PyTorch operation `name` with the XLA lowering function `opfn`
    (register it once, globally, to reuse its lowerings)."""
    return Op(name, opfn)
