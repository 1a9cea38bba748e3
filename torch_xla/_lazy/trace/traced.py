"""A torch function traced once, lazily, into one jax function.

`trace(fn, args, kwargs)` runs `fn` under `no_grad` on placeholders: XLA tensors of the
arguments' shapes and dtypes whose values are nodes with no lowering of their own. Its ops
are recorded as always (the same dispatch, the same lowerings); the graph from the
placeholders to its outputs becomes a plan (`_lazy/launch/subgraph`), and `Traced.callee` is the
jax function replaying it. Values the function reads from outside (tensors it closes over,
such as a module's parameters) stop the walk as placeholders do: they are `captured`,
inputs of the jax function after the arguments, and their tensors are kept so that each
call reads their current values and autograd reaches them. The nodes' dynamic scalars are
its last inputs. Two traces to the same plan give equal callees (the callee's key is the
plan), so tracing a function again each step still compiles once.

What a traced function cannot do: read a value on the host (`.item()`, printing), change
its arguments in place for the caller to see, or check values on the device (the deferred
checks of `_lazy/trace/value_checks` made while tracing are dropped: there is no host between a
loop's iterations).
"""
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..step import deferred_checks
from . import jax_functions
from ..graph import rng
from ..launch import subgraph
from ..graph.ir import Node, Value
from ..lowering import Lowering
from ..lowering.jax_call import JAX_CALL
from ..lowering.sharding_constraint import SHARDING_CONSTRAINT
from ..graph.tensor import XLATensor, live_values, to_functional, unwrap, wrap


def _unbound(*args, **kwargs):
    raise RuntimeError("this tensor is an input of a traced function (assume_pure, scan, "
                       "while_loop): it has no value outside the function, and the function "
                       "cannot read its values on the host")


PLACEHOLDER = Lowering("xla::traced_input", _unbound, static_scalars=True, rng=False,
                       dynamic_shape=False)


