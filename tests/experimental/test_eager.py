"""Eager mode: values are there without a sync, errors come from the op; `torch_xla.compile`
still makes one program of its function. Fused (the default): ops run as programs cut at
reads, backward's start and end, optimizer steps and a bound on pending ops. Op by op
(upstream's): one program per op signature compiled once, each op run as it is called."""
import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla._lazy.trace import eager_fused
from torch_xla.experimental import eager_mode, eager_mode_context, is_eager_mode
from tests.compare import assert_same
from tests.fresh_process import python


@pytest.fixture
def eager():
    """Upstream's op-by-op eager mode."""
    xm.mark_step()
    with eager_mode_context(True, op_by_op=True) as before:
        assert before is False and is_eager_mode()
        yield
    assert not is_eager_mode()


@pytest.fixture
def fused():
    xm.mark_step()
    with eager_mode_context(True, op_by_op=False):
        yield
    xm.mark_step()


def _samples(name):
    data = met.metric_data(name)
    return 0 if data is None else data[0]


def _computed(t):
    return "XLAData: None" not in torch_xla._XLAC._get_xla_tensor_debug_info(t)


def test_the_setting_and_its_context():
    assert not is_eager_mode()
    with eager_mode_context(True):
        assert is_eager_mode() and torch_xla._XLAC._get_use_eager_mode()
        assert not torch_xla._lazy.trace.eager.op_by_op()  # fused, unless asked
        with eager_mode_context(False) as outer:
            assert outer is True and not is_eager_mode()
        assert is_eager_mode()
        with eager_mode_context(True, op_by_op=True):
            assert torch_xla._lazy.trace.eager.op_by_op()
            torch_xla._XLAC._set_use_eager_mode(True)  # (upstream's switch keeps the way)
            assert torch_xla._lazy.trace.eager.op_by_op()
        assert not torch_xla._lazy.trace.eager.op_by_op()
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
    cpu, model, data, target = _twin_models(dev)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (cpu, model)]
    expected = _train(cpu, opts[0], data, target, 3)
    losses = _train(model, opts[1], data.to(dev), target.to(dev), 3)
    assert all(_computed(p) for p in model.parameters())
    assert_same(torch.stack(losses), torch.stack(expected))
    assert_same(dict(model.state_dict()), dict(cpu.state_dict()))


def test_eager_mode_from_the_environment():
    code = ("import torch, torch_xla, torch_xla.debug.metrics as met\n"
            "assert torch_xla.experimental.is_eager_mode()\n"
            "y = torch.ones(3, device='xla') * 2\n"
            "assert met.metric_data('EagerOpExecuteTime')[0] >= 1\n"
            "assert 'IR: None' in torch_xla._XLAC._get_xla_tensor_debug_info(y)\n")
    python("-c", code, env={"XLA_USE_EAGER_DEBUG_MODE": 1})


def test_op_by_op_from_the_environment():
    code = ("import torch, torch_xla, torch_xla.debug.metrics as met\n"
            "torch_xla.experimental.eager_mode(True)\n"
            "y = torch.ones(3, device='xla') * 2\n"
            "assert met.metric_data('EagerOpExecuteTime')[0] >= 1\n"
            "assert 'IR: None' in torch_xla._XLAC._get_xla_tensor_debug_info(y)\n")
    python("-c", code, env={"XLA_EAGER_OP_BY_OP": 1})


# ---- fused ------------------------------------------------------------------------------

def test_fused_values_are_read_without_a_sync_in_one_program(dev, fused):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    x, y = a.to(dev), b.to(dev)
    met.clear_all()
    h = torch.nn.functional.gelu(x @ y)
    out = h.sum(0)
    x.mul_(2)
    assert not _computed(out) and met.metric_data("ExecuteTime") is None
    assert_same(out, torch.nn.functional.gelu(a @ b).sum(0))  # a read: one program for all
    assert _samples("ExecuteTime") == 1 and _computed(h) and _computed(x)
    assert met.metric_data("EagerOpExecuteTime") is None
    assert_same(x, a * 2)
    assert _samples("ExecuteTime") == 1


def test_fused_shape_and_dtype_errors_raise_at_the_op(dev, fused):
    x = torch.randn(3, 4, device=dev)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        x @ torch.randn(3, 4, device=dev)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.zeros(3, dtype=torch.int64, device=dev).add_(1.5)
    assert_same(x + 1, x.cpu() + 1)


def test_fused_a_failed_value_check_raises_where_the_value_is_read(dev, fused):
    x = torch.arange(4.0, device=dev)
    y = x[torch.tensor([7], device=dev)] + 1  # no error yet: the check is on the device
    z = x * 3
    w = torch.nn.Linear(2, 2).to(dev)(torch.randn(1, 2, device=dev))
    w.sum().backward()  # cuts at backward's start and end run the check's program
    assert_same(z, torch.arange(4.0) * 3)  # values the check did not guard read fine
    with pytest.raises(IndexError, match="out of bounds"):
        y.cpu()
    with pytest.raises(IndexError, match="out of bounds"):
        (y * 2).cpu()
    x[torch.tensor([9], device=dev)]  # never read: the next sync raises it
    with pytest.raises(IndexError, match="out of bounds"):
        xm.wait_device_ops()
    xm.mark_step()  # raised once


def _twin_models(dev):
    """The same small model on the CPU and on `dev`, with a batch of data and targets."""
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model.load_state_dict(cpu.state_dict())
    return cpu, model.to(dev), torch.randn(4, 6), torch.randn(4, 1)


def _train(model, opt, x, y, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def test_fused_training_cuts_three_programs_a_step_and_compiles_nothing_new(dev, fused):
    cpu, model, data, target = _twin_models(dev)
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in (cpu, model)]
    expected = _train(cpu, opts[0], data, target, 3)
    losses = _train(model, opts[1], data.to(dev), target.to(dev), 3)
    assert_same(torch.stack(losses), torch.stack(expected))
    met.clear_all()
    steps = 50
    losses = _train(model, opts[1], data.to(dev), target.to(dev), steps)
    # forward (cut where backward starts), backward (cut where it ends), the optimizer's step
    assert _samples("ExecuteTime") == 3 * steps
    assert met.metric_data("CompileTime") is None and not met.counter_value("UncachedCompile")
    expected = _train(cpu, opts[0], data, target, steps)
    assert_same(torch.stack(losses), torch.stack(expected))
    assert_same(dict(model.state_dict()), dict(cpu.state_dict()))


def test_fused_a_bound_on_pending_ops_counted_from_the_last_cut(dev, fused, monkeypatch):
    monkeypatch.setattr(eager_fused, "MAX_OPS", 10)
    x = torch.randn(8, device=dev)
    xm.mark_step()
    for _ in range(2):  # the second round reuses the first's programs
        met.clear_all()
        y = x
        for _ in range(25):
            y = y * 1.01
        assert _samples("ExecuteTime") == 2  # at the 10th and the 20th op
        assert_same(y, x.cpu() * 1.01 ** 25, rtol=1e-4)  # the read: the third
        assert _samples("ExecuteTime") == 3
    assert met.metric_data("CompileTime") is None


def test_fused_bound_from_the_environment(monkeypatch):
    monkeypatch.setenv("XLA_EAGER_FUSED_MAX_OPS", "64")
    assert eager_fused._max_ops() == 64
    monkeypatch.setenv("XLA_EAGER_FUSED_MAX_OPS", "0")
    with pytest.raises(ValueError, match="XLA_EAGER_FUSED_MAX_OPS"):
        eager_fused._max_ops()
