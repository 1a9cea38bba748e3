"""Loops that are one op of the graph, not unrolled: `lax.scan` and `lax.while_loop` over
torch bodies traced once (`_lazy/trace/traced`).

`scan(fn, init, xs)` traces `fn(carry, x)` once on placeholders of the carry and of one
slice of `xs` and makes the loop one `JAX_CALL` node whose function is `lax.scan` of the
trace; its gradient is jax's (`jax_functions.apply`: the forward scan saves what the
backward scan needs, less what a checkpoint policy leaves it to recompute). Each
iteration's random ops draw other numbers (their seeds folded with the iteration's index).
`while_loop(cond, body, carried, additional)` is `lax.while_loop` of the two traces (no
gradient: XLA's While has none in reverse).
Tracing again each call gives the same plan, hence an equal node: a loop in a training
step compiles once.
"""
import jax
import jax.numpy as jnp
import torch
from jax import lax
from torch.utils._pytree import tree_flatten, tree_unflatten

from . import jax_functions, traced
from ..graph.tensor import XLATensor

_SEED_STRIDE = 0x9E3779B97F4A7C1  # seeds of iteration i: the traced seed + i * this


def _fold(traced_fn, scalars, i):
    """`scalars` with the random ops' seeds of iteration `i` (a traced index)."""
    if not traced_fn.seed_positions:
        return scalars
    scalars = list(scalars)
    for p in traced_fn.seed_positions:
        scalars[p] = scalars[p] + i.astype(jnp.int64) * _SEED_STRIDE
    return scalars


def _tensors(tree):
    """The tensors among `tree`'s leaves, and its structure."""
    flat, spec = tree_flatten(tree)
    return [x for x in flat if isinstance(x, torch.Tensor)], spec


def _avals(tensors):
    return [(tuple(t.shape), t.dtype) for t in tensors]


def _check_carry(what, given, returned):
    if list(given) != list(returned):
        raise ValueError(f"{what}: the carry returned by the body must have the shapes and "
                         f"dtypes of the carry it was given: {given} given, {returned} "
                         "returned")


def trace_scan_body(fn, init, xs):
    """`fn(carry, x)` traced on `init`'s and one slice of `xs`'s signature."""
    flat, spec = tree_flatten(xs)
    with torch.no_grad():
        x0 = tree_unflatten([x[0] if isinstance(x, torch.Tensor) else x for x in flat], spec)
    return traced.trace(fn, (init, x0), name=getattr(fn, "__name__", "scan_body"))


# What a scan body's backward recomputes rather than its forward stacking per iteration:
# layout changes and elementwise arithmetic, cheaper than writing and reading a stack
# (jax's vjp alone stacks each broadcast, converted or transposed operand it will need).
_CHEAP = frozenset({"broadcast_in_dim", "transpose", "reshape", "squeeze", "expand_dims",
                    "convert_element_type", "copy", "select_n", "neg", "add", "sub", "mul",
                    "div"})


def save_all_but_cheap(prim, *_, **__):
    """The `jax.checkpoint` policy saving the results of all primitives but `_CHEAP`'s:
    no product, reduction or transcendental op is computed twice."""
    return prim.name not in _CHEAP


SAVE_DOTS = jax.checkpoint_policies.dots_saveable
SAVE_NOTHING = jax.checkpoint_policies.nothing_saveable


def scan(body, init, xs, policy):
    """(final carry, stacked ys) of `lax.scan` over traced body `body` (from
    `trace_scan_body`) from `init` over the leading dim of `xs`; the forward stacks the
    results that `jax.checkpoint` policy `policy` saves, the backward recomputes the rest."""
    init_flat, init_spec = _tensors(init)
    xs_flat, _ = _tensors(xs)
    nc, nx, length = len(init_flat), len(xs_flat), xs_flat[0].shape[0]
    spec = body.out_spec
    carry_spec = spec.child(0) if hasattr(spec, "child") else spec.children_specs[0]
    if carry_spec != init_spec:
        raise ValueError(f"scan: the body returned a carry of structure {carry_spec}, "
                         f"given {init_spec}")
    _check_carry("scan", _avals(init_flat), body.callee.avals[:nc])
    captures = body.current_captures()
    n_in = nc + nx + len(captures)
    step = body.callee.fn

    def run(*arrays):
        carry0, seqs = arrays[:nc], arrays[nc:nc + nx]
        consts, scalars = arrays[nc + nx:n_in], arrays[n_in:]

        def one(carry, slice_):
            i, x = slice_
            outs = step(*carry, *x, *consts, *_fold(body, scalars, i))
            return tuple(outs[:nc]), tuple(outs[nc:])
        carry, ys = lax.scan(jax.checkpoint(one, policy=policy), tuple(carry0),
                             (jnp.arange(length), tuple(seqs)))
        return (*carry, *ys)

    avals = [*_avals(init_flat), *_avals(xs_flat), *_avals(captures)]
    callee = jax_functions.Callee(run, avals, body.callee.scalar_types,
                                  f"scan({body.callee.name})",
                                  key=("scan", body.callee, policy, tuple(avals)))
    outs = jax_functions.apply(callee, [*init_flat, *xs_flat, *captures], body.scalars)
    return traced.outputs(body, outs)


