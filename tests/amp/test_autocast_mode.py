"""Autocast on XLA devices: torch.autocast('xla') and torch_xla.amp.autocast."""
import pytest
import torch

import torch_xla.amp
import torch_xla.debug.metrics as met
from tests.conftest import assert_same, fallbacks

bf16, f32 = torch.bfloat16, torch.float32


@pytest.fixture
def x(dev):
    return torch.randn(4, 4, device=dev)


def test_lower_precision_ops(dev, x):
    linear = torch.nn.Linear(4, 3).to(dev)
    conv = torch.nn.Conv2d(2, 3, 3).to(dev)
    with torch.autocast("xla", dtype=bf16):
        assert torch.mm(x, x).dtype == bf16
        assert (x @ x).dtype == bf16 and torch.bmm(x[None], x[None]).dtype == bf16
        assert linear(x).dtype == bf16
        assert conv(torch.randn(1, 2, 5, 5, device=dev)).dtype == bf16
        assert torch.mm(x.double(), x.double()).dtype == torch.float64  # doubles are never cast
        assert torch.mm(x.cpu(), x.cpu()).dtype == f32  # CPU tensors: not this autocast
        assert (x + x).dtype == f32  # not listed: untouched
    assert torch.mm(x, x).dtype == f32  # outside: untouched


def test_float32_and_promote_ops(dev, x):
    h = x.to(bf16)
    with torch_xla.amp.autocast(dev):
        assert torch.exp(h).dtype == f32 and torch.log_softmax(h, 1).dtype == f32
        assert torch.softmax(h, 0).dtype == f32 and h.sum().dtype == f32
        assert torch.softmax(h, 0, dtype=bf16).dtype == bf16  # an explicit dtype wins
        assert torch.nn.functional.mse_loss(h, h).dtype == f32
        assert torch.nn.functional.layer_norm(h, (4,)).dtype == f32
        assert torch.addcmul(x, h, h).dtype == f32  # promoted to the widest input
        assert torch.addcmul(h, h, h).dtype == bf16


def test_autocast_values_match_explicit_casts(dev, x):
    w = torch.randn(4, 4, device=dev)
    with torch.autocast("xla"):
        got = torch.softmax(x @ w, 1)
    expected = torch.softmax((x.to(bf16) @ w.to(bf16)).float(), 1)
    assert_same(got, expected.cpu(), rtol=0, atol=0)


def test_torch_xla_autocast_rejects_other_devices():
    with pytest.raises(ValueError, match="not an XLA device"):
        torch_xla.amp.autocast(torch.device("cpu"))


@pytest.mark.parametrize("kind,default", [("CPU", torch.bfloat16), ("TPU", torch.bfloat16),
                                          ("CUDA", torch.float16), ("GPU", torch.float16)])
def test_torch_xla_autocast_defaults_to_the_device_type_s_dtype(monkeypatch, kind, default):
    """As torch_xla's: float16 on XLA:GPU (PyTorch's CUDA autocast default), bfloat16
    elsewhere; a dtype given is kept."""
    monkeypatch.setenv("PJRT_DEVICE", kind)
    assert torch_xla.amp.autocast(torch.device("xla", 0)).fast_dtype == default
    assert torch_xla.amp.autocast(torch.device("xla", 0), dtype=torch.bfloat16).fast_dtype == bf16


def _train(dev, use_autocast):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 8, generator=g).to(dev), torch.randint(0, 3, (32,), generator=g).to(dev)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        with torch_xla.amp.autocast(dev, enabled=use_autocast):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
        assert out.dtype == (bf16 if use_autocast else f32) and loss.dtype == f32
        loss.backward()
        assert model[0].weight.grad.dtype == f32  # parameters and grads stay float32
        opt.step()
        torch_xla.sync()
        losses.append(loss.item())
    return losses


def test_model_trains_under_autocast_close_to_float32(dev):
    met.clear_counters()
    reference = _train(dev, False)
    mixed = _train(dev, True)
    assert mixed[-1] < mixed[0] * 0.9
    assert_same(torch.tensor(mixed), torch.tensor(reference), rtol=0.05, atol=0.02, device="cpu")
    assert mixed != reference  # bfloat16 really ran
    assert not fallbacks(), fallbacks()
