"""CNN with batch norm (two conv-BN-ReLU-maxpool blocks and a linear head, 32x32 RGB input,
batch 64, SGD with momentum): ours vs the same model in jax.jit vs eager CPU."""
import jax
import jax.numpy as jnp
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
from common import compare, compiled_step

B, C1, C2, CLASSES, LR, MOMENTUM = 64, 32, 64, 10, 0.01, 0.9


def torch_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, C1, 3, padding=1), nn.BatchNorm2d(C1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(C1, C2, 3, padding=1), nn.BatchNorm2d(C2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(C2 * 8 * 8, CLASSES))


def torch_step_fn(device, xla):
    model = torch_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(B, 3, 32, 32).to(device)
    y = torch.randint(0, CLASSES, (B,)).to(device)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if xla:
            xm.optimizer_step(opt, barrier=True)
        else:
            opt.step()
    return step


def compiled_step_fn(device):
    model = torch_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(B, 3, 32, 32).to(device)
    y = torch.randint(0, CLASSES, (B,)).to(device)
    return compiled_step(model, opt, lambda m: F.cross_entropy(m(x), y))


def _conv(x, w, b):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y + b[None, :, None, None]


def _bn(x, g, b, mean, var):
    mu = x.mean((0, 2, 3))
    v = x.var((0, 2, 3))
    n = x.size / x.shape[1]
    y = (x - mu[None, :, None, None]) * jax.lax.rsqrt(v + 1e-5)[None, :, None, None]
    new_mean, new_var = 0.9 * mean + 0.1 * mu, 0.9 * var + 0.1 * v * n / (n - 1)
    return y * g[None, :, None, None] + b[None, :, None, None], new_mean, new_var


def _pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def jax_step_fn():
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    p = {"w1": jax.random.normal(keys[0], (C1, 3, 3, 3), jnp.float32) * 0.1, "b1": jnp.zeros(C1, jnp.float32),
         "g1": jnp.ones(C1, jnp.float32), "be1": jnp.zeros(C1, jnp.float32),
         "w2": jax.random.normal(keys[1], (C2, C1, 3, 3), jnp.float32) * 0.05, "b2": jnp.zeros(C2, jnp.float32),
         "g2": jnp.ones(C2, jnp.float32), "be2": jnp.zeros(C2, jnp.float32),
         "wf": jax.random.normal(keys[2], (C2 * 64, CLASSES), jnp.float32) * 0.01,
         "bf": jnp.zeros(CLASSES, jnp.float32)}
    stats = {"m1": jnp.zeros(C1, jnp.float32), "v1": jnp.ones(C1, jnp.float32),
             "m2": jnp.zeros(C2, jnp.float32), "v2": jnp.ones(C2, jnp.float32)}
    x = jax.random.normal(keys[3], (B, 3, 32, 32), jnp.float32)
    y = jax.random.randint(keys[4], (B,), 0, CLASSES)

    def loss_fn(p, s, x, y):
        h, m1, v1 = _bn(_conv(x, p["w1"], p["b1"]), p["g1"], p["be1"], s["m1"], s["v1"])
        h = _pool(jax.nn.relu(h))
        h, m2, v2 = _bn(_conv(h, p["w2"], p["b2"]), p["g2"], p["be2"], s["m2"], s["v2"])
        h = _pool(jax.nn.relu(h)).reshape(B, -1)
        logp = jax.nn.log_softmax(h @ p["wf"] + p["bf"])
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1)), {"m1": m1, "v1": v1, "m2": m2, "v2": v2}

    def train(p, bufs, s, x, y):
        g, s = jax.grad(loss_fn, has_aux=True)(p, s, x, y)
        bufs = jax.tree.map(lambda b, g: MOMENTUM * b + g, bufs, g)
        return jax.tree.map(lambda p, b: p - LR * b, p, bufs), bufs, s
    train = jax.jit(train, donate_argnums=(0, 1, 2))
    state = [p, jax.tree.map(jnp.zeros_like, p), stats]

    def step():
        state[:] = train(*state, x, y)
    return (step, lambda: jax.block_until_ready(state),
            lambda: train.lower(*state, x, y).compile())


def main():
    compare("cnn", torch_step_fn, jax_step_fn, blocks=3, steps_per_block=5, eager_steps=3,
            compiled_step_fn=compiled_step_fn)


if __name__ == "__main__":
    main()
