"""Max/average/adaptive/fractional pooling: values, PyTorch's max indices, and the
gradients of autograd's backward ops, against the CPU with no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

from tests._lazy.lowering._helpers import seeded_randn
from tests.conftest import check_lowered

TOL = dict(atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (2, 3, 7, 7)),
    (lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 1), (2, 1), ceil_mode=True, return_indices=True),
     (2, 3, 8, 7)),
    (lambda x: F.max_pool2d(x, 2), (3, 6, 5)),
    (lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True), (2, 3, 9)),
    (lambda x: F.max_pool3d(x, 2, 2, 1, ceil_mode=True, return_indices=True), (1, 2, 5, 6, 5)),
])
def test_max_pool(fn, shape):
    check_lowered(fn, torch.randn(shape, requires_grad=True), grads=True, **TOL)


def test_max_pool_ties_nan_and_ints():
    """Ties pick the first position, a nan wins, -inf windows point at their first element."""
    x = torch.tensor([[[[1.0, 1.0, 0.0], [1.0, float("nan"), 2.0], [-float("inf")] * 3]]])
    check_lowered(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), x.requires_grad_(), grads=True, **TOL)
    check_lowered(lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True, return_indices=True),
                  torch.full((1, 1, 3, 3), -float("inf"), requires_grad=True), grads=True, **TOL)
    ints = torch.randint(-5, 5, (1, 2, 5, 5))
    check_lowered(lambda x: F.max_pool2d(x, 2, 2, 1, return_indices=True), ints)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 7, 7)),
    (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 7, 6)),
    (lambda x: F.avg_pool2d(x, (3, 2), 2, (1, 0), ceil_mode=True, divisor_override=2), (3, 7, 7)),
    (lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), (2, 3, 8)),
    (lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (1, 2, 5, 6, 7)),
])
def test_avg_pool(fn, shape):
    check_lowered(fn, torch.randn(shape, requires_grad=True), grads=True, **TOL)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), (2, 3, 7, 8)),
    (lambda x: F.adaptive_avg_pool2d(x, 1), (2, 3, 5, 5)),
    (lambda x: F.adaptive_avg_pool1d(x, 3), (2, 3, 7)),
    (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)), (1, 2, 5, 6, 7)),
    (lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), (2, 3, 7, 8)),
    (lambda x: F.adaptive_max_pool1d(x, 3, return_indices=True), (2, 3, 7)),
    (lambda x: F.adaptive_max_pool3d(x, (2, 3, 3), return_indices=True), (1, 2, 5, 6, 7)),
])
def test_adaptive_pool(fn, shape):
    check_lowered(fn, torch.randn(shape, requires_grad=True), grads=True, **TOL)


def test_fractional_max_pool2d():
    samples = torch.rand(2, 3, 2)

    def pool(x, s):
        return [*F.fractional_max_pool2d(x, (3, 2), output_size=(5, 7), return_indices=True, _random_samples=s),
                *F.fractional_max_pool2d(x, 2, output_size=1, return_indices=True, _random_samples=s),
                F.fractional_max_pool2d(x[0], 2, output_size=3, _random_samples=s[:1])]
    check_lowered(pool, seeded_randn(2, 3, 9, 8), samples, grads=True)


def test_fractional_max_pool3d_forward():
    """(Its backward has no meta kernel in PyTorch, so it still runs on the CPU.)"""
    check_lowered(lambda x, s: F.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 2, 3), return_indices=True,
                                                       _random_samples=s),
                  seeded_randn(1, 2, 6, 7, 5, grad=False), torch.rand(1, 2, 3))