def while_loop(cond_fn, body_fn, carried, additional=()):
    """The carried values once `cond_fn(*carried, *additional)` is false, each iteration
    `carried = body_fn(*carried, *additional)`: `lax.while_loop` of the traced functions."""
    carried = list(carried)
    raw = any(isinstance(t, XLATensor) for t in carried)  # from PyTorch's while_loop
    cond = traced.trace(cond_fn, (*carried, *additional), name="while_cond", raw=raw)
    body = traced.trace(body_fn, (*carried, *additional), name="while_body", raw=raw)
    additional = [a for a in additional if isinstance(a, torch.Tensor)]  # others are static
    n, na = len(carried), len(additional)
    if len(cond.callee.avals) != 1 or cond.callee.avals[0][0] not in ((), (1,)):
        raise ValueError(f"while_loop: cond_fn must return one boolean tensor of one element, "
                         f"returned {cond.callee.avals}")
    _check_carry("while_loop", _avals(carried), body.callee.avals)
    cond_caps, body_caps = cond.current_captures(), body.current_captures()
    n_cc, n_bc, n_cs = len(cond_caps), len(body_caps), len(cond.scalars)
    fixed = n + na

    def run(*arrays):
        init, extra = arrays[:n], arrays[n:fixed]
        cc, bc = arrays[fixed:fixed + n_cc], arrays[fixed + n_cc:fixed + n_cc + n_bc]
        scalars = arrays[fixed + n_cc + n_bc:]
        cs, bs = scalars[:n_cs], scalars[n_cs:]

        def go_on(state):
            return cond.callee.fn(*state, *extra, *cc, *cs)[0].reshape(()).astype(bool)

        def step(state):
            return tuple(body.callee.fn(*state, *extra, *bc, *bs))
        return lax.while_loop(go_on, step, tuple(init))

    avals = [*_avals(carried), *_avals(additional), *_avals(cond_caps), *_avals(body_caps)]
    types = (*cond.callee.scalar_types, *body.callee.scalar_types)
    callee = jax_functions.Callee(run, avals, types, "while_loop",
                                  key=("while", cond.callee, body.callee, tuple(avals)))
    return jax_functions.call(callee, [*carried, *additional, *cond_caps, *body_caps],
                              (*cond.scalars, *body.scalars), raw=raw)


def partitioned(body, init, x):
    """(forward, alias_input, backward) of one step of traced scan body `body` (torch_xla's
    `value_and_grad_partitioned`): `forward(carry, x) -> (carry, (y, residuals))`, the
    residuals jax's vjp saves; `alias_input(residuals, x)` gives them back;
    `backward(grad_carry, (grad_y, residuals)) -> (grad_init, grad_x)`."""
    init_flat, init_spec = _tensors(init)
    x_flat, x_spec = _tensors(x)
    nc, nx = len(init_flat), len(x_flat)
    wrt = tuple(i for i, t in enumerate([*init_flat, *x_flat])
                if jax_functions.differentiable(t.dtype))
    vjp = jax_functions.Vjp(body.callee, wrt)

    def forward(carry, x):
        tensors = [*_tensors(carry)[0], *_tensors(x)[0], *body.current_captures()]
        outs = jax_functions.call(vjp.forward, tensors, body.scalars)
        carry_y = traced.outputs(body, outs[:vjp.n_out])
        return carry_y[0], (carry_y[1], tuple(vjp.residuals(tensors, outs)))

    def alias_input(residuals, x):
        return tuple(residuals)

    def backward(grad_carry, grad_y_residuals):
        grad_y, residuals = grad_y_residuals
        cts = [*_tensors(grad_carry)[0], *_tensors(grad_y)[0]]
        grads = jax_functions.call(vjp.backward, [*residuals, *cts])
        full = [None] * (nc + nx)
        for i, g in zip(wrt, grads):
            full[i] = g
        return tree_unflatten(full[:nc], init_spec), tree_unflatten(full[nc:], x_spec)
    return forward, alias_input, backward
