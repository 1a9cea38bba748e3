"""Tracing: an ATen op on XLA tensors becomes a node of the pending graph.

The dispatch entry (`dispatch`) and what it consults: meta kernels (`meta`), the CPU fallback
(`fallback`), op-by-op runs (`eager`, `eager_fused`), ops with data-dependent sizes
(`dynamic_ops`, `dynamic_sizes`), value checks, ops with an engine meaning (`engine_ops`,
registered on import; `op_rules`), collectives recorded as ops (`collective_ops`), sharding
ops (`mark_sharding`, `op_sharding`), jax functions and loops as nodes (`jax_functions`,
`traced`, `loops`), optimization barriers and ready callbacks.

Called by hooks, graph_capture and the public package. Modules here may import the folders
below: step, inspect, launch, lowering, graph, runtime, base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("collective_ops", "dynamic_sizes", "eager", "jax_functions", "loops", "mark_sharding",
           "op_rules", "op_sharding", "optimization_barrier", "ready", "traced")
