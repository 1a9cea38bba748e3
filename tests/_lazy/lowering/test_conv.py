"""Convolutions 1d-3d, plain and transposed, and the gradients autograd asks
`convolution_backward` for, against the CPU with no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import assert_lowered, assert_same, check_lowered

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

TOL = dict(atol=1e-4, rtol=1e-4)


def check_conv(fn, x, w, b, **kw):
    """fn(x, w, b, **kw) and its gradients, against the CPU."""
    check_lowered(lambda x, w, b: fn(x, w, b, **kw), x, w, b, grads=True, **TOL)


def randn(*shape, grad=True):
    return torch.randn(shape).requires_grad_(grad)


@pytest.mark.parametrize("fn,x,w,kw", [
    (F.conv1d, (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    (F.conv2d, (2, 3, 7, 6), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    (F.conv2d, (1, 4, 5, 5), (4, 1, 3, 3), dict(padding="same", groups=4)),
    (F.conv3d, (1, 2, 4, 5, 4), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=1)),
])
@pytest.mark.parametrize("bias", [True, False])
def test_conv(fn, x, w, kw, bias):
    check_conv(fn, randn(*x), randn(*w), randn(w[0]) if bias else None, **kw)


@pytest.mark.parametrize("fn,x,w,kw", [
    (F.conv_transpose1d, (2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (F.conv_transpose2d, (2, 4, 5, 4), (4, 3, 3, 2),
     dict(stride=(2, 3), padding=1, output_padding=(1, 2), dilation=(1, 2), groups=2)),
    (F.conv_transpose3d, (1, 2, 3, 4, 3), (2, 2, 2, 3, 2), dict(stride=2, output_padding=(1, 0, 1))),
])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose(fn, x, w, kw, bias):
    out_channels = w[1] * kw.get("groups", 1)
    check_conv(fn, randn(*x), randn(*w), randn(out_channels) if bias else None, **kw)


def test_backward_output_mask():
    """Only the gradients autograd needs are computed: input without weight and weight
    without input."""
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    check_conv(F.conv2d, x.requires_grad_(), w, None, padding=1)
    check_conv(F.conv2d, x.detach(), w.requires_grad_(), None, stride=2)


def test_unbatched_and_module():
    conv = torch.nn.Conv2d(3, 5, 3, padding=1)
    x = torch.randn(3, 6, 6)
    expected = conv(x)
    met.clear_counters()
    actual = conv.to(xm.xla_device())(x.to(xm.xla_device()))
    assert_same(actual, expected, **TOL)
    assert_lowered()


def test_bfloat16():
    x, w = torch.randn(2, 3, 6, 6).to(torch.bfloat16), torch.randn(4, 3, 3, 3).to(torch.bfloat16)
    check_lowered(lambda x, w: F.conv2d(x, w), x, w, atol=5e-2, rtol=5e-2)