def _is_xla(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "xla"


class _Seen(TorchFunctionMode):
    """Records the XLA tensors the traced function passes to torch functions, by value:
    those it closes over are found here (their tensors carry autograd)."""

    def __init__(self):
        super().__init__()
        self.tensors = {}  # id(value) -> the tensor that held it
        self.first = {}    # id(tensor) -> (the tensor, the value it held when first seen)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for a in tree_flatten((args, kwargs or {}))[0]:
            if _is_xla(a) and not isinstance(a, XLATensor):
                v = unwrap(a)._value
                self.tensors.setdefault(id(v), a)
                self.first.setdefault(id(a), (a, v))
        return func(*args, **(kwargs or {}))

    def check_unchanged(self, outside):
        """Raises if the traced function changed a tensor from outside it in place (the
        change would be made once, when traced, not at each call): the tensor keeps its
        value."""
        for t, v in self.first.values():
            if id(v) in outside and unwrap(t)._value is not v:
                unwrap(t)._value = v
                raise RuntimeError("a traced function (assume_pure, scan, while_loop) changed "
                                   "a tensor from outside it in place; pass it in and return "
                                   "its new value instead")


_TENSOR = object()  # an output position holding a tensor


class Traced:
    """`fn` traced on arguments of one signature: `callee` (inputs: the arguments' tensors,
    then the captured values, then `scalars`), the output tree, and what it captured."""
    __slots__ = ("callee", "out_spec", "out_static", "captured", "scalars", "n_args",
                 "seed_positions", "plan")

    def current_captures(self):
        """The captured inputs as they are now: each tensor's current value."""
        return [t for t, _ in self.captured]

    def inputs(self, tensors):
        return [*tensors, *self.current_captures()]

    def scalars_seeded(self, seed):
        """The scalars with the random ops' seeds drawn from `seed` (None: as traced)."""
        if seed is None or not self.seed_positions:
            return self.scalars
        scalars = list(self.scalars)
        for p, s in zip(self.seed_positions, rng.seeds_from(seed, len(self.seed_positions))):
            scalars[p] = s
        return tuple(scalars)


def placeholder(shape, dtype, device, i, raw=False) -> torch.Tensor:
    """Placeholder `i`: a user's tensor, or (`raw`) the engine's XLATensor."""
    node = Node(PLACEHOLDER, ((i, tuple(shape), dtype), ()), (), (), ((tuple(shape), dtype),))
    t = wrap(Value(tuple(shape), dtype, device, node=node))
    return t if raw else to_functional(t)


def trace(fn, args, kwargs=None, name=None, raw=False) -> Traced:
    """`fn(*args, **kwargs)` traced into a jax function of the tensors among `args` and
    `kwargs` (any pytree; other leaves are static); `raw`: `fn` takes the engine's
    XLATensors (a function PyTorch's functionalization wrapped, as its higher-order ops
    pass them), not users' tensors."""
    flat, spec = tree_flatten((args, kwargs or {}))
    tensor_pos = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
    for i in tensor_pos:
        if not _is_xla(flat[i]):
            raise TypeError(f"a traced function takes XLA tensors, got one on {flat[i].device}")
    device = unwrap(flat[tensor_pos[0]])._value.device if tensor_pos else 0
    before = live_values()
    outside = {id(v) for v in before}
    fake = list(flat)
    for k, i in enumerate(tensor_pos):
        fake[i] = placeholder(flat[i].shape, flat[i].dtype, device, k, raw)
    holders = {id(unwrap(fake[i])._value): k for k, i in enumerate(tensor_pos)}
    checks = deferred_checks.deferred_check_count()
    seen = _Seen()
    try:
        with torch.no_grad(), seen:
            fake_args, fake_kwargs = tree_unflatten(fake, spec)
            out = fn(*fake_args, **fake_kwargs)
    finally:
        deferred_checks.drop_deferred_checks(checks)
    seen.check_unchanged(outside)
    out_flat, out_spec = tree_flatten(out)
    out_pos = [i for i, o in enumerate(out_flat) if isinstance(o, torch.Tensor)]
    roots = []
    for i in out_pos:
        # an XLAShardedTensor (what mark_sharding returns) stands for its global tensor
        out_flat[i] = getattr(out_flat[i], "global_tensor", out_flat[i])
        if not _is_xla(out_flat[i]):
            raise TypeError("a traced function must return XLA tensors, got one on "
                            f"{out_flat[i].device}")
        roots.append(unwrap(out_flat[i])._value)

    def stop(v):
        return id(v) in holders or id(v) in outside

    plan, root_refs, inputs, scalars = subgraph.extract(roots, stop)
    sources, captured = [], []
    for v in inputs:
        if id(v) in holders:
            sources.append(holders[id(v)])
        else:
            sources.append(len(tensor_pos) + len(captured))
            t = seen.tensors.get(id(v))
            captured.append((t if t is not None else to_functional(wrap(v)), v))
    n_args = len(tensor_pos)
    n_inputs = n_args + len(captured)

    def run(*xs):
        return subgraph.run(plan, root_refs, [xs[s] for s in sources], xs[n_inputs:])

    in_avals = [(tuple(flat[i].shape), flat[i].dtype) for i in tensor_pos]
    in_avals += [(v.shape, v.dtype) for _, v in captured]
    scalar_types = tuple(type(s) for s in scalars)
    key = ("traced", plan, root_refs, tuple(sources), tuple(in_avals), scalar_types)
    t = Traced()
    t.callee = jax_functions.Callee(run, in_avals, scalar_types,
                                    name or getattr(fn, "__name__", "traced"), key=key,
                                    shardings=_shardings(plan))
    t.out_spec = out_spec
    t.out_static = [_TENSOR if i in out_pos else o for i, o in enumerate(out_flat)]
    t.captured, t.scalars, t.n_args, t.plan = captured, tuple(scalars), n_args, plan
    t.seed_positions = tuple(s1 - 1 for op, _, _, _, s1, _ in plan if op.rng)
    del before
    return t


def _shardings(plan) -> tuple:
    """The shardings the plan's constraints name, those of functions it calls included."""
    found = []
    for op, template, *_ in plan:
        if op is SHARDING_CONSTRAINT:
            found.append(template[0][1])
        elif op is JAX_CALL:
            found += template[0][0].shardings
    return tuple(found)


def outputs(t: Traced, tensors):
    """The traced function's output tree around output tensors `tensors`."""
    it = iter(tensors)
    flat = [next(it) if o is _TENSOR else o for o in t.out_static]
    return tree_unflatten(flat, t.out_spec)


def signature(args, kwargs):
    """A call's key for reusing a trace: its tensors' shapes and dtypes, its other
    arguments' values, its tree; and the tensors."""
    flat, spec = tree_flatten((args, kwargs or {}))
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    key = (spec, tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a
                       for a in flat))
    return key, tensors


def call_pure(cache, fn, args, kwargs=None, seed=None):
    """`fn(*args, **kwargs)` through its trace in `cache` (traced at the first call of each
    signature), as one node of the graph with gradients (`jax_functions.apply`); with
    `seed`, its random ops draw from that seed."""
    key, tensors = signature(args, kwargs)
    t = cache.get(key)
    if t is None:
        t = cache[key] = trace(fn, args, kwargs)
    outs = jax_functions.apply(t.callee, t.inputs(tensors), t.scalars_seeded(seed))
    return outputs(t, outs)
