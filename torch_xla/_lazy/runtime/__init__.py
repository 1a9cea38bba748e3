"""The runtime under the programs: the runner and its compiled-program cache (`runner`),
PJRT's devices and processes (`pjrt`, `hosts`, `peer_watch`, `device_info`), preemption notices,
the PT_XLA_DEBUG analysis (`graph_analysis`, `compile_explanation`), the persistent cache's
directory check (`directory_trust`) and profile spans (`trace_spans`).

Called by every folder above. Modules here may import only base.
"""
