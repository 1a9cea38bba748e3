"""Programs kept by graph hash and run again on other inputs, what torch_xla's first dynamo
bridge does through `_XLAC`: the device-data leaves of a pending graph (its inputs, in the
program's argument order), `warm_up` (the graph compiled, not run, kept under its hash) and
`run` (the kept program on new input buffers, in that order; its outputs are the graph's
roots: the pending values, each once, that are not inputs).
"""
from ..base import counters
from . import graph_program
from ..runtime import runner
from ..graph.ir import Value

_programs = {}  # graph hash -> (compiled Program, its dynamic scalars, device, outputs' avals)


def leaves(values) -> list:
    """The buffers (device-data values) the graph behind `values` reads, in the order the
    program takes them (none donated)."""
    w = graph_program.walk(values)
    return [] if w is None else list(w.leaves)


def warm_up(graph_hash, values) -> None:
    """Compiles the program of the graph behind `values` (without running it) and keeps it
    under `graph_hash`."""
    w = graph_program.walk(values)
    if w is None:
        return
    _programs[graph_hash] = (graph_program.program_for(w), w.args[2], w.device,
                             [(v.shape, v.dtype) for v in w.roots])


def run(graph_hash, inputs) -> list:
    """The outputs (values) of the program kept under `graph_hash` on `inputs`, values with
    buffers (computed by the caller) in the order `leaves` gave; KeyError if no graph was
    warmed up under it."""
    if graph_hash not in _programs:
        raise KeyError(f"no program was warmed up (_xla_warm_up_cache) for graph hash {graph_hash!r}")
    program, scalars, device, avals = _programs[graph_hash]
    counters.sample("RunCachedGraphInputData", len(inputs))
    outputs = runner.execute(program, (), tuple(v.data for v in inputs),
                             program.pack_on(scalars, device))
    counters.sample("RunCachedGraphOutputData", len(outputs))
    return [Value(shape, dtype, device, data=o) for (shape, dtype), o in zip(avals, outputs)]
