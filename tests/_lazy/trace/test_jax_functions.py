"""Jax functions with autograd: their residuals are saved as PyTorch saves tensors."""
import pytest
import torch

from tests.compare import assert_same
from torch_xla.experimental.assume_pure import assume_pure


def _saved_during(fn):
    saved = []

    def pack(t):
        saved.append(t)
        return len(saved) - 1
    with torch.autograd.graph.saved_tensors_hooks(pack, saved.__getitem__):
        fn()
    return saved


def test_residuals_that_are_inputs_are_the_input_tensors(dev):
    """A matmul's pullback needs its operands: the inputs themselves are saved (through
    saved_tensors_hooks), not copies the forward program would write."""
    x = torch.randn(3, 4, device=dev, requires_grad=True)
    w = torch.randn(4, 2, device=dev, requires_grad=True)
    matmul = assume_pure(lambda x, w: x @ w)
    saved = _saved_during(lambda: matmul(x, w).sum().backward())
    assert {id(t) for t in saved} == {id(x), id(w)}
    assert_same(x.grad, torch.ones(3, 2) @ w.detach().cpu().T)
    assert_same(w.grad, x.detach().cpu().T @ torch.ones(3, 2))


def test_residuals_are_freed_after_the_backward(dev):
    x = torch.randn(3, device=dev, requires_grad=True)
    y = assume_pure(torch.sin)(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_same(x.grad, 2 * torch.cos(x.detach().cpu()))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
