"""torch.einsum of XLA tensors is one op (jax's einsum: dot products over the operands as
they are, no reshapes around them), with PyTorch's results, gradients and errors."""
import re

import pytest
import torch

import torch_xla
from tests.compare import assert_same, check, to_xla


@pytest.mark.parametrize("equation, shapes", [
    ("...n,mn->...m", [(4, 3, 2), (5, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(3, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
])
def test_einsum_matches_the_cpu_with_gradients(equation, shapes):
    check(lambda *ts: torch.einsum(equation, *ts),
          *[torch.randn(s, requires_grad=True) for s in shapes], grads=True)


def test_a_linear_einsum_is_one_dot_product_without_reshapes():
    x, w = to_xla([torch.randn(4, 3, 2), torch.randn(5, 2)])
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([torch.einsum("...n,mn->...m", x, w)])
    assert "reshape" not in hlo and hlo.count(" dot(") == 1


def test_inside_an_autograd_function_forward():
    class Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return torch.einsum("...n,mn->...m", a, b)

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return torch.einsum("...m,mn->...n", g, b), torch.einsum("...m,...n->mn", g, a)
    check(lambda a, b: Linear.apply(a, b),
          torch.randn(2, 3, 4, requires_grad=True), torch.randn(6, 4, requires_grad=True),
          grads=True)


def test_pytorch_errors_and_mixed_or_integer_dtypes():
    x, w = to_xla([torch.randn(4, 3, 2), torch.randn(5, 2)])
    with pytest.raises(RuntimeError, match="number of subscripts in the equation"):
        torch.einsum("ij,kj->ik", x, w)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.einsum("ij,jk->ik", torch.randn(2, 3), torch.randn(4, 5))
    with pytest.raises(RuntimeError, match=re.escape(str(cpu_error.value))):
        torch.einsum("ij,jk->ik", *to_xla([torch.randn(2, 3), torch.randn(4, 5)]))
    a, b = torch.arange(6).reshape(2, 3), torch.arange(3)
    assert_same(torch.einsum("ij,j->i", *to_xla([a, b])), torch.einsum("ij,j->i", a, b))


def test_under_autocast_the_products_are_cast_as_on_the_cpu():
    x, w = torch.randn(4, 3, 2), torch.randn(5, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = torch.einsum("...n,mn->...m", x, w)
    with torch.autocast("xla", dtype=torch.bfloat16):
        actual = torch.einsum("...n,mn->...m", *to_xla([x, w]))
    assert actual.dtype == expected.dtype == torch.bfloat16
    assert_same(actual, expected, rtol=1e-2, atol=1e-2)
