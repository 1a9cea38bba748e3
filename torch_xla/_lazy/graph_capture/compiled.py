"""A captured graph run as one XLA program on XLA tensors: what the dynamo backends return.

`CompiledGraph(gm)` is called with the graph's arguments (XLA tensors as users hold them)
and returns its results as XLA tensors. The graph is lowered once (`fx_lowering`) and
compiled with `jax.jit` at the first call, for the arguments' device; after that a call
reads the arguments' buffers, runs the program and wraps its outputs: no op is traced.
Arguments still pending on the lazy path are materialised first, so compiled and lazy code
mix. Inputs the graph writes (`copy_`: an optimizer step, batch norm's running statistics)
get their new values, and their old buffers are donated to the program when no other
tensor holds them (one copy of the model).

Graphs with symbolic sizes are compiled once per set of concrete sizes. A graph that cannot
be one program (`fx_lowering.Unsupported`) runs op by op on the lazy path, counted as
`DynamoLazyGraph`. Compilations count as `DynamoCompile` and `UncachedCompile` (a program
found in the cache of identical graphs: `CachedCompile`), runs as `DynamoExecute`.
"""
import collections
import time

import jax
import torch
from jax.sharding import SingleDeviceSharding

from .. import debug, metrics, rng, runtime
from ..execution import from_cpu, materialize
from ..frames import run_without_dynamo
from ..ir import Value
from ..tensor import XLATensor, live_values, to_functional, unwrap, wrap
from . import decompose
from .fx_lowering import GraphFunction, Unsupported, aval_of

_programs = {}  # structural key -> compiled program, shared by identical graphs


def compile_graph(gm: torch.fx.GraphModule, args) -> "CompiledGraph":
    """The compiled form of a dynamo graph: an ATen graph from AOTAutograd as it is, a graph
    of torch-level calls (`openxla_eval`) traced to ATen first. Gradients through a graph of
    torch-level calls need PyTorch's autograd: such a graph runs on the lazy path."""
    if decompose.is_aten_graph(gm):
        return CompiledGraph(gm)
    if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return CompiledGraph(gm, lazy="inputs require grad: use backend='openxla' to train")
    return CompiledGraph(decompose.to_aten(gm, args))


class CompiledGraph:
    def __init__(self, gm: torch.fx.GraphModule, lazy: str = None):
        self.gm = gm
        self.lazy = lazy    # why the graph runs on the lazy path, if it does
        self._symbolic = decompose.is_symbolic(gm)
        self._plans = {}    # concrete sizes (symbolic graphs) -> _Plan
        self._plan = None   # the plan of a graph with fixed sizes
        if not self._symbolic and lazy is None:
            self._plan = self._make_plan(decompose.decompose, gm)

    def _make_plan(self, prepare, *prepare_args):
        try:
            return _Plan(GraphFunction(prepare(*prepare_args)))
        except Unsupported as e:
            self.lazy = str(e)
            return None

    def __call__(self, *args):
        plan = self._plan
        if self._symbolic:
            key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
            plan = self._plans.get(key)
            if plan is None and self.lazy is None:
                plan = self._plans[key] = self._make_plan(decompose.specialize, self.gm, args)
        if plan is None:
            metrics.count("DynamoLazyGraph")
            return self.gm(*args)
        return plan.run(args)


run_without_dynamo(CompiledGraph.__call__)


