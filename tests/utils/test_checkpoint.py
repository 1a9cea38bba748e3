"""torch_xla.utils.checkpoint: the same gradients as without checkpointing, the forward's
random masks replayed, an optimization barrier before the recomputation."""
import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla.utils import checkpoint as xcp
from tests.compare import assert_same


class Block(torch.nn.Module):
    def __init__(self, p=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        return self.drop(torch.tanh(self.lin(x)))


def _grads(block, x, checkpointed):
    out = xcp.checkpoint(block.forward, x) if checkpointed else block(x)
    (out * out).sum().backward()
    return [x.grad.cpu()] + [p.grad.cpu() for p in block.parameters()]


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_gradients_equal_the_unchecked_ones(dev, p):
    results = []
    for checkpointed in (False, True):
        block = Block(p).to(dev)
        x = torch.arange(8.0).view(2, 4).to(dev).requires_grad_()
        xm.set_rng_state(5, dev)
        results.append(_grads(block, x, checkpointed))
    assert_same(results[1], results[0], device="cpu")


def test_the_recomputation_sits_behind_an_optimization_barrier(dev):
    block = Block().to(dev)
    x = torch.ones(2, 4, device=dev).requires_grad_()
    out = xcp.checkpoint(block.forward, x)
    (out * out).sum().backward()
    assert "optimization_barrier" in xm.get_stablehlo([block.lin.weight.grad])
    torch_xla.sync()


def test_arguments_checked_as_in_torch_xla(dev):
    x = torch.ones(2, 4, device=dev).requires_grad_()
    with pytest.raises(ValueError, match="use_reentrant==False"):
        xcp.checkpoint(Block().to(dev), x, use_reentrant=False)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: extra"):
        xcp.checkpoint(Block().to(dev), x, extra=1)
