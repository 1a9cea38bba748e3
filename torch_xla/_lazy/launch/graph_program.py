"""Graph to XLA program: collect pending values, key them by structure, compile once.

`walk(values)` walks the graphs behind `values` once in post order and writes the walk
down as a structural key: each node's key and the positions of its inputs, the shapes and
dtypes of the device buffers it reads, which of them are donated, and the products' precision
(`lowering.precision`: a new setting compiles anew). `program_for(walk)` looks the program
up by that key and the device it runs on (`runner.lookup`); on a miss, a Python function
that replays the lowerings is compiled by the runner, placed on that device. Dynamic scalars
are program parameters, one 0-d parameter per distinct value (type and bytes) among them,
made weakly typed again inside the program, as jax types a Python scalar: a graph's
scalars are mostly a few values used many times (a 200-op chain of `y * 1.001 + 0.001`
has 2, a transformer's AdamW step 11 of 224), and a launch pays per argument. Each its
own parameter, the same block of ops repeated compiles to one kernel, which XLA compiles
once; scalars packed into arrays and sliced inside made each repetition's kernel differ
by its slice, and the program took XLA 3 × as long to compile. Which positions share a
value is part of the program's key. A parameter every use of which converts it to float32
first (`Lowering.f32_scalars` on float32 tensors: `x * 0.5 + 1`) is a float32 parameter,
converted on the host: no convert at each use for jax to trace and XLA to compile.
Buffers that no live tensor holds any more (an in-place update replaced them) are donated,
so a step keeps one copy of the model.
"""
import collections
import struct

import numpy as np
import torch

from ..runtime import compile_explanation, runner
from ..base import counters, jax_compat
from . import program_store, scalar_arrays
from ..graph.ir import In, Node, fill_template, node_type
from ..lowering import composite, precision
from ..lowering.replay import call_lowering


class LoweringError(Exception):
    """A lowering raised while its program was traced: node `position` of the walk's order."""

    def __init__(self, position, cause):
        super().__init__(f"op {position}: {type(cause).__name__}: {cause}")
        self.position, self.cause = position, cause


# A Python scalar's type -> the dtype of its program parameter.
SCALAR_DTYPES = {float: np.dtype(np.float64), int: np.dtype(np.int64), bool: np.dtype(np.bool_),
                  complex: np.dtype(np.complex128)}


_STRUCT_CODES = {float: "d", int: "q", bool: "?"}


def _scalar_layout(types):
    """A struct that packs scalars of `types` into their exact bytes (a cheap key for
    `Program.pack_on`), or None with a complex (or other type) among them."""
    codes = [_STRUCT_CODES.get(t) for t in types]
    return None if None in codes else struct.Struct("<" + "".join(codes))


_FLOAT_BYTES = struct.Struct("<d").pack
_F32 = np.dtype(np.float32)


def _identity(s):
    """What makes two scalars one parameter: their type and bytes (0.0 and -0.0 differ, a
    NaN equals itself)."""
    t = type(s)
    if t is float:
        return t, _FLOAT_BYTES(s)
    if t is complex:
        return t, _FLOAT_BYTES(s.real), _FLOAT_BYTES(s.imag)
    return t, s


def scalar_slots(scalars, shared=True):
    """(each scalar's parameter, each parameter's type): one parameter per distinct scalar,
    numbered in order of first use; not `shared`: one per scalar (a program with collectives:
    its replicas' scalars are equal in some places on one replica, elsewhere on another, and
    their programs must be one)."""
    if not shared:
        return tuple(range(len(scalars))), tuple(type(s) for s in scalars)
    numbers, slots, types = {}, [], []
    for s in scalars:
        k = _identity(s)
        n = numbers.get(k)
        if n is None:
            n = numbers[k] = len(types)
            types.append(k[0])
        slots.append(n)
    return tuple(slots), tuple(types)


