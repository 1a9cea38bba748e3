"""Upsampling (nearest, linear, cubic, anti-aliased bilinear) and grid sampling: values and
the gradients of autograd's backward ops, against the CPU with no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

from tests._lazy.lowering._helpers import seeded_randn
from tests.conftest import check_lowered

TOL = dict(atol=1e-5, rtol=1e-5)


# ---- upsampling ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode,align", [("nearest", None), ("nearest-exact", None),
                                        ("bilinear", True), ("bilinear", False),
                                        ("bicubic", True), ("bicubic", False)])
@pytest.mark.parametrize("size", [dict(size=(7, 13)), dict(scale_factor=(1.7, 0.6))])
def test_upsample_2d(mode, align, size):
    check_lowered(lambda x: F.interpolate(x, mode=mode, align_corners=align, **size),
                  torch.randn(2, 3, 5, 6, requires_grad=True), grads=True, **TOL)


@pytest.mark.parametrize("fn,shape", [
    (lambda x: F.interpolate(x, scale_factor=2.5, mode="linear"), (2, 3, 5)),
    (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), (2, 3, 5)),
    (lambda x: F.interpolate(x, scale_factor=1.5, mode="trilinear", align_corners=True), (1, 2, 5, 4, 3)),
    (lambda x: F.interpolate(x, size=(4, 5, 2), mode="nearest"), (1, 2, 5, 4, 3)),
])
def test_upsample_1d_3d(fn, shape):
    check_lowered(fn, torch.randn(shape, requires_grad=True), grads=True, **TOL)


def test_upsample_nearest_uint8():
    x = torch.randint(0, 255, (1, 3, 4, 5), dtype=torch.uint8)
    check_lowered(lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"), x)


@pytest.mark.parametrize("mode,kwargs", [("bilinear", {}), ("bilinear", {"align_corners": True}),
                                         ("bicubic", {}), ("bilinear", {"antialias": True})])
@pytest.mark.parametrize("channels", [3, 6])
def test_upsample_uint8_rounds_and_saturates_each_pass(mode, kwargs, channels):
    """uint8 pixels are interpolated in float32 and rounded and saturated after each
    separable pass, as PyTorch's CPU kernels do; those kernels use int16 fixed-point weights,
    so a pixel may land a unit apart per pass (bicubic overshoot saturates, never wraps)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (2, channels, 20, 24), dtype=torch.uint8, generator=g)
    x[..., ::3, ::2] = torch.tensor([0, 255], dtype=torch.uint8).repeat(12)[:12]  # edges
    for size in [(37, 50), (9, 11)]:
        expected = F.interpolate(x, size=size, mode=mode, **kwargs)
        actual = F.interpolate(x.to("xla:0"), size=size, mode=mode, **kwargs).cpu()
        assert actual.dtype == torch.uint8
        diff = (actual.int() - expected.int()).abs()
        assert diff.max() <= 2 and (diff > 0).float().mean() < 0.1, (diff.max(), (diff > 0).sum())


def test_upsample_bilinear_antialiased():
    def resize(x):
        return [F.interpolate(x, size=s, mode="bilinear", antialias=True, align_corners=ac)
                for s, ac in (((3, 4), False), ((3, 4), True), ((10, 5), False), ((1, 2), True))] + [
            F.interpolate(x, scale_factor=(0.4, 1.7), mode="bilinear", antialias=True)]
    check_lowered(resize, seeded_randn(2, 3, 7, 9), grads=True, rtol=1e-4)


# ---- grid sampling ------------------------------------------------------------------------

PADDINGS = [(p, ac) for p in ("zeros", "border", "reflection") for ac in (False, True)]


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d(mode):
    x = seeded_randn(2, 3, 5, 6)
    grid = (torch.rand(2, 4, 3, 2) * 2.4 - 1.2).requires_grad_()  # some points outside

    def sample(x, grid):
        return [F.grid_sample(x, grid, mode=mode, padding_mode=p, align_corners=ac) for p, ac in PADDINGS]
    check_lowered(sample, x, grid, grads=True, rtol=1e-4, atol=1e-4)


def test_grid_sample_3d():
    x = seeded_randn(1, 2, 3, 4, 5)
    grid = (torch.rand(1, 2, 3, 2, 3) * 2.4 - 1.2).requires_grad_()

    def sample(x, grid):
        return [F.grid_sample(x, grid, mode="bilinear", padding_mode=p, align_corners=ac) for p, ac in PADDINGS] + [
            F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=False)]
    check_lowered(sample, x, grid, grads=True, rtol=1e-4, atol=1e-4)


def test_grid_sample_grad_of_grid_only():
    """The input needs no gradient: the backward leaves its gradient out."""
    grid = (torch.rand(1, 3, 3, 2) * 2 - 1).requires_grad_()
    check_lowered(lambda x, g: F.grid_sample(x, g, align_corners=False),
                  seeded_randn(1, 2, 4, 4, grad=False), grid, grads=True, rtol=1e-4, atol=1e-5)
