"""A program that fails: the error names the op that failed, the user's line that made it
and its place in the graph; tensors computed from it raise that error when used, the others
stay intact, and the next step trains."""
import inspect

import pytest
import torch

import torch_xla.core.xla_model as xm
from torch_xla._lazy.lowering import lookup, lower
from tests.compare import assert_same

# An op whose lowering fails, as a bug in a lowering would: PyTorch runs it on the CPU and
# knows its shapes (meta), the engine traces it, and it fails when its program is compiled.
_lib = torch.library.Library("xla_test", "DEF")
_lib.define("broken(Tensor x) -> Tensor")
_lib.impl("broken", lambda x: x.clone(), "CPU")
_lib.impl("broken", lambda x: torch.empty_like(x), "Meta")


@lower(torch.ops.xla_test.broken.default)
def _broken(x):
    raise ValueError("this lowering fails on purpose")


def _model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_a_failing_lowering_names_its_op_and_the_next_step_trains(dev):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    cpu_model = _model("cpu")
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    model = _model(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xd, yd = x.to(dev), y.to(dev)

    losses = [_step(cpu_model, cpu_opt, x, y) for _ in range(3)]
    _step(model, opt, xd, yd)
    xm.mark_step()
    loss = _step(model, opt, xd, yd)
    line = inspect.currentframe().f_lineno + 1
    logged = torch.ops.xla_test.broken(loss * 2) + 1  # a value logged beside the step
    with pytest.raises(RuntimeError, match=r"xla_test.broken.default failed to compile: op \d+ of \d+ in "
                                           r"the graph .*ValueError: this lowering fails on purpose") as info:
        xm.mark_step()
    made_at = f"made at {__file__}:{line} in {inspect.currentframe().f_code.co_name} " \
              "(`logged = torch.ops.xla_test.broken(loss * 2) + 1"
    assert made_at in str(info.value), str(info.value)
    # what came from the failed op raises when used, at the op or on the host
    with pytest.raises(RuntimeError, match="this tensor has no value.*xla_test.broken.default"):
        logged.item()
    with pytest.raises(RuntimeError, match="this tensor has no value"):
        logged * 3
    # everything else is intact: the step's loss and updates, and the next step
    assert loss.item() == pytest.approx(losses[1].item(), rel=1e-5)
    last = _step(model, opt, xd, yd)
    xm.mark_step()
    assert last.item() == pytest.approx(losses[2].item(), rel=1e-5)
    for p, q in zip(model.parameters(), cpu_model.parameters()):
        assert_same(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    del logged
    xm.mark_step()  # nothing failed is left pending


@pytest.mark.parametrize("device_thread", [False, True])
def test_an_op_the_backward_pass_made_names_the_line_that_called_backward(dev, monkeypatch,
                                                                         device_thread):
    """The backward pass runs on the thread that called backward (the engine turns autograd's
    multithreading off there), or, with it on, on autograd's thread for the device, with no
    user code on its stack: either way the line named is the one that called backward."""
    def fails(*args, **kwargs):
        raise ValueError("tanh_backward fails on purpose")
    monkeypatch.setattr(lookup(torch.ops.aten.tanh_backward.default), "fn", fails)
    w = torch.ones(13, 7, device=dev, requires_grad=True)  # shapes no other test traces
    xm.mark_step()
    loss = torch.tanh(w).sum()
    line = inspect.currentframe().f_lineno + 2
    with torch.autograd.set_multithreading_enabled(device_thread):
        loss.backward()
    with pytest.raises(RuntimeError, match="aten.tanh_backward.default failed to compile") as info:
        xm.mark_step()
    where = f"made by the backward pass called at {__file__}:{line} in {inspect.currentframe().f_code.co_name}"
    assert where + " (`loss.backward()`)" in str(info.value), str(info.value)
    with pytest.raises(RuntimeError, match="this tensor has no value"):
        w.grad.cpu()
    assert loss.item() == pytest.approx(91 * torch.tanh(torch.tensor(1.0)).item())  # intact
    monkeypatch.undo()
    w.grad = None
    torch.tanh(w).sum().backward()  # the next step trains
    xm.mark_step()
    assert_same(w.grad, torch.full((13, 7), 1 - torch.tanh(torch.tensor(1.0)).item() ** 2))


def test_a_failing_collective_names_the_line_of_its_call(dev, monkeypatch):
    from torch_xla._lazy.trace.collective_ops import ALL_REDUCE

    def fails(*args, **kwargs):
        raise ValueError("all_reduce fails on purpose")
    monkeypatch.setattr(ALL_REDUCE, "fn", fails)
    x = torch.full((11, 3), 2.0, device=dev)  # shapes no other test traces
    line = inspect.currentframe().f_lineno + 1
    y = xm.all_reduce("sum", x)
    with pytest.raises(RuntimeError, match="failed to compile.*all_reduce fails on purpose") as info:
        xm.mark_step()
    assert f"made at {__file__}:{line} in " in str(info.value), str(info.value)
    with pytest.raises(RuntimeError, match="this tensor has no value"):
        y.cpu()
    monkeypatch.undo()
    assert xm.all_reduce("sum", x).cpu().tolist() == [[2.0] * 3] * 11  # the next step works
