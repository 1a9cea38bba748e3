"""torch_xla.experimental.fori_loop: `fori_loop` and `while_loop` as one XLA While loop.

Importing this module makes PyTorch's `torch._higher_order_ops.while_loop` run on XLA
tensors as `lax.while_loop` of its traced condition and body (`_lazy/trace/loops`), as
torch_xla registers it: the loop is one op of the graph, not unrolled, and runs on the
device without a host round trip per iteration. There is no gradient through it.
"""
import torch
from torch._C import DispatchKey
from torch._higher_order_ops.while_loop import while_loop_op

from .._lazy.trace import loops
from .._lazy.graph import tensor as _tensor


def fori_loop(lower, upper, body_fun, *input_value):
    """`body_fun` applied `upper - lower` times to `input_value`, as one XLA loop;
    returns (the loop's counter at the end, 0, then the values), as torch_xla does."""
    device = next(t.device for t in (lower, upper, *input_value)
                  if isinstance(t, torch.Tensor))
    count = torch.as_tensor(upper - lower, device=device)

    def cond_fn(i, *values):
        return i > 0

    def body_fn(i, *values):
        out = body_fun(*values)
        return (i - 1, *(out if isinstance(out, (tuple, list)) else (out,)))
    return list(loops.while_loop(cond_fn, body_fn, (count, *input_value)))


@while_loop_op.py_impl(DispatchKey.XLA)
def while_loop(cond_fn, body_fn, carried_inputs, additional_inputs=None):
    """PyTorch's `while_loop` on XLA tensors (see the module's docstring)."""
    return tuple(loops.while_loop(cond_fn, body_fn, carried_inputs, additional_inputs or ()))


# after functionalization unwraps the arguments: the engine's own tensors
while_loop_op.py_impl(_tensor.XLATensor)(while_loop)


def _xla_while_loop_wrapper(cond_fn, body_fn, carried_inputs, additional_inputs=None,
                            fake_tensor=False):
    """torch_xla's entry for scripts that call it: `while_loop`."""
    return while_loop(cond_fn, body_fn, carried_inputs, additional_inputs)
