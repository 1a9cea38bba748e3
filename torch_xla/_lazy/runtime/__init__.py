"""The runtime under the programs: the runner and its compiled-program cache (`runner`),
PJRT's devices and processes (`pjrt`, `hosts`, `peer_watch`, `device_info`), preemption notices,
the PT_XLA_DEBUG analysis (`graph_analysis`, `compile_explanation`), the persistent cache's
directory check (`directory_trust`) and profile spans (`trace_spans`).

Called by every folder above. Modules here may import only base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("device_info", "graph_analysis", "peer_watch", "pjrt", "preemption", "runner")
