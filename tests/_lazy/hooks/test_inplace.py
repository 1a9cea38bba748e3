"""The fast functionalization of hot in-place ops: same results and errors as PyTorch's."""
import pytest
import torch

import torch_xla.core.xla_model as xm

from tests.conftest import assert_same, to_xla

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
    assert_same(xd, x)
    assert_same(view_d, view)


def test_autograd_through_hot_inplace_ops(dev):
    w = torch.randn(5, requires_grad=True)
    wd = w.detach().to(dev).requires_grad_()
    for t, ones in ((w, torch.ones(5)), (wd, torch.ones(5, device=dev))):
        y = t * 2
        y.addcmul_(t, t, value=0.5).mul_(3.0)
        y.sum().backward()
    assert_same(wd.grad, w.grad)


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


def _traced_ops(monkeypatch):
    """The ops the engine traces from now on (each lowered op, by name)."""
    from torch_xla._lazy.trace import dispatch
    traced, original = [], dispatch._trace_cached

    def record(func, *args):
        traced.append(str(func))
        return original(func, *args)
    monkeypatch.setattr(dispatch, "_trace_cached", record)
    return traced


def test_views_of_an_updated_parameter_are_not_rebuilt(dev, monkeypatch):
    """After an optimizer-style update of a tensor nothing else aliases, a view of it is up
    to date when taken: its first use does not replay the view from the storage's base."""
    p = torch.nn.Parameter(torch.randn(4, 3).to(dev))
    x = torch.randn(2, 3).to(dev)
    with torch.no_grad():
        p.mul_(0.5).add_(1.0)
    traced = _traced_ops(monkeypatch)
    y = x @ p.t()
    assert traced == ["aten.t_copy.default", "aten.mm.default"]
    assert_same(y, x.cpu() @ p.detach().cpu().t())


def test_aliases_of_an_updated_tensor_see_the_update(dev):
    """A tensor sharing its storage (its base, a view, `.data`) keeps PyTorch's aliasing."""
    def run(d):
        w = torch.arange(6.0).reshape(2, 3).to(d)
        p = torch.nn.Parameter(w)
        v = p.view(-1)
        data = p.data
        with torch.no_grad():
            p.mul_(2.0)
            v.add_(1.0)
            data.sub_(0.5)
            p.add_(p)
        return w, p.detach(), v.detach(), data
    for got, expected in zip(run(dev), run("cpu")):
        assert_same(got, expected)


def test_dispatch_modes_see_the_functional_op(dev):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func)
            return func(*args, **(kwargs or {}))
    x = torch.ones(3).to(dev)
    with Log():
        x.mul_(2.0)
    assert Log.ops == [torch.ops.aten.mul.Tensor]
    assert_same(x, torch.full((3,), 2.0))


def test_a_result_of_a_wider_dtype_is_cast_to_self(dev):
    def run(d):
        h = torch.full((3,), 1.5, dtype=torch.float16).to(d)
        h.add_(torch.tensor([0.25, 0.5, 1.0]).to(d), alpha=2.0).mul_(torch.tensor(3.0))
        return h
    got, expected = run(dev), run("cpu")
    assert got.dtype == torch.float16
    assert_same(got, expected)


@pytest.mark.parametrize("make", [
    lambda d: torch.zeros(4, 3, device=d),
    lambda d: torch.ones(4, 3, device=d),
    lambda d: torch.full((4, 3), 2.5, device=d),
])
def test_views_of_a_new_tensor_are_not_rebuilt(dev, monkeypatch, make):
    """Factories fill their new tensor in place (`zero_`, `fill_`): a view of it is up to
    date when taken."""
    x = make(dev)
    traced = _traced_ops(monkeypatch)
    y = x.t() * 2
    assert traced == ["aten.t_copy.default", "aten.mul.Tensor"]
    assert_same(y, make("cpu").t() * 2)
    x.zero_()[1:].fill_(7.0)
    expected = make("cpu")
    expected.zero_()[1:].fill_(7.0)
    assert_same(x, expected)


@pytest.mark.parametrize("make", [
    lambda d: torch.rand(4, 3, device=d),
    lambda d: torch.randn(4, 3, device=d),
    lambda d: torch.randint(0, 9, (4, 3), device=d),
    lambda d: torch.randperm(12, device=d).reshape(4, 3),
    lambda d: torch.empty(4, 3, device=d).uniform_(-1, 1),
    lambda d: torch.empty(4, 3, device=d).normal_(),
    lambda d: torch.empty(4, 3, dtype=torch.int16, device=d).random_(),
    lambda d: torch.empty(4, 3, device=d).random_(2, 9),
    lambda d: torch.empty(4, 3, device=d).exponential_(),
])
def test_views_of_a_new_random_tensor_are_not_rebuilt(dev, monkeypatch, make):
    """Random factories are traced whole and random in-place fills of a new tensor make it
    fresh: a view of it, taken after a sync, is the synced data (not rebuilt from its base at
    its first use, which made every later graph differ)."""
    torch.manual_seed(0)
    x = make(dev)
    view = x[1:]
    xm.mark_step()
    traced = _traced_ops(monkeypatch)
    y = view * 2
    assert traced == ["aten.mul.Tensor"]
    assert_same(y, x.cpu()[1:] * 2)


def test_random_fills_through_views_reach_the_base(dev):
    base = torch.zeros(6, device=dev)
    base[::2].uniform_(1, 2)
    values = base.cpu()
    assert (values[1::2] == 0).all() and (values[::2] >= 1).all() and (values[::2] < 2).all()
    x = torch.empty(4, device=dev).uniform_()
    alias = x.view(2, 2)
    x.normal_()
    assert_same(alias, x.cpu().view(2, 2))
