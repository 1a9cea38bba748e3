"""Jax functions as ops of the lazy graph, and their gradients.

`Callee(fn, in_avals, scalar_types)` is a jax function of flat arrays (tensors, then
Python scalars as weakly typed 0-d values) specialised to its inputs' shapes and dtypes;
its outputs' shapes and dtypes come from `jax.eval_shape`, so making it compiles nothing.
`call(callee, tensors, scalars)` records one `JAX_CALL` node (`lowering/jax_call`) and
gives its outputs as XLA tensors: the function is traced into the step's program where the
node stands. A callee is equal to itself, or, given a `key`, to every callee of that key
(a torch function traced again to the same plan: `_lazy/trace/traced`), so nodes made afresh
each step still compile once.

`apply(callee, tensors, scalars)` is `call` with autograd: where inputs require
gradients, the forward node computes `jax.vjp` of the function and returns its residuals
(the pullback's leaves) beside the outputs, and the backward is one more node that applies
the pullback to the outputs' cotangents: no recomputation, and the backward is fused into
the backward's program like any op. A residual that is one of the inputs (a matmul's
operands, a scan's `xs`) is not an output (XLA would copy it): the input tensor itself
is saved. Residuals are saved with `ctx.save_for_backward`, so `saved_tensors_hooks`
(offloading them to the host) see them and PyTorch frees them after the backward.
"""
import jax
import numpy as np
import torch

from ..runtime import pjrt
from ..base import user_code
from ..graph.ir import In, Node, Sc, Value
from ..lowering.jax_call import JAX_CALL
from ..graph.tensor import to_functional, unwrap, wrap

_SCALAR_DTYPES = {float: np.float64, int: np.int64, bool: np.bool_, complex: np.complex128}


def struct(shape, dtype):
    """The jax abstract value of a tensor of `shape` and torch `dtype`."""
    return jax.ShapeDtypeStruct(tuple(shape), pjrt.to_jax_dtype(dtype))


def scalar_struct(kind):
    """The jax abstract value a Python scalar of type `kind` is in a program (weakly typed)."""
    return jax.ShapeDtypeStruct((), _SCALAR_DTYPES[kind], weak_type=kind is not bool)


def to_jax_value(a):
    """A static argument as a jax function receives it (a torch dtype as jax's)."""
    return pjrt.to_jax_dtype(a) if isinstance(a, torch.dtype) else a


class Callee:
    """A jax function specialised to its inputs: `fn`, the tensors' (shape, dtype) `in_avals`,
    the scalars' Python types, and its outputs' (shape, torch dtype) `avals`; `shardings`:
    those its sharding constraints name (under SPMD its program runs over their mesh)."""
    __slots__ = ("fn", "name", "in_avals", "scalar_types", "avals", "key", "shardings",
                 "__weakref__")

    def __init__(self, fn, in_avals, scalar_types=(), name="jax_function", key=None, shardings=()):
        self.fn, self.name, self.key, self.shardings = fn, name, key, tuple(shardings)
        self.in_avals, self.scalar_types = tuple(in_avals), tuple(scalar_types)
        structs = [struct(s, d) for s, d in self.in_avals]
        structs += [scalar_struct(t) for t in self.scalar_types]
        out = jax.eval_shape(lambda *xs: tuple(fn(*xs)), *structs)
        self.avals = tuple((tuple(o.shape), pjrt.to_torch_dtype(o.dtype)) for o in out)

    def __eq__(self, other):
        return other is self or (self.key is not None and type(other) is Callee
                                 and other.key == self.key)

    def __hash__(self):
        return id(self) if self.key is None else hash(self.key)

    def __repr__(self):
        return f"jax_function({self.name})"


def _values(tensors):
    values = [unwrap(t)._value for t in tensors]
    for v in values:
        if v.data is None and v.node is None:
            raise v.failure()
    devices = {v.device for v in values}
    if len(devices) > 1:
        raise RuntimeError("Expected all tensors to be on the same device, but found at "
                           f"least two devices, {', '.join(f'xla:{d}' for d in sorted(devices))}!")
    return values


def call_values(callee, values, scalars=(), device=0):
    """The output values of one node calling `callee` on `values` and `scalars`."""
    if values:
        device = values[0].device
    template = ((callee, *[In(i) for i in range(len(values))],
                 *[Sc(j, type(c)) for j, c in enumerate(scalars)]), ())
    node = Node(JAX_CALL, template, tuple(values), tuple(scalars), callee.avals,
                user_code.user_line())
    return [Value(s, d, device, node=node, index=i) for i, (s, d) in enumerate(callee.avals)]


def call(callee, tensors, scalars=(), device=0, raw=False):
    """`callee` of XLA `tensors` and Python `scalars`, as XLA tensors (no autograd; `raw`:
    the engine's XLATensors, not users' tensors)."""
    outs = [wrap(v) for v in call_values(callee, _values(tensors), scalars, device)]
    return outs if raw else [to_functional(t) for t in outs]


