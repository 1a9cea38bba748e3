"""A captured graph run as one XLA program on XLA tensors: what the dynamo backends return.

`CompiledGraph(gm)` is called with the graph's arguments (XLA tensors as users hold them)
and returns its results as XLA tensors. The graph is lowered once (`fx_lowering`) and
compiled by the runner at the first call, for the arguments' device; after that a call
reads the arguments' buffers, runs the program and wraps its outputs: no op is traced.
Arguments still pending on the lazy path are computed inside the program when their graph
is small (a view the graph before left lazy, the backward's seed `ones_like(loss)`), else
materialised first, so compiled and lazy code mix. Inputs the graph writes (`copy_`: an optimizer step, batch norm's running statistics)
get their new values, and their old buffers are donated to the program when no other
tensor holds them (one copy of the model). A CPU scalar the graph writes from CPU scalars
only (an optimizer's step count) gets its new value computed on the host, by the graph's
own ops: reading it back from the device would wait for the program at every step.

A graph holding collectives (`xm.all_reduce` and its kin, PyTorch's `_c10d_functional` ops:
ops of the graph like any other) is one program over every replica's device, run as the
lazy path runs its replicated programs (`launch/replica_program`).

Graphs with symbolic sizes are compiled once per set of concrete sizes. A graph that cannot
be one program (`fx_lowering.Unsupported`) runs op by op on the lazy path, counted as
`DynamoLazyGraph`. Compilations count as `DynamoCompile` and `UncachedCompile` (a program
found in the cache of identical graphs: `CachedCompile`), runs as `DynamoExecute`.
"""
import collections
import warnings
import weakref

import jax.numpy as jnp
import torch
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils import _pytree as pytree

from ..base import counters
from ..launch import donation, graph_program, program_kinds
from ..launch.program_tables import ProgramTable
from ..runtime import graph_analysis, runner
from ..inspect import graph_save
from ..graph import rng
from ..launch import replica_program as replicated
from ..graph import spmd_layout as spmd
from ..step.deferred_checks import has_deferred_checks
from ..step.execution import materialize, to_cpu
from ..base.frames import run_without_dynamo
from ..graph.ir import Node, Value
from ..graph.tensor import XLATensor, live_tensors, unwrap, wrap
from ..launch.transfers import from_cpu
from . import decompose
from .fx_lowering import GraphFunction, Unsupported, fill_nodes

# Pending arguments of a backward graph (the views of inputs the forward saved for it, the
# gradient's seed) whose graph has at most this many ops are computed inside its program
# (recomputed if something else reads them later); others are materialised first, as torch_xla
# syncs a graph's pending inputs.
_FUSED_OPS = 16


def compile_graph(gm: torch.fx.GraphModule, args) -> "CompiledGraph":
    """The compiled form of a dynamo graph: an ATen graph from AOTAutograd as it is, a graph
    of torch-level calls (`openxla_eval`) traced to ATen first. Gradients through a graph of
    torch-level calls need PyTorch's autograd: such a graph runs on the lazy path. A graph
    given no XLA tensor but CPU ones (dynamo guards the devices: it always will be) is not
    lowered: it runs on the CPU, as eager PyTorch would run it."""
    if _has_cpu_tensors(args) and not _has_xla_tensors(args):
        return CompiledGraph(gm, lazy="its inputs are on the CPU")
    if decompose.is_aten_graph(gm):
        return CompiledGraph(gm)
    if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return CompiledGraph(gm, lazy="inputs require grad: use backend='openxla' to train")
    state = _state_of(gm)
    if not state:
        return CompiledGraph(decompose.to_aten(gm, args))
    return _WithState(gm, list(state), args)


def _state_of(gm):
    """`gm`'s parameters and buffers by name."""
    state = dict(gm.named_parameters())
    state.update(gm.named_buffers())
    return state


