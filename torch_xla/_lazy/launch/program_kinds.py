"""The three kinds of program a graph runs as, and the one place that chooses between them.

- `ONE_DEVICE`: the graph's program on its device (`graph_program`), the usual case; the
  only kind whose walks `graph_cache` remembers.
- `MESH`: under SPMD (`pjrt.is_spmd()`), every graph is one program over all devices,
  partitioned by XLA (`spmd_program`). xm's collectives do not run there.
- `REPLICAS`: outside SPMD, a graph holding an xm collective is one program over every
  replica's device, each replica giving its blocks (`replica_program`).

`of_walk(w)` is the kind a lazy walk runs as; `choose(collective)` the kind of any graph
(a captured dynamo graph too) by whether it holds a collective. Each kind runs, lowers and
compiles a walk, so that `execution` (running) and `graph_dump` (looking at the program
without running it) take the same path.
"""
from ..runtime import compile_explanation, pjrt, runner
from . import graph_program, spmd_program
from . import replica_program as replicated


class _OneDevice:
    def run(self, w, eager, remember):
        """Runs walk `w`; the `graph_program.Program` that ran (`remember(program)` first,
        when given: `graph_cache`)."""
        return graph_program.launch(w, eager, remember)

    def lowered(self, w):
        return runner.lower(w.program.run_packed, w.call_args)

    def compiled(self, w):
        return graph_program.program_for(w)

    def scalars(self, w):
        return w.call_args[2]


class _Mesh:
    def run(self, w, eager, remember):
        w.finish(spmd_program.run(w, eager))
        return None

    def lowered(self, w):
        return spmd_program.lowered(w)

    def compiled(self, w):
        return spmd_program.compiled(w)

    def scalars(self, w):
        return w.args[2]  # (not packed: the mesh's program takes them one by one)


class _Replicas:
    def run(self, w, eager, remember):
        collectives = tuple(sorted({n.op.name for n in w.order if n.op.collective}))
        call = self._call(w, explain=compile_explanation.of_walk(w), collectives=collectives)
        w.finish(replicated.run(w.device, call))
        return None

    def lowered(self, w):
        return replicated.lowered(self._call(w))

    def compiled(self, w):
        return replicated.compiled(self._call(w))

    def scalars(self, w):
        return w.call_args[2]

    @staticmethod
    def _call(w, **extra):
        """A replica's part of walk `w`'s program, as it runs (`extra`: `Call`'s explanation
        and collectives' names, which a run reports)."""
        return replicated.Call(w.key, w.program.run_traced, w.args, [v.shape for v in w.roots],
                               **extra)


ONE_DEVICE, MESH, REPLICAS = _OneDevice(), _Mesh(), _Replicas()


def choose(collective: bool):
    """The kind of program a graph runs as: over the mesh under SPMD; else over the replicas
    if it holds a collective (`collective`), else on its device. Under SPMD a graph holding
    one of xm's collectives raises: XLA's partitioner inserts the collectives it needs."""
    if pjrt.is_spmd():
        if collective:
            raise RuntimeError("xm collectives do not run under SPMD: XLA's partitioner inserts the "
                               "collectives a sharded program needs (use mark_sharding)")
        return MESH
    return REPLICAS if collective else ONE_DEVICE


def of_walk(w):
    """The kind of program walk `w` runs as."""
    return choose(w.collective)
