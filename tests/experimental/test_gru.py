"""GRU: torch.nn.GRU on XLA tensors as one scan per layer, equal to PyTorch's GRU on the
CPU (outputs, final hidden state, gradients); PyTorch's own GRU on CPU tensors."""
import pytest
import torch

from tests.compare import ALLCLOSE, assert_same, check
from torch_xla.experimental.gru import GRU


@pytest.mark.parametrize("batch_first", [False, True])
def test_gru_matches_torch(dev, batch_first):
    torch.manual_seed(0)
    reference = torch.nn.GRU._orig(4, 6, num_layers=2, batch_first=batch_first)
    gru = GRU(4, 6, num_layers=2, batch_first=batch_first)
    gru.load_state_dict(reference.state_dict())
    on_dev = GRU(4, 6, num_layers=2, batch_first=batch_first).to(dev)
    on_dev.load_state_dict(reference.state_dict())
    x = torch.randn(5, 3, 4, requires_grad=True)

    def run(x):
        return on_dev(x) if x.device.type == "xla" else reference(x)
    check(run, x, grads=True, rtol=1e-5, atol=1e-5)
    assert_same(gru(x)[0], reference(x)[0], **ALLCLOSE, device="cpu")  # on the CPU: PyTorch's own GRU


def test_torch_gru_is_patched_and_bidirectional_falls_back():
    assert torch.nn.GRU is GRU and torch.nn.GRU._orig is not GRU
    assert type(torch.nn.GRU(4, 6, bidirectional=True)) is torch.nn.GRU._orig