class _WithState:
    """A graph of torch-level calls that holds its own parameters and buffers (an
    `fx.symbolic_trace`d module; dynamo's graphs take them as inputs): traced with them as
    inputs of the program, given their current tensors at each call (an optimizer's update is
    seen; a buffer the graph writes gets its new value)."""

    def __init__(self, gm, names, args):
        self.gm, self.names = gm, names

        def lifted(*flat):
            state = dict(zip(names, flat[:len(names)]))
            return torch.func.functional_call(gm, state, tuple(flat[len(names):]))
        self.graph = CompiledGraph(decompose.to_aten(lifted, self._state() + list(args)))

    def _state(self):
        tensors = _state_of(self.gm)
        return [tensors[n] for n in self.names]

    def __call__(self, *args):
        return self.graph(*self._state(), *args)


class CompiledGraph:
    def __init__(self, gm: torch.fx.GraphModule, lazy: str = None):
        self.gm = gm
        self.lazy = lazy    # why the graph runs on the lazy path, if it does
        self._symbolic = decompose.is_symbolic(gm)
        self._plans = {}    # concrete sizes (symbolic graphs) -> _Plan
        self._plan = None   # the plan of a graph with fixed sizes
        self._warned = False  # of its CPU tensors (once)
        if not self._symbolic and lazy is None:
            self._plan = self._make_plan(decompose.decompose, gm)

    def _make_plan(self, prepare, *prepare_args):
        try:
            fn = GraphFunction(prepare(*prepare_args), defer_views=True, collectives=True,
                               lift_scalars=True)
        except Unsupported as e:
            self.lazy = str(e)
            return None
        _count_ops(fn.gm)
        return _Plan(fn)

    def __call__(self, *args):
        plan = self._plan
        if _has_cpu_tensors(args):
            # PyTorch's rules for tensors of two devices are each op's (an index tensor may
            # stay on the CPU, a CPU-only op runs there, others raise): the lazy path keeps them
            if not self._warned:
                self._warned = True
                _warn_of_cpu_tensors(args)
            if _has_xla_tensors(args):
                counters.count("DynamoLazyGraph")
            return self.gm(*args)
        if self._symbolic:
            key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
            plan = self._plans.get(key)
            if plan is None and self.lazy is None:
                plan = self._plans[key] = self._make_plan(decompose.specialize, self.gm, args)
        if plan is None:
            counters.count("DynamoLazyGraph")
            return self.gm(*args)
        return plan.run(args)


run_without_dynamo(CompiledGraph.__call__)


