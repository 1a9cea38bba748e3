"""Views and in-place ops on XLA tensors: functionalization turns them into functional ops,
and writes through a view must still be seen by its base and by every other view."""
import pytest
import torch

from tests.compare import EXACT, assert_same, check_lowered


def writes(fn):
    """Runs fn on a copy of x (fn mutates it) and returns what fn returns."""
    return lambda x: fn(x.clone())


@pytest.mark.parametrize("fn", [
    lambda x: (x.__setitem__((slice(None), 0), 1), x)[1],
    lambda x: (x.view(-1).add_(1), x)[1],
    lambda x: (x.t_(), x, x.shape)[1:],
    lambda x: (x.unsqueeze_(0), x.shape, x.squeeze_(0), x)[1:4:2],
    lambda x: (x.transpose(0, 1).mul_(2), x)[1],
    lambda x: (x[::2, 1::2].zero_(), x)[1],
    lambda x: (x.diagonal().fill_(3), x)[1],
    lambda x: (x.diagonal(1).mul_(-1), x)[1],
    lambda x: (x.t()[1:, :2].fill_(-1), x)[1],
    lambda x: (x.narrow(1, 1, 2).copy_(torch.ones(3, 2)), x)[1],
    lambda x: (x.unfold(1, 2, 2).mul_(0), x)[1],
    lambda x: (x.view(2, 2, 3).permute(2, 0, 1)[0].fill_(9), x)[1],
    lambda x: (x.select(1, -1).neg_(), x)[1],
    lambda x: (x.__setitem__(x > 0, x[x > 0] * 2), x)[1],
    lambda x: (x[1].as_strided((2,), (2,)).zero_(), x)[1],
], ids=range(15))
def test_write_through_a_view_reaches_the_base(fn):
    check_lowered(writes(fn), torch.randn(3, 4))


def _chained(x):
    a = x[1:]           # a view
    b = a[:, 1:]        # a view of a view
    b.mul_(10)
    return x, a, b


def _siblings(x):
    v = x.view(2, 6)
    w = x[0]
    d = x.diagonal()
    v[0, 0] = 100       # seen by x, w and d
    return x, v, w, d


def _base_write_seen_by_views(x):
    d = x.diagonal()
    flat = x.view(-1)
    col = x[:, 2]
    x.add_(1)
    x[0].mul_(2)
    return d, flat, col


def _splits(x):
    first, second = x.split(2, 1)
    second.fill_(0)
    rows = x.unbind(0)
    rows[2].add_(5)
    return x, first, second, rows[0]


def _view_of_transposed_slice(x):
    y = x.unsqueeze(0).transpose(1, 2)[0]
    y[0].sub_(5)
    y[::2, 1] = 0.5
    return x, y


def _augmented_assignment_on_strided_view(x):
    r = x.flatten()[::3]
    r += 7
    return x, r


@pytest.mark.parametrize("fn", [_chained, _siblings, _base_write_seen_by_views, _splits,
                                _view_of_transposed_slice, _augmented_assignment_on_strided_view])
def test_every_view_sees_every_write(fn):
    check_lowered(writes(fn), torch.randn(3, 4))


def test_squeeze_unsqueeze_in_place_on_0d_and_sizes_1():
    def fn(x, s):
        x.squeeze_()
        x.unsqueeze_(1)
        s.unsqueeze_(0)
        s.squeeze_(-1)
        return x, x.shape, s, s.shape
    check_lowered(lambda x, s: fn(x.clone(), s.clone()), torch.randn(1, 3, 1), torch.tensor(2.0))


def _versions(device):
    x = torch.zeros(3, 4, device=device)
    seen = [x._version]
    x.add_(1)
    seen.append(x._version)
    v = x[0]
    v.mul_(2)
    seen += [x._version, v._version]
    x.t_()
    seen.append(x._version)
    x[1] = 3
    seen.append(x._version)
    y = x.detach()
    y.zero_()
    seen += [x._version, y._version]
    return seen


def test_version_counters_bump_like_on_the_cpu(dev):
    assert _versions(dev) == _versions("cpu")


def test_detach_shares_values_and_drops_grad(dev):
    x = torch.ones(3, device=dev, requires_grad=True)
    y = x.detach()
    y[0] = 5
    assert not y.requires_grad and x.requires_grad
    assert_same(x.detach(), torch.tensor([5.0, 1.0, 1.0]), **EXACT)


def test_views_always_look_contiguous(dev):
    """The layout is XLA's business (seed 4.3): every XLA tensor looks contiguous."""
    x = torch.randn(3, 4, device=dev)
    for v in (x, x.t(), x[:, ::2], x.unsqueeze(1).transpose(0, 2), x.expand(2, 3, 4), x.mT[1:]):
        assert v.is_contiguous()
    assert x.t().stride() == (3, 1)


def test_linear_on_a_1d_input_with_backward():
    def fn(w, b, x):
        out = torch.nn.functional.linear(x, w, b)    # views x as a matrix and back
        out.sum().backward()
        return out, w.grad, b.grad

    torch.manual_seed(0)
    check_lowered(fn, torch.randn(2, 4, requires_grad=True), torch.randn(2, requires_grad=True),
                  torch.randn(4))


def test_linear_module_on_a_1d_input(dev):
    """nn.Linear on a 1-D input ends in squeeze_ under autograd (seed 2.3)."""
    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 2)
    xla = torch.nn.Linear(4, 2).to(dev)
    xla.load_state_dict(cpu.state_dict())
    x = torch.randn(4)
    for m, inp in ((cpu, x), (xla, x.to(dev))):
        out = m(inp)
        assert out.shape == (2,)
        out.square().sum().backward()
    assert_same(xla.weight.grad, cpu.weight.grad)
    assert_same(xla.bias.grad, cpu.bias.grad)


def test_autograd_through_views_and_in_place_ops():
    def fn(x):
        y = x * 1
        y[:, 1].mul_(3)
        y.t()[0].add_(y[:, 2])
        z = y.view(-1)
        z[::2].add_(z[1::2] * 2)
        (z ** 2).sum().backward()
        return y, x.grad
    check_lowered(fn, torch.randn(2, 3, requires_grad=True))


def test_in_place_on_a_leaf_view_rebases_its_history():
    def fn(x):
        y = x.clone()
        v = y[0]
        v.mul_(x[1])                  # v's grad_fn becomes an in-place node of y's history
        y.sum().backward()
        return y, x.grad
    check_lowered(fn, torch.randn(2, 3, requires_grad=True))


def test_data_assignment(dev):
    def fn(device):
        w = torch.ones(2, 2, device=device, requires_grad=True)
        w.data = torch.full((3,), 2.0, device=device)
        (w * w).sum().backward()
        return w.shape, w.grad.cpu(), w.requires_grad
    assert repr(fn(dev)) == repr(fn("cpu"))


def test_data_in_place_does_not_track_grad(dev):
    w = torch.ones(3, device=dev, requires_grad=True)
    w.data.mul_(4)
    (w * 2).sum().backward()
    assert_same(w.detach(), torch.full((3,), 4.0), **EXACT)
    assert_same(w.grad, torch.full((3,), 2.0), **EXACT)


def test_requires_grad_():
    def fn(x):
        y = x.clone().requires_grad_()
        assert y.requires_grad and y.is_leaf
        (y.view(-1)[1:] ** 2).sum().backward()
        return y.grad
    check_lowered(fn, torch.randn(2, 2))


def test_in_place_on_a_view_of_a_leaf_that_requires_grad_is_pytorchs_error(dev):
    x = torch.ones(3, device=dev, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x[0].mul_(2)
