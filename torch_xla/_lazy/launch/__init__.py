"""From a graph to a launched program: building it (`graph_program`, `subgraph`), the choice
between the kinds of program (`program_kinds`) and the kinds beside the one-device one
(`spmd_program` over a mesh with `manual_regions`; `replica_program` over the replicas, with
`replica_threads`), and what a launch moves (`transfers`, `donation`, `scalar_arrays`).

Program caching lives here: every table that finds a compiled program again, by a step's
roots (`graph_cache`), by the walk's key (`graph_program.program_for`, over a mesh
`spmd_program`), by an eager op's key (`op_programs`), by a graph hash users warmed up
(`cached_graphs`), and on disk (`program_store`). The programs themselves are held by one
bounded cache, the runner's (`runtime/runner`, below, since every stage compiles through it);
the tables keep none alive (`program_tables.ProgramTable` of weak references, which a
captured dynamo graph's plan in `graph_capture/compiled` keeps too), so what the runner
evicts is compiled again; `cached_graphs` alone keeps what users warmed up.

Called by the folders above (hooks, graph_capture, trace, step, inspect) and the public
package. Modules here may import the folders below: lowering, graph, runtime, base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("cached_graphs", "donation", "replica_threads", "transfers")