class _Plan:
    """One lowered graph and its program on each device. The program takes the buffers of
    the inputs the graph writes as donated arguments: each is the input's own buffer when
    nothing else can read it later or users marked it for donation (`_donatable`), else a
    copy of it. Inputs the graph only reads are donated too when marked and an output can
    take their buffer (`_donors`: the program is compiled for each set of them)."""

    def __init__(self, fn: GraphFunction):
        self.fn = fn
        # AOTAutograd's backward graph: it takes the gradients of the forward's outputs
        self.backward = any(n.op == "placeholder" and n.name.startswith("tangents")
                            for n in fn.gm.graph.nodes)
        self.avals = fn.input_avals
        # the graph's Python scalars (but 0 and 1): parameters after the seeds,
        # as torch_xla's lowering of a captured graph makes them device data
        self.constants = tuple(fn.constants)
        self.out_avals = fn.output_avals
        self.tensor_args = fn.tensor_inputs
        self.mutated = fn.mutated_inputs
        self.mutated_args = [fn.tensor_inputs[i] for i in fn.mutated_inputs]
        self.owners = {}    # mutated input -> the XLATensors that took its value last call
        self.kept = [i for i in range(len(self.avals)) if i not in set(self.mutated)]
        # inputs some result shares the buffer of (never donated)
        self.returned = {x if kind in ("input", "alias") else x[0] for kind, x in fn.output_refs
                         if kind in ("input", "alias", "view")}
        # (device, layout, donors) -> the runner's Executable (`program_tables`); programs of
        # identical graphs are shared through the runner's cache by the graph's code and
        # inputs, those of graphs holding tensor constants are this plan's own.
        self.programs = ProgramTable()
        self.key = (fn.gm.code, tuple(self.avals)) if not fn.has_tensor_constants else object()
        # mutated input -> the graph's nodes computing its new value on the host, in order
        self.on_host = {i: (nodes, src) for i, src in zip(self.mutated, fn.written_from)
                        if (nodes := _host_nodes(src, fn)) is not None}

    def run(self, args):
        values, device = _read_inputs(args, self.tensor_args)
        for i, donate in self.fn.donor_marks:
            donation.set_donor(values[i], donate)
        if self.fn.input_marks:
            self._mark_inputs(values)
        program_kind = program_kinds.choose(self.fn.collective)
        on_mesh = program_kind is program_kinds.MESH
        if program_kind is program_kinds.REPLICAS:
            mutated, outs = self._run_replicated(values, device)
        else:
            mutated, outs = self._run_program(values, device, on_mesh)
        counters.count("DynamoExecute")
        counters.sample("RunCachedGraphInputData", len(values))  # torch_xla's names for a
        counters.sample("RunCachedGraphOutputData", len(outs))   # cached graph's run
        if mutated:
            self.owners = self._write_inputs(args, mutated, device)
        results = []
        mesh = _input_mesh(values) if on_mesh else None
        for kind, x in self.fn.output_refs:
            if kind == "value":
                shape, dtype = self.out_avals[x]
                results.append(_to_functional(wrap(_output_value(shape, dtype, device, outs[x], mesh))))
            elif kind == "input":
                results.append(args[self.tensor_args[x]])
            elif kind == "alias":
                results.append(_to_functional(wrap(values[x])))
            elif kind == "view":
                results.append(_to_functional(wrap(_lazy_view(values[x[0]], x[1], device))))
            else:
                results.append(x)
        return results

    def _run_program(self, values, device, on_mesh):
        """(mutated, outputs) of the program on `device` (`on_mesh`, under SPMD: over the mesh
        its arguments are laid out on, if any is)."""
        fused = self._fuse_pending(values, device, on_mesh)
        layout = None if fused is None else fused[1]
        donors = self._donors(values)
        seeds = self._scalars(device)
        if self.mutated:
            free = self._donatable(values, device)
            args_d = tuple(values[i].data if i in free else jnp.copy(values[i].data)
                           for i in self.mutated)
        else:
            args_d = ()
        args_d += tuple(values[i].data for i in donors)
        buffers = self._buffers(values, donors)
        args_k = tuple(values[i].data for i in buffers)
        lazy_args = () if fused is None else fused[0].args[1:]
        laid_out = _on_mesh(args_d + args_k, self.fn.shardings) if on_mesh else None
        if laid_out is not None:
            placed, layout = laid_out, (layout, tuple(spmd.layout(a.sharding) for a in laid_out))
            args_d, args_k = placed[:len(args_d)], placed[len(args_d):]
        args = (args_d, args_k, seeds, lazy_args)
        found = self.programs.get((device, layout, donors))
        key = (self.key, device, layout, donors)
        if found is not None and runner.is_cached(found[0]):
            program = found[0]
        else:
            placement = runner.OnMesh(None) if laid_out is not None else runner.on_device(device)
            program = self._compile(values, args, buffers, donors, key, placement, fused)
            self.programs.put((device, layout, donors), program)
        if graph_save.enabled():
            graph_save.save_captured_run(key, self.fn.gm, program, device)
        return runner.execute(program, *args)

    def _mark_inputs(self, values):
        """The graph's inputs it gives a sharding (mark_sharding of an input) laid out so,
        in place, before it runs."""
        materialize([v for v in values if v.node is not None])
        for i, s in self.fn.input_marks:
            spmd.shard_data(values[i], s)

    def _buffers(self, values, donors):
        """The inputs the graph only reads passed as buffers (not pending, not donated)."""
        return [i for i in self.kept if values[i].node is None and i not in donors]

    def _donors(self, values):
        """The inputs the graph only reads that users marked for donation and an output of
        their shape and dtype can take (XLA ignores the rest), read once by the program, by
        no pending computation, and no result of the graph is."""
        if not donation.any_marked():
            return ()
        marked = [i for i in self.kept if values[i].node is None and i not in self.returned
                  and donation.is_donor(values[i].data)]
        if not marked:
            return ()
        outputs = collections.Counter(self.out_avals)
        inputs = collections.Counter(id(v.data) for v in values)
        pending = _read_by_pending(live_tensors(values[marked[0]].device))
        donors = []
        for i in marked:
            if outputs[self.avals[i]] and inputs[id(values[i].data)] == 1 \
                    and id(values[i].data) not in pending:
                outputs[self.avals[i]] -= 1
                donors.append(i)
        return tuple(donors)

    def _scalars(self, device):
        """The program's scalar parameters: a fresh seed for each of its random ops, then the
        graph's Python scalars."""
        return tuple(rng.next_seed(device) for _ in range(self.fn.n_rng)) + self.constants

    def _run_replicated(self, values, device):
        """(mutated, outputs) of a graph holding collectives: one program over every replica
        (`replicated`), each replica's inputs its blocks. Nothing is donated (the replicas
        must agree on the program) and pending inputs are computed first."""
        materialize([v for v in values if v.node is not None])
        fn, n_mutated = self.fn, len(self.mutated)
        seeds = self._scalars(device)

        def program(donated, kept, scalars):
            mutated, outs = fn(kept, scalars)
            return (*mutated, *outs)
        shapes = [self.avals[i][0] for i in self.mutated] + [shape for shape, _ in self.out_avals]
        call = replicated.Call(("captured", self.key), program, ((), tuple(v.data for v in values), seeds),
                               shapes)
        outs = replicated.run(device, call)
        return tuple(outs[:n_mutated]), tuple(outs[n_mutated:])

    def _write_inputs(self, args, mutated, device):
        """Gives each input the graph wrote its new value (a CPU scalar the graph computes
        from CPU scalars gets it from the host); per input, the XLATensors now holding it
        (id -> weak reference; tensors do not hash)."""
        on_host = {i: self._host_value(i, args) for i in self.on_host
                   if not isinstance(args[self.tensor_args[i]], XLATensor)
                   and args[self.tensor_args[i]].device.type == "cpu"} if self.on_host else {}
        owners = {}
        for i, pos, data in zip(self.mutated, self.mutated_args, mutated):
            shape, dtype = self.avals[i]
            value = Value(shape, dtype, device, data=data)
            if i in on_host:
                with torch.no_grad():
                    args[pos].copy_(on_host[i])
                owners[i] = {}
            else:
                owners[i] = {id(t): weakref.ref(t) for t in _write_back(args[pos], value)}
        return owners

    def _donatable(self, values, device):
        """The mutated inputs whose buffers the program may take: marked for donation, or
        every live tensor holding one took it from this graph's last write (an alias the user
        made since holds it too, and then it stays); no pending computation reads it, no
        other input is it."""
        marked = {i for i in self.mutated if donation.is_donor(values[i].data)} \
            if donation.any_marked() else set()
        if not self.owners and not marked:
            return set()
        live = live_tensors(device)
        buffers = {id(values[i].data): i for i in self.mutated if i in self.owners and i not in marked}
        foreign = _read_by_pending(live)
        for t in live:
            i = buffers.get(id(t._value.data))
            if i is not None:
                owner = self.owners[i].get(id(t))
                if owner is None or owner() is not t:
                    foreign.add(id(t._value.data))
        inputs = collections.Counter(id(v.data) for v in values)
        return {i for i in self.mutated if (i in self.owners or i in marked)
                and id(values[i].data) not in foreign and inputs[id(values[i].data)] == 1}

    def _host_value(self, i, args):
        """The new value of mutated input `i` (a CPU scalar), computed on the host from the
        inputs' values before the write."""
        nodes, src = self.on_host[i]
        env = {node: args[self.tensor_args[pos]] for node, pos in self.fn.input_nodes.items()}
        for node in nodes:
            env[node] = node.target(*fill_nodes(node.args, env), **fill_nodes(node.kwargs, env))
        return env[src]

    def _fuse_pending(self, values, device, on_mesh):
        """(walk, layout) computing a backward graph's pending arguments inside the program,
        or None; the pending arguments of other graphs, and those whose graph is too large
        (or that the graph writes, or that carry deferred value checks), are materialised
        here first (counted as `DynamoSyncInputExecuteTime`, torch_xla's name), as are all
        over the mesh (`on_mesh`)."""
        pending = [i for i, v in enumerate(values) if v.node is not None]
        if not pending:
            return None
        if self.backward and not (set(pending) & set(self.mutated)) \
                and not has_deferred_checks(device) and not on_mesh:
            w = graph_program.walk([values[i] for i in pending])
            if len(w.order) <= _FUSED_OPS and not w.collective:
                root = {id(v): k for k, v in enumerate(w.roots)}
                return w, (w.key, tuple((i, root[id(values[i])]) for i in pending))
        counters.count("DynamoSyncInputExecuteTime")
        with graph_analysis.reason("torch_xla.sync when dynamo processing input graphs"):
            materialize([values[i] for i in pending])
        return None

    def _compile(self, values, args, buffers, donors, key, placement, fused):
        """The program placed by `placement`, cached under `key`, taking `args` (donated,
        kept, seeds, lazy arguments): the graph's inputs those of `values` it writes and its
        `donors` (donated), then `buffers` (kept), then those `fused` computes from the lazy
        graph."""
        program = runner.lookup(key, placement)
        if program is not None:
            return program
        counters.count("DynamoCompile")
        fn, n, donated = self.fn, len(values), self.mutated + list(donors)
        lazy = None if fused is None else fused[0].program
        computed = {} if fused is None else dict(fused[1][1])  # input -> root of the walk
        leaf_of = {i: k for k, i in enumerate(donated + buffers)}  # input -> argument

        def program_fn(donated_bufs, kept_bufs, seeds, lazy_args):
            leaves = donated_bufs + kept_bufs
            roots = lazy.run_traced((), *lazy_args) if lazy is not None else ()
            inputs = tuple(roots[computed[i]] if i in computed else leaves[leaf_of[i]] for i in range(n))
            return fn(inputs, seeds)

        explanation = graph_analysis.Explanation(
            (n + fn.n_rng + len(fn.constants), len(fn.output_refs)), dynamo=True,
            why_new=lambda: [f"a captured graph of {fn.n_ops} ops ({len(donated)} inputs donated, "
                             f"{len(computed)} computed inside from the lazy graph)"])
        return runner.compile(program_fn, args, placement, key=key, donate=bool(donated),
                              explain=explanation)


