"""The fast functionalization of hot in-place ops: same results and errors as PyTorch's."""
import pytest
import torch

from tests.conftest import to_xla

OPS = [
    lambda x, a, b: x.add_(a, alpha=0.5),
    lambda x, a, b: x.sub_(2.0),
    lambda x, a, b: x.mul_(b),
    lambda x, a, b: x.div_(b),
    lambda x, a, b: x.addcdiv_(a, b, value=-0.1),
    lambda x, a, b: x.addcmul_(a, b, value=0.3),
    lambda x, a, b: x.lerp_(a, 0.25),
    lambda x, a, b: x.lerp_(a, b / 10),
    lambda x, a, b: x.abs_().sqrt_(),
    lambda x, a, b: x.clamp_min_(0.1).clamp_max_(0.5),
]


@pytest.mark.parametrize("op", range(len(OPS)))
def test_through_views_and_on_the_base(dev, op):
    torch.manual_seed(op)
    x, a, b = torch.randn(4, 6), torch.randn(4, 6), torch.rand(4, 6) + 0.5
    xd, ad, bd = to_xla([x, a, b])
    OPS[op](x, a, b)
    OPS[op](xd, ad, bd)
    view, view_d = x.t()[1:4], xd.t()[1:4]
    OPS[op](view, a.t()[1:4], b.t()[1:4])
    OPS[op](view_d, ad.t()[1:4], bd.t()[1:4])
    torch.testing.assert_close(xd.cpu(), x)
    torch.testing.assert_close(view_d.cpu(), view)


def test_autograd_through_hot_inplace_ops(dev):
    w = torch.randn(5, requires_grad=True)
    wd = w.detach().to(dev).requires_grad_()
    for t, ones in ((w, torch.ones(5)), (wd, torch.ones(5, device=dev))):
        y = t * 2
        y.addcmul_(t, t, value=0.5).mul_(3.0)
        y.sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), w.grad)


@pytest.mark.parametrize("make", [
    lambda d: torch.ones(2, device=d).add_(torch.ones(3, 2, device=d)),
    lambda d: torch.ones(2, dtype=torch.int64, device=d).mul_(1.5),
    lambda d: torch.ones(2, dtype=torch.int64, device=d).div_(2),
])
def test_errors_are_pytorchs(dev, make):
    with pytest.raises(RuntimeError) as on_cpu:
        make("cpu")
    with pytest.raises(RuntimeError) as on_xla:
        make(dev)
    assert str(on_xla.value) == str(on_cpu.value)


def test_cpu_functionalization_is_unchanged():
    """The kernels sit on PyTorch's Functionalize key, which torch.func.functionalize uses
    for CPU tensors too."""
    def f(x):
        v = x[1:]
        v.addcdiv_(torch.ones(3), torch.full((3,), 2.0))
        v.mul_(2)
        return x
    x = torch.arange(4.0)
    expected = f(x.clone())
    assert torch.equal(torch.func.functionalize(f)(x.clone()), expected)
