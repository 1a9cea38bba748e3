"""Looking at programs without running them: graph dumps and saved graphs (`graph_dump`,
`graph_save`), torch_xla's `LoweringContext` (`lowering_context`) and XLA's HLO module proto
(`hlo_proto`).

Called by the folders above (hooks, graph_capture, trace, step) and the public package. Modules
here may import the folders below: launch, lowering, graph, runtime, base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("graph_dump", "hlo_proto", "lowering_context")
