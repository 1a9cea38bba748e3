"""Convolutions 1d-3d, plain and transposed, and the gradients autograd asks
`convolution_backward` for, against the CPU with no CPU fallback."""
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import assert_lowered, assert_same, check_lowered, to_xla

import torch_xla
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


@pytest.mark.parametrize("fn,x,w,stride", [
    (F.conv1d, (2, 4, 9), (6, 4, 1), 3),
    (F.conv2d, (2, 5, 7, 6), (8, 5, 1, 1), 1),
    (F.conv2d, (2, 5, 7, 6), (8, 5, 1, 1), (2, 3)),
    (F.conv3d, (1, 3, 4, 5, 6), (2, 3, 1, 1, 1), (1, 2, 3)),
])
def test_pointwise_convolutions_are_products(fn, x, w, stride):
    """1×1 convolutions, strided or not: forward and backward are matrix products (XLA's
    CPU backend runs those several times faster than its convolutions), as the CPU computes."""
    check_conv(fn, randn(*x), randn(*w), randn(w[0]), stride=stride)
    xs = torch.randn(x, device=xm.xla_device(), requires_grad=True)
    ws = torch.randn(w, device=xm.xla_device(), requires_grad=True)
    fn(xs, ws, stride=stride).square().sum().backward()
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([xs.grad, ws.grad])
    assert "convolution(" not in hlo and "dot(" in hlo


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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_convolution_adds_its_bias_before_rounding(dtype):
    """A bias that nearly cancels the convolution: rounding the convolution to the dtype
    first (then adding) would lose most of the result's digits. Compared with the float32
    computation rounded once (PyTorch's CPU float16 transposed convolution is itself less
    accurate than that)."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 5, 5, generator=g).to(dtype) + 4
    w = (torch.rand(4, 3, 3, 3, generator=g) * 0.2 + 0.9).to(dtype)
    bias = -F.conv2d(x.float(), w.float()).mean((0, 2, 3)).to(dtype)
    wt = w.transpose(0, 1).contiguous()

    def run(x, w, b, wt):  # outputs and gradients, the cotangents the same in both dtypes
        outs = [F.conv2d(x, w, b), F.conv_transpose2d(x, wt, b)]
        cts = [torch.arange(o.numel(), device=o.device).reshape(o.shape).cos().to(o.dtype)
               for o in outs]
        return outs + list(torch.autograd.grad(outs, [x, w, b, wt], cts))
    args = [t.requires_grad_() for t in (x, w, bias, wt)]
    expected = [e.to(dtype) for e in run(*[a.detach().float().requires_grad_() for a in args])]
    actual = run(*to_xla(args))
    for a, e in zip(actual, expected):
        assert a.dtype == dtype
        assert_same(a, e, rtol=1e-2, atol=2e-2)
