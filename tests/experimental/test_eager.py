"""Eager mode: each op runs as it is called, one program per op signature compiled once;
values are there without a sync, errors come from the op; `torch_xla.compile` still makes
one program of its function."""
import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla.experimental import eager_mode, eager_mode_context, is_eager_mode
from tests.compare import assert_same
from tests.fresh_process import python


@pytest.fixture
def eager():
    xm.mark_step()
    with eager_mode_context(True) as before:
        assert before is False and is_eager_mode()
        yield
    assert not is_eager_mode()


def _samples(name):
    data = met.metric_data(name)
    return 0 if data is None else data[0]


def _computed(t):
    return "XLAData: None" not in torch_xla._XLAC._get_xla_tensor_debug_info(t)


def test_the_setting_and_its_context():
    assert not is_eager_mode()
    with eager_mode_context(True):
        assert is_eager_mode() and torch_xla._XLAC._get_use_eager_mode()
        with eager_mode_context(False) as outer:
            assert outer is True and not is_eager_mode()
        assert is_eager_mode()
    assert not is_eager_mode()
    eager_mode(True)
    try:
        assert is_eager_mode()
    finally:
        eager_mode(False)


def test_values_are_computed_at_the_op_and_match_the_cpu(dev, eager):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    x, y = a.to(dev), b.to(dev)
    met.clear_all()
    out = torch.nn.functional.gelu(x @ y).sum(0)
    assert _computed(out)
    assert _samples("EagerOpExecuteTime") == 3 and met.metric_data("ExecuteTime") is None
    x.mul_(2)  # in place, and a view of the result
    v = x.t()
    assert _computed(x) and _computed(v)
    assert_same(out, torch.nn.functional.gelu(a @ b).sum(0))
    assert_same(v, (a * 2).t())
    torch_xla.sync()  # nothing left to run
    assert met.metric_data("ExecuteTime") is None and met.metric_data("CompileTime") is None


def test_a_steady_loop_compiles_each_op_once(dev, eager):
    x = torch.randn(8, device=dev)
    w = torch.randn(8, device=dev)

    def step(x):
        return torch.tanh(x * w + 1.5) - x.mean()

    for _ in range(2):
        x = step(x)
    met.clear_all()
    for i in range(5):
        x = step(x)
    assert met.metric_data("EagerOpCompileTime") is None  # nothing new to compile
    assert _samples("EagerOpExecuteTime") == 5 * 5  # mul, add, tanh, mean, sub
    new = torch.randn(9, device=dev)  # another signature: its ops compile once
    met.clear_all()
    step2 = [torch.tanh(new * 2.0 + 1.5) for _ in range(3)]
    assert _samples("EagerOpCompileTime") == 3 and _samples("EagerOpExecuteTime") == 9
    assert_same(step2[0], torch.tanh(new.cpu() * 2.0 + 1.5))


def test_the_same_input_twice_and_several_outputs(dev, eager):
    a = torch.randn(4, 3)
    x = a.to(dev)
    for _ in range(2):  # the second time through the op's kept program
        s = x * x
        values, indices = torch.max(x, dim=1)
        assert_same(s, a * a)
        assert_same((values, indices), torch.max(a, dim=1))


def test_an_error_raises_at_the_op(dev, eager):
    x = torch.arange(4.0, device=dev)
    with pytest.raises(IndexError, match="out of bounds"):
        x[torch.tensor([7], device=dev)]
    assert_same(x + 1, torch.arange(4.0) + 1)


def test_compile_inside_eager_mode_is_one_program(dev, eager):
    x = torch.randn(5, 5, device=dev)

    def f(t):
        return torch.cos(torch.sin(t)) * 2

    compiled = torch_xla.compile(f)
    met.clear_all()
    out = compiled(x)
    assert _samples("ExecuteTime") == 1 and met.metric_data("EagerOpExecuteTime") is None
    assert is_eager_mode()
    assert_same(out, f(x.cpu()))


def test_training_matches_the_cpu(dev, eager):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model.load_state_dict(cpu.state_dict())
    model.to(dev)
    data, target = torch.randn(4, 6), torch.randn(4, 1)
    losses = {}
    for name, m, d in (("cpu", cpu, "cpu"), ("xla", model, dev)):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        x, y = data.to(d), target.to(d)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            losses.setdefault(name, []).append(loss.detach())
    assert all(_computed(p) for p in model.parameters())
    assert_same(torch.stack(losses["xla"]), torch.stack(losses["cpu"]))
    assert_same(dict(model.state_dict()), dict(cpu.state_dict()))


def test_eager_mode_from_the_environment():
    code = ("import torch, torch_xla, torch_xla.debug.metrics as met\n"
            "assert torch_xla.experimental.is_eager_mode()\n"
            "y = torch.ones(3, device='xla') * 2\n"
            "assert met.metric_data('EagerOpExecuteTime')[0] >= 1\n"
            "assert 'IR: None' in torch_xla._XLAC._get_xla_tensor_debug_info(y)\n")
    python("-c", code, env={"XLA_USE_EAGER_DEBUG_MODE": 1})
