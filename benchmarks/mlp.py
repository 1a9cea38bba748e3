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


def torch_model():
    torch.manual_seed(0)
    layers = []
    for i in range(len(SIZES) - 1):
        layers += [nn.Linear(SIZES[i], SIZES[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def torch_step_fn(device, xla):
    model = torch_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(BATCH, SIZES[0]).to(device)
    y = torch.randint(0, SIZES[-1], (BATCH,)).to(device)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if xla:
            xm.optimizer_step(opt, barrier=True)
        else:
            opt.step()
    return step


def compiled_step_fn(device):
    model = torch_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(BATCH, SIZES[0]).to(device)
    y = torch.randint(0, SIZES[-1], (BATCH,)).to(device)
    return compiled_step(model, opt, lambda m: nn.functional.cross_entropy(m(x), y))


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

    def loss_fn(params):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))

    @jax.jit
    def train(params, bufs):
        grads = jax.grad(loss_fn)(params)
        bufs = jax.tree.map(lambda b, g: MOMENTUM * b + g, bufs, grads)
        params = jax.tree.map(lambda p, b: p - LR * b, params, bufs)
        return params, bufs
    train = jax.jit(train.__wrapped__, donate_argnums=(0, 1))
    state = [params, bufs]

    def step():
        state[0], state[1] = train(state[0], state[1])
    return step, lambda: jax.block_until_ready(state), lambda: train.lower(*state).compile()


def main():
    compare("mlp", torch_step_fn, jax_step_fn, compiled_step_fn=compiled_step_fn)


if __name__ == "__main__":
    main()