def _on_mesh(arrays, shardings):
    """Under SPMD: `arrays` placed on the mesh of the first one laid out over several
    devices, else of the first of the graph's own `shardings` over several (the others, on
    the virtual device, replicated there); None when there is none (on a mesh of one
    device, the program is the virtual device's)."""
    laid = [a.sharding for a in arrays] + list(shardings)
    laid = next((s for s in laid if len(s.device_set) > 1), None)
    if laid is None:
        return None
    everywhere = spmd.replicated(spmd.mesh_of(laid))
    return tuple(spmd.place(a, everywhere) if spmd.is_virtual(a) else a for a in arrays)


def _output_value(shape, dtype, device, data, mesh):
    """An output's value. Under SPMD, one laid out over the mesh keeps the layout it took;
    one of a program on the virtual device whose inputs were laid out on a `mesh` of one
    device is replicated there."""
    value = Value(shape, dtype, device, data=data)
    if len(data.sharding.device_set) > 1:
        value.sharding = data.sharding
    elif mesh is not None:
        value.sharding = spmd.replicated(mesh)
    return value


def _input_mesh(values):
    """Under SPMD, the mesh of the first input laid out on one, or None."""
    for v in values:
        if v.data is not None and not spmd.is_virtual(v.data):
            return spmd.mesh_of(v.data.sharding)
    return None