def differentiable(dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


# Every specialisation of a jax function made for the graph, by the function's key: for
# each an object whose `_cache` holds its specialisations (torch_xla's
# `xla_builder._JAX_TO_XLA_COMPUTATION_CACHE`, which counts them).
SPECIALIZED = {}


class Vjp:
    """The forward and backward callees of `callee` differentiated in its inputs `wrt`
    (its two specialisations in `_cache`)."""

    def __init__(self, callee, wrt):
        self.wrt, self.n_out = wrt, len(callee.avals)
        self.float_out = tuple(i for i, (_, d) in enumerate(callee.avals) if differentiable(d))
        self.out_avals = callee.avals
        self.treedef = None
        # per residual, the input tensor it is (its position), or None: an output of forward
        self.forwarded = ()
        fn, n_tensors = callee.fn, len(callee.in_avals)

        def forward(*xs):
            # Each scalar a value of its own: a program passes equal scalars as one value
            # and jax saves a closed-over value once, so a checkpointed body's residuals
            # (its scalars among them) would be fewer where the program runs than here.
            xs = (*xs[:n_tensors], *jax.lax.optimization_barrier(xs[n_tensors:]))

            def of_wrt(*ws):
                full = list(xs)
                for i, w in zip(wrt, ws):
                    full[i] = w
                return tuple(fn(*full))
            outs, pullback = jax.vjp(of_wrt, *[xs[i] for i in wrt])
            leaves, self.treedef = jax.tree.flatten(pullback)
            self.forwarded = tuple(next((j for j in range(n_tensors) if leaf is xs[j]), None)
                                   for leaf in leaves)
            return (*outs, *[leaf for leaf, j in zip(leaves, self.forwarded) if j is None])

        self.forward = Callee(forward, callee.in_avals, callee.scalar_types,
                              f"{callee.name}.forward", shardings=callee.shardings)
        made = iter(self.forward.avals[self.n_out:])
        residual_avals = [next(made) if j is None else callee.in_avals[j] for j in self.forwarded]
        n_res = len(residual_avals)

        def backward(*xs):
            residuals, given = xs[:n_res], iter(xs[n_res:])
            cts = tuple(next(given) if i in self.float_out else
                        np.zeros(s, jax.dtypes.float0) for i, (s, _) in enumerate(self.out_avals))
            return jax.tree.unflatten(self.treedef, residuals)(cts)

        ct_avals = [self.out_avals[i] for i in self.float_out]
        self.backward = Callee(backward, (*residual_avals, *ct_avals), (),
                               f"{callee.name}.backward", shardings=callee.shardings)
        self._cache = {"forward": self.forward, "backward": self.backward}

    def residuals(self, tensors, outs):
        """The pullback's leaves, as `backward` takes them, of a forward call on `tensors`
        that returned `outs`: each an input tensor or one of the outputs after the first
        `n_out`."""
        made = iter(outs[self.n_out:])
        return [next(made) if j is None else tensors[j] for j in self.forwarded]


class _Differentiated(torch.autograd.Function):
    @staticmethod
    def forward(ctx, vjp, scalars, *tensors):
        outs = call(vjp.forward, tensors, scalars)
        ctx.vjp = vjp
        ctx.save_for_backward(*vjp.residuals(tensors, outs))
        ctx.mark_non_differentiable(*[o for i, o in enumerate(outs[:vjp.n_out])
                                      if i not in vjp.float_out])
        return tuple(outs[:vjp.n_out])

    @staticmethod
    def backward(ctx, *cts):
        vjp, residuals = ctx.vjp, ctx.saved_tensors
        given = [cts[i] if cts[i] is not None else torch.zeros(
            vjp.out_avals[i][0], dtype=vjp.out_avals[i][1], device=residuals[0].device
            if residuals else "xla") for i in vjp.float_out]
        grads = call(vjp.backward, [*residuals, *given])
        n_inputs = len(ctx.needs_input_grad) - 2
        out = [None] * n_inputs
        for i, g in zip(vjp.wrt, grads):
            out[i] = g
        return (None, None, *out)


def apply(callee, tensors, scalars=()):
    """`call` with autograd: gradients flow to those of `tensors` that require them."""
    wrt = ()
    if torch.is_grad_enabled():
        wrt = tuple(i for i, t in enumerate(tensors)
                    if t.requires_grad and differentiable(t.dtype))
    if not wrt:
        return call(callee, tensors, scalars)
    vjp = SPECIALIZED.get(("vjp", callee, wrt))
    if vjp is None:
        vjp = SPECIALIZED[("vjp", callee, wrt)] = Vjp(callee, wrt)
    return list(_Differentiated.apply(vjp, tuple(scalars), *tensors))
