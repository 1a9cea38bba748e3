"""The data model: IR nodes and values (`ir`), XLA tensors (`tensor`), random state (`rng`),
SPMD's layout of values on meshes (`spmd_layout`), dimensions marked unbounded
(`unbounded_dims`) and the dynamic shape detector.

Called by every folder above. Modules here may import only runtime and base.
"""