class _Plan:
    """One lowered graph and its programs (one per choice of donated inputs)."""

    def __init__(self, fn: GraphFunction):
        self.fn = fn
        self.avals = fn.input_avals
        self.out_avals = [aval_of(n.meta["val"]) for n in fn._output_nodes]
        self.tensor_args = [i for i, n in enumerate(
            n for n in fn.gm.graph.nodes if n.op == "placeholder") if n in fn._placeholders]
        self.mutated = fn.mutated_inputs
        self.programs = {}
        self.key = None if fn.has_tensor_constants else (fn.gm.code, tuple(self.avals))

    def run(self, args):
        values = [_input_value(args[i]) for i in self.tensor_args]
        device = _device_of(values)
        values = [from_cpu(v, device) if isinstance(v, torch.Tensor) else v for v in values]
        pending = [v for v in values if v.node is not None]
        if pending:
            materialize(pending)
        donated = _donatable(values, self.mutated, device)
        program = self.programs.get((donated, device))
        if program is None:
            program = self.programs[(donated, device)] = self._compile(values, donated, device)
        seeds = tuple(rng.next_seed(device) for _ in range(self.fn.n_rng))
        donated_set = set(donated)
        args_d = tuple(values[i].data for i in donated)
        args_k = tuple(v.data for i, v in enumerate(values) if i not in donated_set)
        start = time.perf_counter_ns()
        mutated, outs = program(args_d, args_k, seeds)
        metrics.sample("ExecuteTime", time.perf_counter_ns() - start)
        metrics.count("DynamoExecute")
        for i, data in zip(self.mutated, mutated):
            shape, dtype = self.avals[i]
            _write_back(args[self.tensor_args[i]], Value(shape, dtype, device, data=data))
        results = []
        for kind, x in self.fn.output_refs:
            if kind == "value":
                shape, dtype = self.out_avals[x]
                results.append(to_functional(wrap(Value(shape, dtype, device, data=outs[x]))))
            elif kind == "input":
                results.append(args[self.tensor_args[x]])
            else:
                results.append(x)
        return results

    def _compile(self, values, donated, device):
        key = None if self.key is None else (self.key, donated, device)
        program = _programs.get(key) if key is not None else None
        if program is not None:
            metrics.count("CachedCompile")
            return program
        metrics.count("UncachedCompile")
        metrics.count("DynamoCompile")
        start = time.perf_counter_ns()
        fn, n = self.fn, len(values)
        kept = [i for i in range(n) if i not in set(donated)]
        leaf_of = {i: k for k, i in enumerate(list(donated) + kept)}  # input -> argument

        def program_fn(donated_bufs, kept_bufs, seeds):
            leaves = donated_bufs + kept_bufs
            return fn(tuple(leaves[leaf_of[i]] for i in range(n)), seeds)

        placement = SingleDeviceSharding(runtime.jax_device(device))
        jitted = jax.jit(program_fn, donate_argnums=(0,) if donated else (), out_shardings=placement)
        seeds = tuple(0 for _ in range(fn.n_rng))
        compiled = jitted.lower(tuple(values[i].data for i in donated),
                                tuple(values[i].data for i in kept), seeds).compile()
        metrics.sample("CompileTime", time.perf_counter_ns() - start)
        if debug.enabled():
            print(f"[PT_XLA_DEBUG] compiled a captured graph of {len(fn._steps)} ops "
                  f"({len(values)} inputs, {len(donated)} donated)", flush=True)
        if key is not None:
            _programs[key] = compiled
        return compiled


def _input_value(t):
    if isinstance(t, XLATensor):
        return t._value
    if t.device.type == "xla":
        return unwrap(t)._value
    if t.dim() == 0:
        return t  # a CPU scalar tensor meets tensors on any device, as in PyTorch
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                       f"devices, xla:0 and {t.device}!")


def _device_of(values):
    devices = {v.device for v in values if isinstance(v, Value)}
    if len(devices) > 1:
        a, b = sorted(devices)[:2]
        raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                           f"two devices, xla:{a} and xla:{b}!")
    return devices.pop() if devices else 0


def _donatable(values, mutated, device):
    """The inputs among `mutated` whose buffers the program may take: no other live tensor
    holds them, and no pending computation reads them later."""
    if not mutated:
        return ()
    live = live_values(device)
    if any(v.node is not None for v in live):
        return ()
    holders = collections.Counter(id(v.data) for v in live)
    seen = collections.Counter(id(values[i].data) for i in range(len(values)))
    return tuple(i for i in mutated if holders[id(values[i].data)] <= 1 and seen[id(values[i].data)] == 1)


def _write_back(t, value):
    """Gives tensor `t` (an input the graph wrote) its new value."""
    if isinstance(t, XLATensor):
        t._value = value
        return
    torch._functionalize_replace(t, wrap(value))
    torch._functionalize_commit_update(t)
    torch._sync(t)
