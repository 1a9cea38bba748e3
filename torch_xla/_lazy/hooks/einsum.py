"""`torch.einsum` of XLA tensors as one op: jax's einsum, whose contractions are XLA dot
products over the operands as they are, where PyTorch's composite kernel permutes and
reshapes them into batched matrix products (torch_xla lowers einsum whole, too).

The kernel sits on the AutogradXLA key, above functionalization, and calls einsum as a jax
function (`jax_functions.apply`: its gradient is jax's, one more op). PyTorch's composite
kernel checks each new signature on meta tensors, so errors are PyTorch's, and it still
runs where the lowering does not apply: operands of different dtypes or of integer
dtypes, tensors of a dispatch mode (graph capture's fake and functional tensors), autocast
(which casts the matrix products of the decomposition).
"""
import jax.numpy as jnp
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from ..trace import jax_functions
from .kernel_libraries import installs_kernels
from ..lowering._types import opmath
from ..lowering.precision import matmul_precision

_callees = {}  # (equation, operands' (shape, dtype)) -> Callee
_PLAIN = (torch.Tensor, torch.nn.Parameter)  # not a tensor subclass of its own dispatch


def _lowers(tensors) -> bool:
    dtypes = {t.dtype for t in tensors}
    return (len(dtypes) == 1 and jax_functions.differentiable(next(iter(dtypes)))
            and _get_current_dispatch_mode() is None and not torch.is_autocast_enabled("xla")
            and all(type(t) in _PLAIN and t.device.type == "xla" for t in tensors))


def _callee(equation, tensors):
    avals = tuple((tuple(t.shape), t.dtype) for t in tensors)
    key = (equation, avals)
    callee = _callees.get(key)
    if callee is None:
        metas = [torch.empty(s, dtype=d, device="meta") for s, d in avals]
        expected = torch.ops.aten.einsum.default.decompose(equation, metas)  # PyTorch's checks

        def einsum(*operands):
            out = jnp.einsum(equation, *operands, precision=matmul_precision(),
                             preferred_element_type=opmath(operands[0].dtype))
            return (out.astype(operands[0].dtype),)
        callee = jax_functions.Callee(einsum, avals, name="einsum", key=("einsum",) + key)
        if callee.avals != ((tuple(expected.shape), expected.dtype),):
            callee = False  # an equation jax reads otherwise: PyTorch's kernel
        _callees[key] = callee
    return callee


def _einsum(equation, tensors, *, path=None):
    tensors = list(tensors)
    callee = _callee(equation, tensors) if _lowers(tensors) else None
    if not callee:
        return torch.ops.aten.einsum.default.decompose(equation, tensors, path=path)
    return jax_functions.apply(callee, tensors)[0]


@installs_kernels("aten")
def install(lib) -> None:
    lib.impl("einsum", _einsum, "AutogradXLA")
