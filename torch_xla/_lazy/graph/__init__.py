"""The data model: IR nodes and values (`ir`), XLA tensors (`tensor`), random state (`rng`),
SPMD's layout of values on meshes (`spmd_layout`), dimensions marked unbounded
(`unbounded_dims`) and the dynamic shape detector.

Called by every folder above. Modules here may import only runtime and base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("dynamic_shape_detector", "ir", "rng", "spmd_layout", "tensor", "unbounded_dims")
