"""A program that fails: the error names the op that failed and its place in the graph;
tensors computed from it raise that error when used, the others stay intact, and the next
step trains."""
import pytest
import torch

import torch_xla.core.xla_model as xm
from torch_xla._lazy.lowering import lower

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
    logged = torch.ops.xla_test.broken(loss * 2) + 1  # a value logged beside the step
    with pytest.raises(RuntimeError, match=r"xla_test.broken.default failed to compile: op \d+ of \d+ in "
                                           r"the graph .*ValueError: this lowering fails on purpose"):
        xm.mark_step()
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
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    del logged
    xm.mark_step()  # nothing failed is left pending
