"""PyTorch's checks and messages for ops whose meta kernels check less: a factorization's
error (deferred to the step's program), and random ops' arguments (their CPU kernel run on a
stand-in, once per signature)."""
import torch

from ...base import user_code
from .. import value_checks
from ...step.deferred_checks import defer_check
from ..dispatch import engine_op, trace
from ...lowering import REGISTRY

aten = torch.ops.aten


@engine_op(aten._linalg_check_errors.default)
def _linalg_check_errors(info, api_name, is_matrix):
    """PyTorch's error for a failed factorization (`info` != 0). PyTorch checks at the op;
    here the check waits for the program that computes `info` (the end of the step, or a
    host read before it), so it costs no device run of its own. The error is PyTorch's
    own, from its check on the CPU copy, naming the user's line that called the op (or,
    for a backward pass's op, the line that called backward)."""
    origin = user_code.user_line()

    def check(cpu_info):
        try:
            aten._linalg_check_errors(torch.from_numpy(cpu_info), api_name, is_matrix=is_matrix)
        except RuntimeError as e:
            raise value_checks.deferred_error(e, api_name, origin) from None
    defer_check(info._value, check, (info._value,))


_checked = set()  # (op, shape, dtype, static arguments) whose argument checks passed


def _cpu_checks(func, x, shape, *args, **kwargs):
    """PyTorch's argument checks (and messages) for a random op: its CPU kernel run on a
    stand-in of x (ones of `shape`, x's dtype) with a private generator, once per signature,
    so the user's CPU random stream is untouched."""
    key = (func, tuple(shape), x.dtype, args, tuple(sorted(kwargs.items())))
    if key in _checked:
        return
    func(torch.ones((), dtype=x.dtype).expand(shape), *args, generator=torch.Generator(), **kwargs)
    _checked.add(key)


@engine_op(aten.multinomial.default)
def _multinomial(x, num_samples, replacement=False, generator=None):
    """(Its meta kernel checks none of sample counts, categories and dtypes.)"""
    _cpu_checks(aten.multinomial.default, x, x.shape, int(num_samples), replacement)
    return trace(aten.multinomial.default, REGISTRY[aten.multinomial.default],
                 (x, num_samples, replacement), {})


@engine_op(aten.uniform.default)
def _uniform(x, from_=0.0, to=1.0, generator=None, **kwargs):
    """(Its range checks depend on the bounds' values, which are program parameters.)"""
    low = kwargs.get("from", from_)
    _cpu_checks(aten.uniform.default, x, (1,), float(low), float(to))
    return trace(aten.uniform.default, REGISTRY[aten.uniform.default], (x, low, to), {})


@engine_op(getattr(aten.random, "from"), aten.random.to, with_op=True)
def _random(func, x, *args, generator=None):
    """random_(from, to): the interval is checked against the dtype as on the CPU."""
    _cpu_checks(func, x, (1,), *args)
    return trace(func, REGISTRY[func], (x, *args), {})
