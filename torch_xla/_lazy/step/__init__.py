"""The step: `mark_step`/`torch_xla.sync` running the pending graph (`execution`), the
checks deferred to it (`deferred_checks`) and the errors a run raises (`execution_errors`).

Called by the folders above (hooks, graph_capture, trace) and the public package. Modules here
may import the folders below: inspect, launch, lowering, graph, runtime, base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("execution",)
