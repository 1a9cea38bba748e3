"""Small transformer language model (2 layers, width 256, 4 heads, sequence 64, batch 32,
vocabulary 1000, AdamW): ours vs the same model in jax.jit (the floor) vs eager CPU."""
import jax
import jax.numpy as jnp
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
from common import compare, compiled_step

V, D, H, T, B, LAYERS, LR = 1000, 256, 4, 64, 32, 2, 1e-3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        b = x.shape[0]
        q, k, v = self.qkv(self.ln1(x)).view(b, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, T, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(V, D), nn.Parameter(torch.randn(T, D) * 0.02)
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, tokens):
        return self.head(self.ln(self.blocks(self.emb(tokens) + self.pos)))


def torch_step_fn(device, xla):
    torch.manual_seed(0)
    model = LM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    tokens = torch.randint(0, V, (B, T + 1)).to(device)
    x, y = tokens[:, :-1], tokens[:, 1:]

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        if xla:
            xm.optimizer_step(opt, barrier=True)
        else:
            opt.step()
    return step


def compiled_step_fn(device):
    torch.manual_seed(0)
    model = LM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    tokens = torch.randint(0, V, (B, T + 1)).to(device)
    x, y = tokens[:, :-1], tokens[:, 1:]
    return compiled_step(model, opt, lambda m: F.cross_entropy(m(x).reshape(-1, V), y.reshape(-1)))


def _layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def jax_params(key):
    def dense(key, i, o):
        return {"w": jax.random.normal(key, (i, o), jnp.float32) * 0.02, "b": jnp.zeros(o, jnp.float32)}
    keys = iter(jax.random.split(key, 64))
    ln = lambda: {"g": jnp.ones(D, jnp.float32), "b": jnp.zeros(D, jnp.float32)}  # noqa: E731
    blocks = [{"ln1": ln(), "ln2": ln(), "qkv": dense(next(keys), D, 3 * D), "proj": dense(next(keys), D, D),
               "fc1": dense(next(keys), D, 4 * D), "fc2": dense(next(keys), 4 * D, D)} for _ in range(LAYERS)]
    return {"emb": jax.random.normal(next(keys), (V, D), jnp.float32), "pos": jnp.zeros((T, D), jnp.float32),
            "blocks": blocks, "ln": ln(), "head": dense(next(keys), D, V)}


def jax_loss(p, x, y):
    B = x.shape[0]  # noqa: N806
    h = p["emb"][x] + p["pos"]
    mask = jnp.tril(jnp.ones((T, T), bool))
    for blk in p["blocks"]:
        qkv = _layer_norm(h, blk["ln1"]["g"], blk["ln1"]["b"]) @ blk["qkv"]["w"] + blk["qkv"]["b"]
        q, k, v = qkv.reshape(B, T, 3, H, D // H).transpose(2, 0, 3, 1, 4)
        s = (q @ k.transpose(0, 1, 3, 2)) / jnp.sqrt(jnp.float32(D // H))
        a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), -1) @ v
        h = h + a.transpose(0, 2, 1, 3).reshape(B, T, D) @ blk["proj"]["w"] + blk["proj"]["b"]
        f = jax.nn.gelu(_layer_norm(h, blk["ln2"]["g"], blk["ln2"]["b"]) @ blk["fc1"]["w"] + blk["fc1"]["b"],
                        approximate=False)
        h = h + f @ blk["fc2"]["w"] + blk["fc2"]["b"]
    logits = _layer_norm(h, p["ln"]["g"], p["ln"]["b"]) @ p["head"]["w"] + p["head"]["b"]
    logp = jax.nn.log_softmax(logits.reshape(-1, V))
    return -jnp.mean(jnp.take_along_axis(logp, y.reshape(-1, 1), 1))


def new_batch_step(device):
    """The training step (ours) on inputs of any batch size: (step(x, y), inputs(batch))."""
    torch.manual_seed(0)
    model = LM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)

    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).backward()
        xm.optimizer_step(opt)

    def inputs(batch):
        tokens = torch.randint(0, V, (batch, T + 1)).to(device)
        return tokens[:, :-1], tokens[:, 1:]
    return step, inputs


def _adamw(p, m, v, t, g):
    t = t + 1
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
    v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
    c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
    p = jax.tree.map(lambda p, m, v: p * (1 - LR * 0.01) - LR * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, m, v)
    return p, m, v, t


def jax_new_batch_step():
    """The JAX step and its arguments for a batch size: (train(p, m, v, t, tokens), args(batch))."""
    key = jax.random.PRNGKey(0)
    params = jax_params(key)
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)  # noqa: E731
    state = (params, zeros(), zeros(), jnp.zeros((), jnp.float32))

    def train(p, m, v, t, tokens):
        loss, g = jax.value_and_grad(jax_loss)(p, tokens[:, :-1], tokens[:, 1:])
        return (*_adamw(p, m, v, t, g), loss)
    return train, lambda batch: (*state, jax.random.randint(key, (batch, T + 1), 0, V))


def jax_step_fn():
    key = jax.random.PRNGKey(0)
    params = jax_params(key)
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)  # noqa: E731
    state = [params, zeros(), zeros(), jnp.zeros((), jnp.float32)]
    tokens = jax.random.randint(key, (B, T + 1), 0, V)

    def train(p, m, v, t, tokens):
        loss, g = jax.value_and_grad(jax_loss)(p, tokens[:, :-1], tokens[:, 1:])
        return (*_adamw(p, m, v, t, g), loss)
    train = jax.jit(train, donate_argnums=(0, 1, 2))

    def step():
        state[:] = train(*state[:4], tokens)
    return (step, lambda: jax.block_until_ready(state),
            lambda: train.lower(*state[:4], tokens).compile())


def main():
    compare("transformer", torch_step_fn, jax_step_fn, blocks=3, steps_per_block=5, eager_steps=3,
            compiled_step_fn=compiled_step_fn)


if __name__ == "__main__":
    main()
