"""Tied weights stay tied through `Module.to(xla_device)`: one parameter (and one buffer)
wherever the CPU model had one, so training and state dicts behave as on the CPU."""
import copy

import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
from tests.compare import assert_same


class _TiedLM(nn.Module):
    """GPT-2's layout: the output projection is the token embedding, and two blocks share a
    buffer (a causal mask)."""

    def __init__(self, vocab=32, dim=16, ctx=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(ctx, dim)
        self.block = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, batch_first=True)
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        mask = torch.triu(torch.full((ctx, ctx), float("-inf")), 1)
        self.mask_holder = nn.Module()
        self.register_buffer("mask", mask)
        self.mask_holder.register_buffer("mask", mask)

    def forward(self, ids):
        t = ids.shape[1]
        h = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
        h = self.block(h, src_mask=self.mask[:t, :t])
        return self.lm_head(self.ln_f(h))


def _train(model, device, batches):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    losses = []
    for ids in batches:
        ids = ids.to(device)
        opt.zero_grad()
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           ids[:, 1:].reshape(-1))
        loss.backward()
        xm.optimizer_step(opt, barrier=True) if device != "cpu" else opt.step()
        losses.append(loss.item())
    return losses, model, opt


def test_to_device_keeps_parameters_and_buffers_tied(dev):
    model = _TiedLM().to(dev)
    assert model.lm_head.weight is model.wte.weight
    assert model.mask is model.mask_holder.mask
    assert model.wte.weight.device.type == "xla" and model.mask.device.type == "xla"
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "wte.weight" in names


def test_tied_lm_trains_as_on_the_cpu_with_adamw(dev):
    torch.manual_seed(0)
    model = _TiedLM()
    batches = [torch.randint(0, 32, (4, 9)) for _ in range(10)]
    cpu_losses, cpu_model, _ = _train(copy.deepcopy(model), "cpu", batches)
    xla_losses, xla_model, opt = _train(copy.deepcopy(model), dev, batches)
    assert_same(torch.tensor(xla_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5, device="cpu")
    assert cpu_losses[-1] < cpu_losses[0]
    # one copy of the tied weight in the optimizer, with one state, as on the CPU
    params = opt.param_groups[0]["params"]
    assert sum(p is xla_model.wte.weight for p in params) == 1
    assert len(params) == len(list(cpu_model.parameters()))
    assert len(opt.state) == len(params)
    assert xla_model.lm_head.weight is xla_model.wte.weight
    assert_same(xla_model.wte.weight, cpu_model.wte.weight.detach(), rtol=1e-3, atol=1e-4)


def test_load_state_dict_into_a_tied_model(dev):
    torch.manual_seed(0)
    source = _TiedLM()
    with torch.no_grad():
        source.wte.weight.add_(1.0)
    model = _TiedLM().to(dev)
    result = model.load_state_dict(source.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    assert model.lm_head.weight is model.wte.weight
    assert_same(model.lm_head.weight, source.wte.weight.detach())
    # a state dict saved from the device loads back on the CPU, tied
    back = _TiedLM()
    back.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    assert_same(back.lm_head.weight, source.wte.weight.detach(), device="cpu")


def test_conversions_off_the_device_are_pytorchs(dev):
    """On the CPU PyTorch unties buffers on a dtype conversion; that stays as it is."""
    model = _TiedLM().double()
    assert model.lm_head.weight is model.wte.weight
    assert model.mask is not model.mask_holder.mask
    moved = _TiedLM().to(dev).to(torch.float64)
    assert moved.lm_head.weight is moved.wte.weight and moved.mask is moved.mask_holder.mask
