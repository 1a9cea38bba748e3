"""FSDPv2 on 8 devices (CPU_NUM_DEVICES=8): a llama-style model (rotary embeddings, RMSNorm,
SwiGLU; 2 layers, width 256, 4 heads, sequence 64, batch 16, vocabulary 1024, AdamW)
wrapped in SpmdFullyShardedDataParallel, against the same model in JAX, jax.jit over the
same NamedShardings (each weight split over 'fsdp' on its largest dim, the batch and each
layer's output on dim 0), in the same run."""
import os

os.environ.setdefault("CPU_NUM_DEVICES", "8")

import functools  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402
from torch_xla.distributed.fsdp.wrap import transformer_auto_wrap_policy  # noqa: E402
from torch_xla.experimental.spmd_fully_sharded_data_parallel import \
    SpmdFullyShardedDataParallel as FSDPv2  # noqa: E402
from common import (first_step_time, flop_rate, last_torch_xla_program,  # noqa: E402
                    program_flops, report, steady_time)

V, D, H, F_, T, B, LAYERS, LR = 1024, 256, 4, 512, 64, 16, 2, 1e-3
HD = D // H


def rotary():
    half = HD // 2
    freqs = np.outer(np.arange(T, dtype=np.float32), 1.0 / 10000 ** (np.arange(half) / half))
    return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def rotate(x, cos, sin):
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = RMSNorm(), RMSNorm()
        self.q, self.k, self.v, self.o = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(D, F_, bias=False), nn.Linear(D, F_, bias=False)
        self.down = nn.Linear(F_, D, bias=False)

    def forward(self, x, cos, sin):
        h = self.n1(x)
        q, k, v = (m(h).view(B, T, H, HD).transpose(1, 2) for m in (self.q, self.k, self.v))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm, self.head = RMSNorm(), nn.Linear(D, V, bias=False)
        cos, sin = rotary()
        self.register_buffer("cos", torch.from_numpy(cos), persistent=False)
        self.register_buffer("sin", torch.from_numpy(sin), persistent=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.head(self.norm(x))


def ours(mesh):
    torch.manual_seed(0)
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    model = FSDPv2(Llama(), mesh=mesh, auto_wrap_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    tokens = torch.randint(0, V, (B, T + 1)).to('xla')
    xs.mark_sharding(tokens, mesh, ('fsdp', None))
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).backward()
        xm.optimizer_step(opt, barrier=True)
    return step


def _rms(x, w):
    return w * x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)


def _rotate(x, cos, sin):
    x1, x2 = x[..., :HD // 2], x[..., HD // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def jax_loss(p, x, y, batch):
    cos, sin = (jnp.asarray(a) for a in rotary())
    h = p["embed"][x]
    mask = jnp.tril(jnp.ones((T, T), bool))
    for blk in p["layers"]:
        n = _rms(h, blk["n1"])
        q, k, v = ((n @ blk[m].T).reshape(B, T, H, HD).transpose(0, 2, 1, 3) for m in "qkv")
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        s = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(jnp.float32(HD)), -jnp.inf)
        a = jax.nn.softmax(s, -1) @ v
        h = h + a.transpose(0, 2, 1, 3).reshape(B, T, D) @ blk["o"].T
        n = _rms(h, blk["n2"])
        h = h + (jax.nn.silu(n @ blk["gate"].T) * (n @ blk["up"].T)) @ blk["down"].T
        h = jax.lax.with_sharding_constraint(h, batch)
    logits = jax.lax.with_sharding_constraint(_rms(h, p["norm"]) @ p["head"].T, batch)
    logp = jax.nn.log_softmax(logits.reshape(-1, V))
    return -jnp.mean(jnp.take_along_axis(logp, y.reshape(-1, 1), 1))


def jax_step_fn(jmesh):
    def fsdp(a):
        spec = [None] * a.ndim
        spec[list(a.shape).index(max(a.shape))] = "fsdp"
        return NamedSharding(jmesh, P(*spec))
    key = iter(jax.random.split(jax.random.PRNGKey(0), 64))

    def w(*shape):
        return jax.random.normal(next(key), shape, jnp.float32) * 0.02
    layer = lambda: {"n1": jnp.ones(D), "n2": jnp.ones(D), "q": w(D, D), "k": w(D, D),  # noqa: E731
                     "v": w(D, D), "o": w(D, D), "gate": w(F_, D), "up": w(F_, D), "down": w(D, F_)}
    params = {"embed": w(V, D), "layers": [layer() for _ in range(LAYERS)], "norm": jnp.ones(D),
              "head": w(V, D)}
    params = jax.tree.map(lambda a: jax.device_put(a, fsdp(a)), params)
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)  # noqa: E731
    state = [params, zeros(), zeros(), jnp.zeros((), jnp.float32)]
    batch = NamedSharding(jmesh, P("fsdp"))
    tokens = jax.device_put(jax.random.randint(next(key), (B, T + 1), 0, V), batch)

    def train(p, m, v, t, tokens):
        g = jax.grad(jax_loss)(p, tokens[:, :-1], tokens[:, 1:], batch)
        t = t + 1
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        p = jax.tree.map(lambda p, m, v: p * (1 - LR * 0.01) - LR * (m / c1) / (jnp.sqrt(v / c2) + 1e-8),
                         p, m, v)
        return p, m, v, t
    train = jax.jit(train, donate_argnums=(0, 1, 2))

    def step():
        state[:] = train(*state, tokens)
    return step, lambda: jax.block_until_ready(state)


def main():
    xr.use_spmd()
    mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (xr.global_runtime_device_count(),),
                   ('fsdp',))
    step = ours(mesh)
    ours_first = first_step_time(step, xm.wait_device_ops)
    ours_t = steady_time(step, xm.wait_device_ops, blocks=3, steps_per_block=5)
    flops = program_flops(last_torch_xla_program())  # the step's one program, all 8 devices
    jstep, jsync = jax_step_fn(mesh.get_jax_mesh())
    jax_first = first_step_time(jstep, jsync)
    jax_t = steady_time(jstep, jsync, blocks=3, steps_per_block=5)
    report("spmd_fsdp (8 devices)", {"ours_ms": ours_t * 1e3, "jax_ms": jax_t * 1e3,
                                     "ours/jax": ours_t / jax_t, "first_ours_s": ours_first,
                                     "first_jax_s": jax_first, "first_ratio": ours_first / jax_first,
                                     **flop_rate(flops, ours_t)})


if __name__ == "__main__":
    main()