def _lazy_view(value, steps, device):
    """`value` seen through view ops, recorded lazily (computed by the program that reads it)."""
    for lowering, template, scalars, avals in steps:
        (shape, dtype), = avals
        value = Value(shape, dtype, device, node=Node(lowering, template, (value,), scalars, avals))
    return value


def _host_nodes(src, fn, limit=8):
    """The nodes computing `src` from CPU scalar inputs and numbers only, in order (a
    handful at most), or None if it needs anything else."""
    order, seen = [], set()

    def visit(node):
        if not isinstance(node, torch.fx.Node) or node in seen:
            return True
        seen.add(node)
        val = node.meta.get("val")
        if node.op == "placeholder":
            return (node in fn.input_nodes and isinstance(val, torch.Tensor)
                    and val.device.type == "cpu" and val.dim() == 0)
        if (node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload)
                or not isinstance(val, torch.Tensor) or val.device.type != "cpu" or val.dim() != 0):
            return False
        if not all(visit(a) for a in pytree.tree_leaves((node.args, node.kwargs))):
            return False
        order.append(node)
        return len(order) <= limit
    return order if visit(src) else None


def _has_cpu_tensors(args) -> bool:
    """Whether a tensor argument other than a CPU scalar (which meets any device) is on the
    CPU."""
    return any(isinstance(a, torch.Tensor) and type(a) is not XLATensor and a.device.type == "cpu"
               and a.dim() > 0 for a in args)