def parameter_dtypes(plan, leaf_dtypes, slots, types) -> tuple:
    """Each scalar parameter's dtype: its Python type's (`SCALAR_DTYPES`), or float32 for a
    float or int every use of which is by an op converting its Scalars to float32 first
    (`Lowering.f32_scalars`, every tensor in and out float32)."""
    narrow = [t is float or t is int for t in types]
    if not any(narrow):
        return tuple(SCALAR_DTYPES[t] for t in types)
    f32 = torch.float32
    for node_op, _, refs, s0, s1, avals in plan:
        if s0 == s1:
            continue
        if not (node_op.f32_scalars and all(d is f32 for _, d in avals) and all(
                (leaf_dtypes[i] if p < 0 else plan[p][5][i][1]) is f32 for p, i in refs)):
            for n in slots[s0:s1]:
                narrow[n] = False
    return tuple(_F32 if n else SCALAR_DTYPES[t] for n, t in zip(narrow, types))


class Program(runner.Executable):
    """A compiled program and the plan it replays (no references to live values).
    `compiled` takes (donated buffers, kept buffers, one array per distinct scalar: `pack`,
    of `slot_dtypes`)."""
    __slots__ = ("plan", "roots", "n_donated", "slots", "slot_types", "slot_dtypes", "firsts",
                 "scalar_layout", "replay", "placed", "precision", "marked")

    def __init__(self, plan, roots, n_donated, slots=(), slot_types=(), precision=None,
                 slot_dtypes=None):
        super().__init__()
        self.precision = precision  # the products' precision it is compiled under
        self.plan = plan
        self.marked = any(step[0].fn is composite.mark_tensor for step in plan)  # has composites
        self.roots = roots
        self.n_donated = n_donated
        self.slots, self.slot_types = slots, slot_types
        self.slot_dtypes = tuple(SCALAR_DTYPES[t] for t in slot_types) if slot_dtypes is None \
            else slot_dtypes
        self.firsts = tuple(slots.index(n) for n in range(len(slot_types)))
        self.scalar_layout = _scalar_layout([slot_types[n] for n in slots])
        self.replay = None  # graph_cache.Replay, once the program ran from a walk
        self.placed = None  # (the scalars' bytes, their arrays on the device): `pack_on`

    def fits(self, scalars) -> bool:
        """Whether `scalars` share values where this program's parameters are shared."""
        placed = self.placed
        if placed is not None and self.scalar_layout is not None:
            try:
                if self.scalar_layout.pack(*scalars) == placed[0]:
                    return True
            except struct.error:
                pass
        return scalar_slots(scalars) == (self.slots, self.slot_types)

    def pack(self, scalars):
        """The dynamic scalars as the compiled program takes them: a 0-d array for each
        distinct one."""
        with np.errstate(over="ignore"):  # a float beyond float32's range is inf, as in XLA
            return tuple([np.array(scalars[i], d) for i, d in zip(self.firsts, self.slot_dtypes)])

    def pack_on(self, scalars, device):
        """`pack(scalars)` as arrays on XLA device `device` (`scalar_arrays`), kept for the
        next launch: a step's scalars (learning rate, momentum) rarely change, and a launch
        given host arrays copies them in again each time. Reused only for the same bytes."""
        packed = None
        try:
            bits = self.scalar_layout.pack(*scalars)
        except (AttributeError, struct.error):  # complex scalars, or an int beyond int64
            packed = self.pack(scalars)
            bits = tuple([a.tobytes() for a in packed])
        placed = self.placed
        if placed is not None and placed[0] == bits:
            return placed[1]
        packed = self.pack(scalars) if packed is None else packed
        arrays = scalar_arrays.on_device(packed, device)
        self.placed = (bits, arrays)
        return arrays

    def run_packed(self, donated, kept, packed):
        """The program on its scalar parameters, each made weakly typed (bools are not, nor
        float32 ones: float32 tensors are all they meet)."""
        values = [a if t is bool or d is _F32 else jax_compat.convert_weak(a, d)
                  for a, t, d in zip(packed, self.slot_types, self.slot_dtypes)]
        return self.run_traced(donated, kept, [values[n] for n in self.slots])

    def run_traced(self, donated, kept, scalars):
        leaves = donated + kept
        plan = self.plan

        def evaluate(position, env):
            node_op, template, refs, s0, s1, avals = plan[position]
            inputs = [leaves[i] if p < 0 else env[p][i] for p, i in refs]
            try:
                return call_lowering(node_op, template, inputs, scalars[s0:s1], avals)
            except Exception as e:
                raise LoweringError(position, e) from e

        if self.marked:
            env = {}
            composite.run_steps(range(len(plan)), self._parents, self._mark, evaluate, env,
                                entry=lambda x: (x,), value=lambda out: out[0])
        else:
            env = []
            for position in range(len(plan)):
                env.append(evaluate(position, env))
        return [leaves[i] if p < 0 else env[p][i] for p, i in self.roots]

    def _parents(self, position):
        return [p for p, _ in self.plan[position][2] if p >= 0]

    def _mark(self, position):
        node_op, template = self.plan[position][:2]
        if node_op.fn is not composite.mark_tensor:
            return None
        args, kwargs = fill_template(template, (None,), ())  # a mark's arguments are constants
        return composite.mark_of(node_op, args, dict(kwargs))


