"""FSDPv2 checks: a small llama-style transformer (rotary embeddings, RMSNorm, SwiGLU)
trained with SpmdFullyShardedDataParallel on 8 devices against the same model on the CPU
(registered into tests/distributed/_spmd_harness.CHECKS)."""
import functools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla._XLAC
import torch_xla.distributed.spmd as xs
from torch_xla.distributed.fsdp import checkpoint_module
from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch_xla.experimental.spmd_fully_sharded_data_parallel import \
    SpmdFullyShardedDataParallel as FSDPv2

from ._spmd_harness import N, check, close, raises, spec, train_beside_the_cpu
from tests.compare import assert_same

VOCAB, DIM, HEADS, HIDDEN, LAYERS, SEQ, BATCH = 64, 32, 4, 64, 2, 16, 8


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(DIM, DIM, bias=False) for _ in range(4))

    def forward(self, x, cos, sin):
        b, s, _ = x.shape

        def heads(t):
            return t.view(b, s, HEADS, DIM // HEADS).transpose(1, 2)
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        scores = q @ k.transpose(-1, -2) / (DIM // HEADS) ** 0.5
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).reshape(b, s, DIM))


class SwiGLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate, self.up = nn.Linear(DIM, HIDDEN, bias=False), nn.Linear(DIM, HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(DIM), Attention()
        self.mlp_norm, self.mlp = RMSNorm(DIM), SwiGLU()

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        half = DIM // HEADS // 2
        freqs = torch.outer(torch.arange(SEQ).float(), 1.0 / 10000 ** (torch.arange(half) / half))
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.head(self.norm(x))


def _train(wrap, steps=10):
    """Losses of `steps` AdamW steps of the wrapped model on 8 devices and of the same model
    on the CPU, the compile count after each step, and the wrapped model."""
    torch.manual_seed(3)
    ref = Llama()
    model = Llama()
    model.load_state_dict(ref.state_dict())
    model = wrap(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=3e-3)
    tokens = (torch.randint(0, VOCAB, (BATCH, SEQ + 1)) for _ in range(steps))  # drawn step by step
    batches = ((t[:, :-1], t[:, 1:]) for t in tokens)
    losses = train_beside_the_cpu(model, opt, ref, ref_opt, batches, _lm_loss, model._mesh, ('fsdp', None))
    return (model, ref, *losses)


def _lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def _fsdp_mesh():
    return xs.Mesh(np.arange(N), (N,), ('fsdp',))


@check
def fsdp_v2_trains_a_llama_like_model_as_one_device():
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    model, ref, losses, ref_losses, counts = _train(
        lambda m: FSDPv2(m, mesh=_fsdp_mesh(), auto_wrap_policy=policy))
    for a, b in zip(losses, ref_losses):
        close(a, b)
    assert losses[-1] < losses[0]
    assert counts[3] == counts[-1], counts
    assert all(isinstance(layer, FSDPv2) for layer in model.module.layers)
    ref_params = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        name = name.replace("_orig_module.", "")
        shards = xs.XLAShardedTensor(p).local_shards
        assert len(shards) == N and len({s.shard_device for s in shards}) == N, name
        assert all(s.data.numel() * N == p.numel() for s in shards), (name, spec(p))
        whole = ref_params[name].detach()
        for s in shards:  # together the shards are the parameter, as on the CPU
            assert_same(s.data, whole[tuple(s.indices)], rtol=1e-4, atol=1e-5, device="cpu")


@check
def fsdp_v2_shards_the_largest_dim_and_the_output():
    model = FSDPv2(SwiGLU(), mesh=_fsdp_mesh())
    assert spec(model.module.gate.weight) == "{devices=[8,1]0,1,2,3,4,5,6,7}"  # (64, 32)
    assert spec(model.module.down.weight) == "{devices=[1,8]0,1,2,3,4,5,6,7}"  # (32, 64)
    out = model(torch.randn(BATCH, DIM).to('xla').requires_grad_())
    assert spec(out) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    out.sum().backward()  # the gradients meet an optimization barrier
    assert "opt-barrier" in torch_xla._XLAC._get_xla_tensors_hlo([model.module.gate.weight.grad])
    raises(ValueError, lambda: FSDPv2(SwiGLU(), mesh=xs.Mesh(np.arange(N), (N,), ('data',))),
           "axis named 'fsdp'")
    raises(RuntimeError, lambda: FSDPv2(model, mesh=_fsdp_mesh()), "already wrapped")
    raises(RuntimeError, lambda: FSDPv2(nn.ModuleList([SwiGLU()]), mesh=_fsdp_mesh()), "forward")
    xs.set_global_mesh(_fsdp_mesh())
    try:
        assert FSDPv2(SwiGLU())._mesh is xs.get_global_mesh()
    finally:
        xs.set_global_mesh(None)


@check
def fsdp_v2_with_gradient_checkpointing():
    """Each layer wrapped as FSDPv2(checkpoint_module(layer)): its forward runs again in the
    backward, and training matches the CPU."""
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    mesh = _fsdp_mesh()
    runs = []

    def checkpointed(m, *args, **kwargs):
        inner = m.forward

        def counting(*a, **k):
            runs.append(1)
            return inner(*a, **k)
        m.forward = counting
        return FSDPv2(checkpoint_module(m), *args, **kwargs)
    model, _, losses, ref_losses, _ = _train(
        lambda m: FSDPv2(m, mesh=mesh, auto_wrap_policy=policy, auto_wrapper_callable=checkpointed),
        steps=2)
    for a, b in zip(losses, ref_losses):
        close(a, b)
    assert len(runs) == 2 * LAYERS * 2, len(runs)  # forward and recomputation, each step


@check
def fsdp_v2_under_torch_compile_trains_as_one_device():
    """torch.compile of an FSDPv2 model (its forward marks its output's sharding, captured
    into the graph): the CPU's losses."""
    model, _, losses, ref_losses, counts = _train(
        lambda m: torch.compile(FSDPv2(m, mesh=_fsdp_mesh()), backend="openxla"), steps=3)
    for a, b in zip(losses, ref_losses):
        close(a, b)
    assert spec(model.layers[0].attn.q.weight).startswith("{devices=[8,1]"), spec(model.layers[0].attn.q.weight)
