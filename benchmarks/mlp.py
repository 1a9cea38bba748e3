"""MLP 784-1024-1024-10, batch 128, SGD with momentum: ours vs jax.jit (the floor) vs eager CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
from common import compare, compiled_step, python_per_op

SIZES = [784, 1024, 1024, 10]
BATCH, LR, MOMENTUM = 128, 0.01, 0.9
TINY_SIZES, TINY_BATCH = [4, 4, 4, 2], 2  # the same step with negligible compute: PyTorch's own cost


def torch_model(sizes=SIZES):
    torch.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers += [nn.Linear(sizes[i], sizes[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def _training(device, sizes, batch):
    """The model on `device`, its optimizer and one batch (x, y)."""
    model = torch_model(sizes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x = torch.randn(batch, sizes[0]).to(device)
    y = torch.randint(0, sizes[-1], (batch,)).to(device)
    return model, opt, x, y


def torch_step_fn(device, xla, sizes=SIZES, batch=BATCH):
    model, opt, x, y = _training(device, sizes, batch)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if xla:
            xm.optimizer_step(opt, barrier=True)
        else:
            opt.step()
    return step


def new_batch_step(device):
    """The training step (ours) on inputs of any batch size: (step(x, y), inputs(batch))."""
    model = torch_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step(x, y):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        xm.optimizer_step(opt)

    def inputs(batch):
        return (torch.randn(batch, SIZES[0]).to(device),
                torch.randint(0, SIZES[-1], (batch,)).to(device))
    return step, inputs


def jax_new_batch_step():
    """The JAX step and its arguments for a batch size: (train(params, bufs, x, y), args(batch))."""
    params, bufs, _, _ = jax_data()

    def train(params, bufs, x, y):
        loss, grads = jax.value_and_grad(jax_loss)(params, x, y)
        return (*jax_momentum_update(params, bufs, grads), loss)

    def args(batch):
        key = jax.random.PRNGKey(batch)
        return (params, bufs, jax.random.normal(key, (batch, SIZES[0]), jnp.float32),
                jax.random.randint(key, (batch,), 0, SIZES[-1]))
    return train, args


def compiled_step_fn(device, sizes=SIZES, batch=BATCH, backend="openxla"):
    model, opt, x, y = _training(device, sizes, batch)
    return compiled_step(model, opt, lambda m: nn.functional.cross_entropy(m(x), y), backend)


def jax_data():
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
    return params, bufs, x, y


def jax_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))


def jax_momentum_update(params, bufs, grads):
    bufs = jax.tree.map(lambda b, g: MOMENTUM * b + g, bufs, grads)
    return jax.tree.map(lambda p, b: p - LR * b, params, bufs), bufs


def jax_step_fn():
    params, bufs, x, y = jax_data()

    def train(params, bufs, x, y):
        loss, grads = jax.value_and_grad(jax_loss)(params, x, y)
        return (*jax_momentum_update(params, bufs, grads), loss)
    train = jax.jit(train, donate_argnums=(0, 1))
    state = [params, bufs, None]

    def step():
        state[:] = train(state[0], state[1], x, y)
    return (step, lambda: jax.block_until_ready(state),
            lambda: train.lower(state[0], state[1], x, y).compile())


def jax_three_programs_fn():
    """The JAX step split where torch.compile splits PyTorch's (AOTAutograd's forward and
    backward, the optimizer after the graph break at backward()): three programs, the
    forward's residuals passed to the backward."""
    params, bufs, x, y = jax_data()
    forward = jax.jit(lambda p, x, y: jax.vjp(lambda p: jax_loss(p, x, y), p))
    backward = jax.jit(lambda vjp: vjp(jnp.float32(1.0))[0])
    update = jax.jit(jax_momentum_update, donate_argnums=(0, 1))
    state = [params, bufs, None]

    def step():
        loss, vjp = forward(state[0], x, y)
        state[0], state[1] = update(state[0], state[1], backward(vjp))
        state[2] = loss
    return step, lambda: jax.block_until_ready(state)


def main():
    tiny = lambda: torch_step_fn("cpu", False, TINY_SIZES, TINY_BATCH)  # noqa: E731
    floor_steps = {  # eager: PyTorch's C++ kernels; python: one Python call per op on top;
        "eager": tiny,  # compiled: torch.compile with PyTorch's own inductor
        "python": lambda: python_per_op(tiny()),
        "compiled": lambda: compiled_step_fn("cpu", TINY_SIZES, TINY_BATCH, backend="inductor")}
    compare("mlp", torch_step_fn, jax_step_fn, compiled_step_fn=compiled_step_fn,
            floor_steps=floor_steps, jax_variants={"3programs": jax_three_programs_fn})


if __name__ == "__main__":
    main()