def _has_xla_tensors(args) -> bool:
    return any(isinstance(a, torch.Tensor) and a.device.type == "xla" for a in args)


def _warn_of_cpu_tensors(args) -> None:
    """torch_xla's warning of each tensor argument not on an XLA device, but CPU scalars."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type != "xla" and a.dim() > 0:
            warnings.warn(f"Found tensor with shape {a.size()} on {a.device}. Please move all "
                          "tensors to xla device to execute on XLA device.", stacklevel=3)


def _count_ops(gm) -> None:
    """Counts each ATen op of a graph made into a program (`xla::NAME`), as the lazy engine
    counts the ops it is given: once, when the graph is traced, not at each run."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            next(counters.op_counter("xla::" + node.target._schema.name.split("::")[-1]))


def _read_inputs(args, positions):
    """The values of the tensor arguments at `positions` (a CPU tensor as a new buffer on
    their device) and their device."""
    values = [_input_value(args[i]) for i in positions]
    cpu = [k for k, v in enumerate(values) if not isinstance(v, Value)]
    device = _device_of(values)
    for k in cpu:
        values[k] = from_cpu(values[k], device)
    return values, device


def _input_value(t):
    if type(t) is XLATensor:
        return t._value
    if _is_functional(t) and not isinstance(t, FunctionalTensor):
        _sync(t)  # torch._sync without its Python layer (for C++ functional wrappers)
        inner = _from_functional(t)
        if type(inner) is XLATensor:
            return inner._value
    if t.device.type == "xla":
        return unwrap(t)._value
    if t.dim() == 0:
        return t  # a CPU scalar tensor meets tensors on any device, as in PyTorch
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                       f"devices, xla:0 and {t.device}!")


_is_functional, _sync, _from_functional = (torch._is_functional_tensor, torch._functionalize_sync,
                                           torch._from_functional_tensor)


def _device_of(values):
    devices = {v.device for v in values if isinstance(v, Value)}
    if len(devices) > 1:
        a, b = sorted(devices)[:2]
        raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                           f"two devices, xla:{a} and xla:{b}!")
    return devices.pop() if devices else 0


def _read_by_pending(live):
    """ids of the buffers that pending computations of live tensors will read."""
    buffers, seen = set(), set()
    stack = [t._value.node for t in live if t._value.node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for v in node.inputs:
            if v.node is not None:
                stack.append(v.node)
            else:
                buffers.add(id(v.data))
    return buffers


def _write_back(t, value):
    """Gives tensor `t` (an input the graph wrote) its new value; the XLATensors holding it
    then (functionalization keeps the one it was given as its storage's base and one of its
    own as the tensor's current value). A CPU scalar computed from device values gets it
    from the device, which waits for the program."""
    if isinstance(t, XLATensor):
        t._value = value
        return (t,)
    if t.device.type == "cpu":
        with torch.no_grad():
            t.copy_(to_cpu(value))
        return ()
    given = wrap(value)
    torch._functionalize_replace(t, given)
    torch._functionalize_commit_update(t)
    _sync(t)
    return given, _from_functional(t)


_to_functional = torch._to_functional_tensor
