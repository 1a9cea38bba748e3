"""Max/average/adaptive pooling, upsampling: values, PyTorch's max indices, and the
gradients of autograd's backward ops, against the CPU with no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import check_lowered


def check_grad(fn, *shape, x=None):
    """fn (values, and indices where it returns them) and its gradient, on x or a random
    input of the shape, against the CPU."""
    x = torch.randn(shape) if x is None else x
    check_lowered(fn, x.requires_grad_(), grads=True, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (2, 3, 7, 7)),
    (lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 1), (2, 1), ceil_mode=True, return_indices=True),
     (2, 3, 8, 7)),
    (lambda x: F.max_pool2d(x, 2), (3, 6, 5)),
    (lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True), (2, 3, 9)),
    (lambda x: F.max_pool3d(x, 2, 2, 1, ceil_mode=True, return_indices=True), (1, 2, 5, 6, 5)),
])
def test_max_pool(fn, shape):
    check_grad(fn, *shape)


def test_max_pool_ties_nan_and_ints():
    """Ties pick the first position, a nan wins, -inf windows point at their first element."""
    x = torch.tensor([[[[1.0, 1.0, 0.0], [1.0, float("nan"), 2.0], [-float("inf")] * 3]]])
    check_grad(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), x=x)
    check_grad(lambda x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True, return_indices=True),
               x=torch.full((1, 1, 3, 3), -float("inf")))
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
    check_grad(fn, *shape)


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
    check_grad(fn, *shape)


@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("bilinear", True), ("bilinear", False),
                                        ("bicubic", True), ("bicubic", False)])
@pytest.mark.parametrize("size", [dict(size=(7, 13)), dict(scale_factor=(1.7, 0.6))])
def test_upsample_2d(mode, align, size):
    check_grad(lambda x: F.interpolate(x, mode=mode, align_corners=align, **size), 2, 3, 5, 6)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"), (2, 3, 5)),
    (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (2, 3, 5)),
    (lambda x: F.interpolate(x, scale_factor=1.5, mode="trilinear", align_corners=True), (1, 2, 5, 4, 3)),
    (lambda x: F.interpolate(x, size=(4, 5, 2), mode="nearest"), (1, 2, 5, 4, 3)),
])
def test_upsample_1d_3d(fn, shape):
    check_grad(fn, *shape)


def test_upsample_nearest_uint8():
    x = torch.randint(0, 255, (1, 3, 4, 5), dtype=torch.uint8)
    check_lowered(lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"), x)
