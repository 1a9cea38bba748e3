"""Lowerings of torch_xla/_lazy/lowering/training_ops.py against the CPU."""
import pytest
import torch

from tests.conftest import assert_same, check_lowered

T = torch.ops.aten._trilinear

CASES = [  # shapes, expand1, expand2, expand3, sumdim (nn.Bilinear's form first)
    (((2, 3), (2, 4), (5, 3, 4)), [1, 3], [1, 2], [0], [2, 3]),
    (((2, 3), (3,), (3,)), [], [0], [0], [1]),
    (((2, 3), (2, 3), (2, 3)), [], [], [], []),
    (((1, 3), (1, 3), (1, 3)), [2], [2], [2], [1]),  # a kept dimension no input has: size 0
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shapes,e1,e2,e3,sumdim", CASES)
def test_trilinear(dev, shapes, e1, e2, e3, sumdim, dtype):
    args = [torch.randn(*s, dtype=dtype) for s in shapes]
    check_lowered(lambda a, b, c: T(a, b, c, e1, e2, e3, sumdim), *args)


def test_bilinear_backward(dev):
    check_lowered(torch.nn.functional.bilinear, torch.randn(4, 3, requires_grad=True),
                  torch.randn(4, 2, requires_grad=True), torch.randn(5, 3, 2, requires_grad=True),
                  torch.randn(5, requires_grad=True), grads=True)


def test_rrelu_with_noise_eval(dev):
    check_lowered(lambda x, noise: torch.ops.aten.rrelu_with_noise_functional(x, noise, 0.1, 0.4, False),
                  torch.randn(5, 4), torch.rand(5, 4))


def test_rrelu_with_noise_training(dev):
    x = torch.randn(300, dtype=torch.float64)
    out, noise = torch.ops.aten.rrelu_with_noise_functional(x.to(dev), torch.zeros(300).double().to(dev),
                                                            0.2, 0.3, True)
    assert out.dtype == noise.dtype == torch.float64
    noise = noise.cpu()
    neg = x <= 0
    assert ((noise[neg] >= 0.2) & (noise[neg] <= 0.3)).all() and (noise[~neg] == 1).all()
    assert_same(out, x * noise)