def _collect(roots):
    """Post-order walk: nodes in topological order, leaf values, and the scalar list."""
    order, node_pos, leaves, leaf_pos = [], {}, [], {}
    stack = [(v.node, False) for v in reversed(roots) if v.node is not None]
    while stack:
        node, expanded = stack.pop()
        nid = id(node)
        if nid in node_pos:
            continue
        if expanded:
            node_pos[nid] = len(order)
            order.append(node)
            continue
        stack.append((node, True))
        for v in reversed(node.inputs):
            if v.node is None:
                if id(v) not in leaf_pos:
                    leaf_pos[id(v)] = None  # position fixed after donation split
                    leaves.append(v)
            elif id(v.node) not in node_pos:
                stack.append((v.node, False))
    return order, node_pos, leaves


class Walk:
    """One program's worth of pending values, ready to compile or to inspect: the nodes in
    topological order, the roots, the structural key, the unjitted program and its
    arguments (donated buffers, kept buffers, scalars), the device it runs on, and whether
    it holds a collective (then it runs over every replica: `_lazy/launch/replica_program`).
    `call_args` are the arguments as the compiled program takes them (scalars packed)."""
    __slots__ = ("order", "roots", "key", "program", "args", "device", "collective", "derived",
                 "pending", "leaves", "free")

    @property
    def call_args(self):
        donated, kept, scalars = self.args
        return donated, kept, self.program.pack(scalars)

    def __init__(self, order, roots, key, program, args, derived=(), collective=None):
        self.order, self.roots, self.key, self.program, self.args = order, roots, key, program, args
        self.device = roots[0].device
        self.collective = any(node.op.collective for node in order) if collective is None else collective
        self.derived = derived
        # For `graph_cache`: the pending values asked for (deduplicated, before the bases
        # left out), the leaf values in argument order, and which of them were not held.
        self.pending = self.leaves = self.free = None

    def finish(self, outputs) -> None:
        """Once the program is launched: each root takes its (future) buffer among `outputs`,
        and each base left out of the outputs (`_derived_bases`) becomes a pending view of the
        output it was left out for."""
        for v, out in zip(self.roots, outputs):
            v.set_data(out)
        for base, op, template, view, key, number in self.derived:
            base.node = Node(op, template, (view,), (), ((base.shape, base.dtype),), key=key,
                             type_number=number)
            base.index = 0


def _leaves_near(root, free, depth=3):
    """The free leaves of `root`'s shape and dtype that `root` may update, by distance: those
    reached through nodes of that shape and dtype, `depth` levels at most (an in-place
    update's functional form reads the old value directly, or a few elementwise ops deep)."""
    aval = (root.shape, root.dtype)
    levels, frontier, seen = [], [root.node], set()
    for _ in range(depth):
        found, deeper = [], []
        for node in frontier:
            for v in node.inputs:
                if v.node is None:
                    if id(v) in free and (v.shape, v.dtype) == aval:
                        found.append(v)
                elif id(v.node) not in seen and v.node.avals[v.index] == aval:
                    seen.add(id(v.node))
                    deeper.append(v.node)
        levels.append(found)
        frontier = deeper
    return levels


