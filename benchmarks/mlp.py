"""MLP 784-1024-1024-10, batch 128, SGD with momentum: ours vs jax.jit (the floor) vs eager CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
from common import compare, compiled_step

SIZES = [784, 1024, 1024, 10]
BATCH, LR, MOMENTUM = 128, 0.01, 0.9
TINY_SIZES, TINY_BATCH = [4, 4, 4, 2], 2  # the same step with negligible compute: PyTorch's own cost


def torch_model(sizes=SIZES):
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def torch_step_fn(device, xla, sizes=SIZES, batch=BATCH):
    model = torch_model(sizes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(batch, sizes[0]).to(device)
    y = torch.randint(0, sizes[-1], (batch,)).to(device)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if xla:
            xm.optimizer_step(opt, barrier=True)
        else:
            opt.step()
    return step


def compiled_step_fn(device, sizes=SIZES, batch=BATCH, backend="openxla"):
    model = torch_model(sizes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(batch, sizes[0]).to(device)
    y = torch.randint(0, sizes[-1], (batch,)).to(device)
    return compiled_step(model, opt, lambda m: nn.functional.cross_entropy(m(x), y), backend)


def jax_step_fn():
    key = jax.random.PRNGKey(0)
    params = []
    for i in range(len(SIZES) - 1):
        key, k1 = jax.random.split(key)
        bound = 1 / np.sqrt(SIZES[i])
        params.append((jax.random.uniform(k1, (SIZES[i], SIZES[i + 1]), jnp.float32, -bound, bound),
                       jnp.zeros(SIZES[i + 1], jnp.float32)))
    bufs = jax.tree.map(jnp.zeros_like, params)
    x = jax.random.normal(key, (BATCH, SIZES[0]), jnp.float32)
    y = jax.random.randint(key, (BATCH,), 0, SIZES[-1])

    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))

    def train(params, bufs, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        bufs = jax.tree.map(lambda b, g: MOMENTUM * b + g, bufs, grads)
        params = jax.tree.map(lambda p, b: p - LR * b, params, bufs)
        return params, bufs, loss
    train = jax.jit(train, donate_argnums=(0, 1))
    state = [params, bufs, None]

    def step():
        state[:] = train(state[0], state[1], x, y)
    return (step, lambda: jax.block_until_ready(state),
            lambda: train.lower(state[0], state[1], x, y).compile())


def main():
    floor_steps = {  # eager: PyTorch's C++ kernels; compiled: torch.compile with its own inductor
        "eager": lambda: torch_step_fn("cpu", False, TINY_SIZES, TINY_BATCH),
        "compiled": lambda: compiled_step_fn("cpu", TINY_SIZES, TINY_BATCH, backend="inductor")}
    compare("mlp", torch_step_fn, jax_step_fn, compiled_step_fn=compiled_step_fn,
            floor_steps=floor_steps)


if __name__ == "__main__":
    main()
