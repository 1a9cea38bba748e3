"""From a graph to a launched program: building it (`graph_program`, `subgraph`), its cache
and its store on disk (`graph_cache`, `program_store`), the choice between the kinds of program
(`program_kinds`) and the kinds beside the one-device one (`spmd_program` over a mesh with
`manual_regions`; `replica_program` over the replicas, with `replica_threads`), and what a launch moves (`transfers`, `donation`, `scalar_arrays`).

Called by the folders above (hooks, graph_capture, trace, step, inspect) and the public
package. Modules here may import the folders below: lowering, graph, runtime, base.
"""