def _donation(roots, leaves, held):
    """The leaves donated to the program and the roots in output order.

    Only a buffer an output of the same shape and dtype can reuse is worth donating (XLA
    ignores the rest). jax gives each donated buffer, in order, to the first output of its
    shape and dtype still without one, so each donated leaf is paired with the root that
    updates it (the nearest pairs first: `_leaves_near`), then the rest with roots of their
    shape and dtype, and the paired roots come first, in the donated leaves' order: an
    output written into the buffer of a value read later would make XLA copy that value
    first.
    """
    if held is None:
        return [], roots
    free = {id(v): v for v in leaves if id(v.data) not in held}
    if not free:
        return [], roots
    paired = {}
    near = [_leaves_near(r, free) for r in roots]
    for level in range(len(near[0])):  # the nearest pairs first
        for r, levels in zip(roots, near):
            if id(r) not in paired:
                leaf = next((v for v in levels[level] if id(v) in free), None)
                if leaf is not None:
                    paired[id(r)] = free.pop(id(leaf))
    rest = collections.defaultdict(collections.deque)
    for v in free.values():
        rest[(v.shape, v.dtype)].append(v)
    for r in roots:
        if id(r) not in paired and rest[(r.shape, r.dtype)]:
            paired[id(r)] = rest[(r.shape, r.dtype)].popleft()
    ordered = [r for r in roots if id(r) in paired] + [r for r in roots if id(r) not in paired]
    return [paired[id(r)] for r in ordered if id(r) in paired], ordered


_INVOLUTIONS = {"aten.t_copy.default", "aten.transpose_copy.int"}
_RESHAPES = {"aten.view_copy.default", "aten._unsafe_view.default", "aten.reshape.default",
             "aten._reshape_alias_copy.default"}


def _inverse_template(node, base):
    """The template of `node`'s op that gives `base` back from `node`'s output, or None if
    `node` is no transpose or reshape of `base`."""
    name = node.op.name
    if name in _INVOLUTIONS:
        return node.template
    if name in _RESHAPES:
        return ((In(0), base.shape), ())
    return None


def _derived_bases(roots):
    """The roots less the bases of views among them, and (base, op, template, view, key,
    type) for each base left out: `base` is the view's output transposed or reshaped back
    (by a node of that key and `ir.node_type`, made once the program ran).

    Functionalization keeps the base of every view alive (autograd's weight gradients are
    `t()` of an `mm`, bias gradients a `view` of a `sum`), so both would be outputs, in two
    layouts: XLA would copy one into the other. Left out, a base is computed from its view
    only if it is used (`Walk.finish`).
    """
    index = {id(v): v for v in roots}
    dropped, derived = set(), []
    for v in roots:
        node = v.node
        if id(v) in dropped or not node.inputs:
            continue
        base = node.inputs[0]
        if id(base) not in index or id(base) in dropped or base is v or base.sharding is not None:
            continue
        template = _inverse_template(node, base)
        if template is not None:
            dropped.add(id(base))
            key = Node.key_of(node.op, template, ((base.shape, base.dtype),))
            derived.append((base, node.op, template, v, key, node_type(key)))
    if not derived:
        return roots, ()
    return [v for v in roots if id(v) not in dropped], tuple(derived)


