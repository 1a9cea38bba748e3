"""Loops without unrolling, and jax functions in the graph, each measured side by side in
this one run:

- scan_layers: the first step (trace + compile + run: forward and backward) of a decoder of
  8, 16 and 32 identical layers run with `scan_layers`, against the same model unrolled
  and against JAX with `lax.scan` (`first_32/8`: the 32-layer first step over the 8-layer
  one; flat in depth is 1).
- call_jax: a step whose MLP block is a jax function called through `call_jax`, against
  the same ops written in torch (`call_jax/torch`: steady step time, 1 is the target).

Each line also gives the achieved FLOP/s (the program's, by XLA's cost analysis) as a
fraction of this machine's matmul peak measured in the same run: of the steady call_jax
step, and of the 32-layer scanned first step (trace and compile included).

`python loops.py [scan] [call_jax]` runs those parts (both by default).

Each depth is a graph of its own, compiled in this process after a warm-up model of
another width (so that neither side pays for first imports).
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F

import torch_xla
import torch_xla.core.xla_builder as xb
from common import (alternating_times, first_step_time, flop_rate, last_torch_xla_program,
                    program_flops, report)
from torch_xla.experimental.scan_layers import scan_layers

WIDTH, SEQ, BATCH = 64, 16, 4


class Layer(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return x + self.down(F.gelu(self.up(x)))


def torch_first_step(depth, scanned, width=WIDTH):
    """The first step's seconds, and the FLOPs of its program."""
    dev = torch_xla.device()
    torch.manual_seed(0)
    layers = [Layer(width).to(dev) for _ in range(depth)]
    x = torch.randn(BATCH, SEQ, width).to(dev)
    torch_xla.sync(wait=True)

    def step():
        y = scan_layers(layers, x) if scanned else torch.nn.Sequential(*layers)(x)
        y.pow(2).mean().backward()
        torch_xla.sync()
    seconds = first_step_time(step, lambda: torch_xla.sync(wait=True))
    return seconds, program_flops(last_torch_xla_program())


def _jax_layer(p, x):
    mu = x.mean(-1, keepdims=True)
    h = (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * p["g"] + p["b"]
    q, k, v = jnp.split(h @ p["qkv"] + p["qkv_b"], 3, axis=-1)
    s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(x.shape[-1])
    s = jnp.where(jnp.tril(jnp.ones((x.shape[1], x.shape[1]), bool)), s, -jnp.inf)
    x = x + jax.nn.softmax(s, -1) @ v @ p["out"] + p["out_b"]
    return x + jax.nn.gelu(x @ p["up"] + p["up_b"], approximate=False) @ p["down"] + p["down_b"]


def jax_first_step(depth, width=WIDTH):
    key = jax.random.PRNGKey(0)
    shapes = {"g": (width,), "b": (width,), "qkv": (width, 3 * width), "qkv_b": (3 * width,),
              "out": (width, width), "out_b": (width,), "up": (width, 4 * width),
              "up_b": (4 * width,), "down": (4 * width, width), "down_b": (width,)}
    params = {n: jax.random.normal(key, (depth, *s)) * 0.02 for n, s in shapes.items()}
    x = jax.random.normal(key, (BATCH, SEQ, width))

    def loss(params, x):
        y, _ = jax.lax.scan(lambda h, p: (_jax_layer(p, h), None), x, params)
        return (y ** 2).mean()
    grad = jax.jit(jax.grad(loss))
    jax.block_until_ready((params, x))
    return first_step_time(lambda: grad(params, x), lambda: None)


def _mlp_jax(x, w1, w2):
    return jax.nn.gelu(x @ w1, approximate=False) @ w2


def call_jax_against_torch():
    dev = torch_xla.device()
    x = torch.randn(64, 256, device=dev)
    w1, w2 = torch.randn(256, 1024, device=dev), torch.randn(1024, 256, device=dev)

    kept = [None]  # the step's output stays live, so each sync runs the step's program

    def through_jax():
        kept[0] = xb.call_jax(_mlp_jax, (x, w1, w2)).sum()
        torch_xla.sync()

    def in_torch():
        kept[0] = (F.gelu(x @ w1) @ w2).sum()
        torch_xla.sync()
    wait = lambda: torch_xla.sync(wait=True)  # noqa: E731
    times = alternating_times((through_jax, wait), (in_torch, wait), blocks=5, steps_per_block=20)
    through_jax()
    wait()
    return (*times, program_flops(last_torch_xla_program()))


def main(which=("scan", "call_jax")):
    if "call_jax" in which:
        ours, torch_ops, ratio, flops = call_jax_against_torch()
        report("call_jax step", {"call_jax_ms": ours * 1e3, "torch_ms": torch_ops * 1e3,
                                 "call_jax/torch": ratio, **flop_rate(flops, ours)})
    if "scan" not in which:
        return
    torch_first_step(2, True, width=48)  # warm-ups: other shapes, other programs
    torch_first_step(2, False, width=48)
    jax_first_step(2, width=48)
    figures = {}
    for depth in (8, 16, 32):
        figures[f"scan_{depth}_s"], flops = torch_first_step(depth, True)
        figures[f"unrolled_{depth}_s"], _ = torch_first_step(depth, False)
        figures[f"jax_{depth}_s"] = jax_first_step(depth)
    figures["first_32/8"] = figures["scan_32_s"] / figures["scan_8_s"]
    figures["unrolled_first_32/8"] = figures["unrolled_32_s"] / figures["unrolled_8_s"]
    figures["scan/jax_32"] = figures["scan_32_s"] / figures["jax_32_s"]
    figures.update({f"scan_32_first_{k}": v for k, v in flop_rate(flops, figures["scan_32_s"]).items()})
    report("scan_layers first step", figures)


if __name__ == "__main__":
    main(sys.argv[1:] or ("scan", "call_jax"))
