"""SPMD programs: one jax.jit program over every device, partitioned by XLA.

Under SPMD (`_lazy/graph/spmd_layout`) a step's walk (`graph_program.walk`) becomes one program over a mesh of
all devices: its sharded inputs are global arrays, jit reads their layouts from them, each
root value given a sharding asks for it as its output's layout (`out_shardings`), and XLA's
partitioner (Shardy/GSPMD) splits the program and inserts the collectives. Inputs still on
the virtual device are placed on the mesh, replicated, for the call. A walk that touches no
sharded value runs as an ordinary program on device 0 (`graph_program.program_for`): its values
are the same on every device.

Programs are compiled by the runner (`runner.OnMesh`) and cached per (graph, input layouts,
output layouts), so a steady loop compiles once. Each root value records the layout
its output took.
"""
import jax

from ..runtime import compile_explanation, runner
from ..base import counters
from . import graph_program
from ..graph import spmd_layout as spmd
from . import manual_regions as manual
from ..lowering.jax_call import JAX_CALL
from ..lowering.sharding_constraint import SHARDING_CONSTRAINT


class _Layout:
    """How one walk runs on the mesh: its arguments placed there, the shardings the program
    constrains some of them to first (by argument position: values whose sharding their
    data cannot take, a dim that does not divide), and its output layouts."""
    __slots__ = ("args", "constrained", "out", "key")

    def __init__(self, args, constrained, out, key):
        self.args, self.constrained, self.out, self.key = args, constrained, out, key


def _meshes(w):
    """The meshes the walk's sharded values live on, first found first."""
    found = {}
    donated, kept, _ = w.args
    for a in donated + kept:
        if not spmd.is_virtual(a):
            found.setdefault(spmd.mesh_of(a.sharding), None)
    for node in w.order:
        if node.op is SHARDING_CONSTRAINT:
            found.setdefault(spmd.mesh_of(node.template[0][1]), None)
        elif node.op is JAX_CALL:  # a traced function's own constraints
            for s in node.template[0][0].shardings:
                found.setdefault(spmd.mesh_of(s), None)
        elif node.op is manual.REGION:
            found.setdefault(manual.region_mesh(node), None)
    for v in w.roots:
        if v.sharding is not None and not manual.is_manual(v.sharding):
            found.setdefault(spmd.mesh_of(v.sharding), None)
    return list(found)


def _layout(w):
    """The walk's `_Layout`, or None if it touches no sharded value."""
    meshes = _meshes(w)
    if not meshes:
        return None
    orders = {tuple(m.devices.flat) for m in meshes}
    if len(orders) > 1:
        raise RuntimeError("tensors sharded over meshes with different device orders meet in one "
                           "program; use one device order (Mesh device_ids) for all of them")
    donated, kept, scalars = w.args
    everywhere = spmd.replicated(meshes[0])
    placed = [spmd.place(a, everywhere) if spmd.is_virtual(a) else a for a in donated + kept]
    out = [v.sharding if v.sharding is not None and not manual.is_manual(v.sharding)
           and spmd.fits(v.shape, v.sharding) else None for v in w.roots]
    constrained = _uneven_leaves(w, donated + kept)
    key = (w.key, tuple(spmd.layout(a.sharding) for a in placed),
           tuple(None if s is None else spmd.layout(s) for s in out),
           tuple((i, spmd.layout(s)) for i, s in constrained))
    n = len(donated)
    return _Layout((tuple(placed[:n]), tuple(placed[n:]), scalars), constrained, out, key)


def _uneven_leaves(w, leaves):
    """(position, sharding) of the leaves whose value has a sharding with a dim that does
    not divide (their data is held replicated: `spmd.lay_out`)."""
    wanted = {}
    for node in w.order:
        for v in node.inputs:
            if v.node is None and v.sharding is not None and not spmd.fits(v.shape, v.sharding):
                wanted[id(v.data)] = v.sharding
    if not wanted:
        return ()
    return tuple((i, wanted[id(a)]) for i, a in enumerate(leaves) if id(a) in wanted)


def _program(w, layout):
    """The function the program traces: the walk's, its constrained leaves constrained."""
    if not layout.constrained:
        return w.program.run_traced
    n = len(w.args[0])

    def run(donated, kept, scalars):
        leaves = list(donated + kept)
        for i, s in layout.constrained:
            leaves[i] = jax.lax.with_sharding_constraint(leaves[i], s)
        return w.program.run_traced(tuple(leaves[:n]), tuple(leaves[n:]), scalars)
    return run


def lowered(w):
    """jax's `Lowered` for walk `w` as it would run under SPMD."""
    layout = _layout(w)
    if layout is None:
        return runner.lower(w.program.run_traced, w.args)
    return runner.lower(_program(w, layout), layout.args, runner.OnMesh(layout.out))


def compiled(w):
    """The compiled program walk `w` runs as under SPMD (compiled now, and cached, if new)."""
    layout = _layout(w)
    if layout is None:
        return graph_program.program_for(w)
    return _compiled(w, layout, "CompileTime")


def _compiled(w, layout, timed_as):
    placement = runner.OnMesh(layout.out)
    found = runner.lookup(layout.key, placement)
    if found is not None:
        return found
    counters.sample("InputOutputAliasCount", w.program.n_donated)
    return runner.compile(_program(w, layout), layout.args, placement, key=layout.key,
                          donate=w.program.n_donated > 0, timed_as=timed_as,
                          explain=compile_explanation.of_walk(w))


def _keep_placed(w, layout):
    """Kept (not donated) leaves placed on the mesh for this call keep their placed data, so
    later programs do not place them again."""
    placed = {id(a): p for a, p in zip(w.args[1], layout.args[1]) if a is not p}
    if not placed:
        return
    for node in w.order:
        for v in node.inputs:
            if v.node is None and id(v.data) in placed:
                v.data = placed[id(v.data)]


def run(w, eager=False):
    """Runs walk `w` (which holds no collective: `program_kinds.choose`) over the mesh (or on
    device 0 if nothing in it is sharded); returns its outputs, each root value recording the
    layout its output took. `eager`: an eager op's program (timed as
    `EagerOpCompileTime`/`EagerOpExecuteTime`)."""
    prefix = "EagerOp" if eager else ""
    layout = _layout(w)
    if layout is None:
        program, args = graph_program.program_for(w, f"{prefix}CompileTime"), w.call_args
    else:
        program, args = _compiled(w, layout, f"{prefix}CompileTime"), layout.args
        _keep_placed(w, layout)
    counters.count("ExecuteReplicated")  # torch_xla's names for a program over the devices
    with counters.timed("ExecuteReplicatedTime"):
        outputs = runner.execute(program, *args, timed_as=f"{prefix}ExecuteTime", span="ExecuteReplicated",
                                 analysed=not prefix)
    if layout is None:
        spmd.computed_on_virtual(w.roots)
    else:
        for v, out in zip(w.roots, outputs):
            if v.sharding is None and not spmd.is_virtual(out):  # (not one XLA left on a device)
                v.sharding = out.sharding
    return outputs