def walk(values, held=None):
    """The `Walk` behind the pending `values` (all on one device), or None if none is pending.

    `held` holds ids of the buffers live tensors refer to; with it, leaves backed by other
    buffers are donated to the program (None: nothing is donated).
    """
    roots, seen = [], set()
    for v in values:
        if v.node is not None and id(v) not in seen:
            seen.add(id(v))
            roots.append(v)
    if not roots:
        return None
    pending = roots
    roots, derived = _derived_bases(roots)
    order, node_pos, leaves = _collect(roots)
    for v in leaves:
        if v.data is None:
            raise v.failure()
    donated, roots = _donation(roots, leaves, held)
    chosen = {id(v) for v in donated}
    kept = [v for v in leaves if id(v) not in chosen]
    leaf_pos = {id(v): i for i, v in enumerate(donated + kept)}

    def ref(v):
        return (-1, leaf_pos[id(v)]) if v.node is None else (node_pos[id(v.node)], v.index)

    plan, scalars, key_nodes = [], [], []
    for node in order:
        refs = tuple(ref(v) for v in node.inputs)
        s0 = len(scalars)
        scalars.extend(node.scalars)
        plan.append((node.op, node.template, refs, s0, len(scalars), node.avals))
        key_nodes.append((node.key, refs))
    root_refs = tuple(ref(v) for v in roots)
    collective = any(node.op.collective for node in order)
    slots = scalar_slots(scalars, shared=not collective)
    key = (precision.setting(), tuple(key_nodes), root_refs, len(donated),
           tuple((v.shape, v.dtype) for v in donated), tuple((v.shape, v.dtype) for v in kept),
           slots)
    args = (tuple(v.data for v in donated), tuple(v.data for v in kept), tuple(scalars))
    plan = tuple(plan)
    dtypes = parameter_dtypes(plan, [v.dtype for v in donated + kept], *slots) if scalars else ()
    program = Program(plan, root_refs, len(donated), *slots, key[0], dtypes)
    w = Walk(order, roots, key, program, args, derived, collective)
    w.pending, w.leaves = pending, donated + kept
    w.free = tuple(held is not None and id(v.data) not in held for v in w.leaves)
    return w


def dependent_roots(w: Walk, position):
    """The roots of `w` computed from node `position` of its order (or by it)."""
    bad = {position}
    for p, (_, _, refs, _, _, _) in enumerate(w.program.plan[position + 1:], position + 1):
        if any(q in bad for q, _ in refs):
            bad.add(p)
    return [v for v, (p, _) in zip(w.roots, w.program.roots) if p in bad]


def cached(program: Program) -> bool:
    """Whether `program` is still in the runner's cache (marked used if so) and was compiled
    under the products' precision of now (its walk key's first part)."""
    return runner.is_cached(program) and program.precision == precision.setting()


def launch(w: Walk, eager: bool = False, found=None) -> Program:
    """Runs walk `w` on its device (`program_for`, then the runner launches it) and gives its
    roots their buffers (`Walk.finish`); returns the program. `eager`: an eager op's program
    (timed as `EagerOpCompileTime`/`EagerOpExecuteTime`). `found(program)` is called once
    the program is compiled or found, before the walk's values change (`graph_cache.remember`
    for a walk made anew)."""
    program = program_for(w, "EagerOpCompileTime" if eager else "CompileTime")
    if found is not None:
        found(program)
    counters.sample("TensorsGraphSize", len(program.plan))  # the nodes the program replays
    donated, kept, scalars = w.args
    with counters.timed("UnwrapXlaData"):  # the arguments as the program takes them
        packed = program.pack_on(scalars, w.device)
    outputs = runner.execute(program, donated, kept, packed, analysed=not eager,
                             timed_as="EagerOpExecuteTime" if eager else "ExecuteTime")
    with counters.timed("WrapXlaData"):  # the outputs given to their values
        w.finish(outputs)
    return program


def program_for(w: Walk, timed_as: str = "CompileTime") -> Program:
    """The compiled program of walk `w`, cached by the runner per (graph, device). A walk
    made from a cached program's plan (`graph_cache`) comes with its program, used again
    while the runner's cache holds it (else compiled again). A compilation is timed as
    `timed_as`."""
    if w.program.compiled is not None and runner.is_cached(w.program):
        return runner.reused(w.program)
    placement = runner.on_device(w.device)
    key = (w.key, w.device)
    program = runner.lookup(key, placement)
    if program is not None:
        return program
    program = w.program
    counters.sample("InputOutputAliasCount", program.n_donated)  # buffers the program donates
    return runner.compile(program.run_packed, w.call_args, placement, key=key,
                          donate=program.n_donated > 0, executable=program, timed_as=timed_as,
                          explain=compile_explanation.of_walk(w),
                          stored=program_store.entry(key, placement))
