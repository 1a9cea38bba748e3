"""A step's graph found again without walking it: by its roots' hashes, then checked
against the replay plan of the program compiled for it.

`graph_program.walk` walks a graph in post order and keys it by its whole structure; on a
graph of 200 small ops that costs more than running the program. Every node carries a
hash made as it was built (`ir.Node`: its type and its inputs' hashes), so `lookup`
combines the roots' hashes and finds the program last run for them. A hash can match a
different graph, so the graph is then checked against the program's `Replay`, edge by
edge and with identity tests only, gathering the leaves and scalars on the way: the
checks equal structural keys stand for. A graph that fails them takes the walk.
"""
from . import graph_program
from .program_tables import ProgramTable
from ..runtime import pjrt
from ..lowering import precision

# (device, roots' hash) -> the Program last run for those roots
_table = ProgramTable()


def _pending(values):
    """The pending values among `values` (each once, in order) and their roots' hash: one
    pass, as a step's `mark_step` hands over every live value."""
    pending, seen = [], set()
    h = 0
    for v in values:
        node = v.node
        if node is not None and id(v) not in seen:
            seen.add(id(v))
            pending.append(v)
            h = hash((h, node.hash, v.index))
    return pending, hash((len(pending), h))


class Replay:
    """How to rebuild a program's walk from the pending values it was compiled for: where
    each node is found (a pending value, or an input of a node found before it), the type
    each node must have, the other inputs each node must read (nodes and leaves), the
    leaves' shapes and dtypes and which were free to donate, which pending values are the
    outputs and which bases were left out (`graph_program._derived_bases`). A node's type fixes
    its template, so its number of inputs."""
    __slots__ = ("n_pending", "steps", "node_edges", "leaf_edges", "leaf_checks", "roots",
                 "derived", "scalar_nodes")

    def __init__(self, w):
        order, plan = w.order, w.program.plan
        position = {id(n): p for p, n in enumerate(order)}
        index = {id(v): k for k, v in enumerate(w.pending)}
        self.n_pending = len(w.pending)
        sources = [None] * len(order)
        for k, v in enumerate(w.pending):
            p = position.get(id(v.node))
            if p is not None and sources[p] is None:
                sources[p] = (-1 - k, 0, v.index)
        node_edges, leaf_edges = [], []
        for q, (_, _, refs, _, _, _) in enumerate(plan):
            for j, (p, i) in enumerate(refs):
                if p < 0:
                    leaf_edges.append((q, j, i))
                elif sources[p] is None:
                    sources[p] = (q, j, i)
                else:
                    node_edges.append((q, j, p, i))
        # the nodes from the last one back: (position, where it is found, its type), each
        # found from a pending value or from a node found before it
        self.steps = tuple((p, *sources[p], order[p].type) for p in range(len(order) - 1, -1, -1))
        self.node_edges, self.leaf_edges = tuple(node_edges), tuple(leaf_edges)
        self.leaf_checks = tuple((v.shape, v.dtype, free) for v, free in zip(w.leaves, w.free))
        self.roots = tuple(index[id(v)] for v in w.roots)
        self.derived = tuple((index[id(b)], index[id(v)], op, template, key, number)
                             for b, op, template, v, key, number in w.derived)
        self.scalar_nodes = tuple(p for p, (_, _, _, s0, s1, _) in enumerate(plan) if s1 > s0)

    def match(self, pending, held, program):
        """The walk of `pending` for `program` if they are the graph it was compiled for."""
        if len(pending) != self.n_pending:
            return None
        nodes = [None] * len(self.steps)
        leaves = [None] * len(self.leaf_checks)
        try:
            for p, q, j, i, node_type in self.steps:
                v = pending[-1 - q] if q < 0 else nodes[q].inputs[j]
                node = v.node
                if node is None or node.type != node_type or v.index != i:
                    return None
                nodes[p] = node
            for q, j, p, i in self.node_edges:
                v = nodes[q].inputs[j]
                if v.node is not nodes[p] or v.index != i:
                    return None
            for q, j, i in self.leaf_edges:
                v = nodes[q].inputs[j]
                if v.node is not None:
                    return None
                if leaves[i] is None:
                    leaves[i] = v
                elif leaves[i] is not v:
                    return None
        except IndexError:
            return None
        if None in leaves or len({id(v) for v in leaves}) != len(leaves):
            return None
        for v, (shape, dtype, free) in zip(leaves, self.leaf_checks):
            if v.shape != shape or v.dtype is not dtype:
                return None
            if v.data is None:
                raise v.failure()
            if (held is not None and id(v.data) not in held) is not free:
                return None
        roots = []
        for k, (p, i) in zip(self.roots, program.roots):
            v = pending[k]
            if v.node is not nodes[p] or v.index != i:
                return None
            roots.append(v)
        derived = []
        for b, k, op, template, key, number in self.derived:
            base, view = pending[b], pending[k]
            if view.node.inputs[0] is not base or base.sharding is not None:
                return None
            derived.append((base, op, template, view, key, number))
        scalars = tuple([s for p in self.scalar_nodes for s in nodes[p].scalars])
        if not program.fits(scalars):  # its parameters are shared where these differ
            return None
        n = program.n_donated
        args = (tuple([v.data for v in leaves[:n]]), tuple([v.data for v in leaves[n:]]), scalars)
        return graph_program.Walk(nodes, roots, program.key, program, args, tuple(derived),
                             collective=False)


def lookup(values, held=None):
    """The walk of the pending `values` (one device) made from the plan of the program
    last run for the same roots, or None (then `graph_program.walk`). Only one device's
    programs are remembered (`program_kinds.ONE_DEVICE`): under SPMD none is found."""
    if pjrt.is_spmd():
        return None
    pending, roots_hash = _pending(values)
    if not pending:
        return None
    found = _table.get((pending[0].device, roots_hash))
    program = None if found is None else found[0]
    if program is None or program.precision != precision.setting():
        return None  # (a program the runner's cache dropped since is compiled again)
    return program.replay.match(pending, held, program)


def remember(w, program) -> None:
    """After walk `w` ran as `program` on one device (`program_kinds.ONE_DEVICE` alone
    remembers): later steps with the same roots find it by hash."""
    if w.pending is None:
        return
    if program.replay is None:
        program.replay = Replay(w)
    _table.put((w.device, _pending(w.pending)[1]), program)
