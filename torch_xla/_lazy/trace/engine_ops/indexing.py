"""index and index_put with indices PyTorch lets live on the CPU, and boolean masks made
into indices; out-of-range indices checked at the step's program (`value_checks`). select's
index is a program parameter (its range checked here, at the op), and unbind is a select
per output: one program reads any row of a tensor alone (a loop over its rows compiles
once, not once per row)."""
import torch

from .. import value_checks
from ..dispatch import dispatch, engine_op, trace
from ...lowering import REGISTRY
from ...graph.tensor import XLATensor, wrap
from ...launch.transfers import from_cpu

aten = torch.ops.aten


def _indices(x, indices, masks):
    """index/index_put's indices on x's device (PyTorch lets them live on the CPU), with
    boolean masks turned into the int indices of their True positions when `masks` is
    false (an eager `nonzero`: the result's shape depends on them)."""
    out = []
    dim = 0  # the dim of x the index addresses (a mask addresses as many as it has)
    for i in indices:
        if i is not None and not isinstance(i, XLATensor):
            i = wrap(from_cpu(i, x._value.device))
        is_mask = i is not None and i.dtype in (torch.bool, torch.uint8)
        if is_mask:
            _check_mask_shape(x, i, dim)
        dim += i.dim() if is_mask else 1
        if is_mask and not masks:
            nz = dispatch(aten.nonzero.default, (i,), {})
            out.extend(dispatch(aten.select_copy.int, (nz, 1, d), {}) for d in range(i.dim()))
            continue
        out.append(i)
    return out


def _check_mask_shape(x, mask, dim):
    for k, n in enumerate(mask.shape):
        if dim + k < x.dim() and x.shape[dim + k] != n:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {k} does not match "
                             f"the shape of the indexed tensor {list(x.shape)} at index {dim + k}")


@engine_op(aten.index.Tensor, aten._unsafe_index.Tensor, with_op=True)
def _index(func, x, indices):
    indices = _indices(x, indices, False)
    out = trace(func, REGISTRY[func], (x, indices), {})
    value_checks.check_index(func, x, indices, out)
    return out


@engine_op(aten.index_put.default, aten._unsafe_index_put.default, with_op=True)
def _index_put(func, x, indices, values, accumulate=False):
    # A lone boolean mask is lowered statically (its result has x's shape).
    lone_mask = sum(i is not None for i in indices) == 1 and any(
        i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)
    indices = _indices(x, indices, lone_mask)
    out = trace(func, REGISTRY[func], (x, indices, values, accumulate), {})
    value_checks.check_index(func, x, indices, out)
    return out


@engine_op(aten.select_copy.int, aten.select.int, with_op=True)
def _select(func, x, dim, index):
    """(The index is a program parameter, `Lowering.parameters`: the meta kernel, run once per
    signature, does not see each value, so its range is checked here, with PyTorch's error.)"""
    rank = x.dim()
    if type(index) is int and -rank <= dim < rank and not -x.shape[dim] <= index < x.shape[dim]:
        func(torch.empty(x.shape, dtype=x.dtype, device="meta"), dim, index)  # raises IndexError
    return trace(func, REGISTRY[func], (x, dim, index), {})


@engine_op(aten.unbind_copy.int, aten.unbind.int, with_op=True)
def _unbind(func, x, dim=0):
    """Each output a select of its own (one node of several outputs would make reading output
    k alone a program of its own per k)."""
    rank = x.dim()
    if not -rank <= dim < rank:
        return trace(func, REGISTRY[func], (x, dim), {})  # PyTorch's error, from its meta kernel
    select = aten.select_copy.int
    return [trace(select, REGISTRY[select], (x, dim, i), {}) for i in range(x.shape[dim])]
