"""Sharding constraints inside the graph: `mark_sharding` of a pending value.

Not an ATen op: the engine's sharding front (`_lazy/sharding`) records it, with the jax
sharding as a static argument (part of the node's key). Its lowering is jax's
`with_sharding_constraint`, which XLA's partitioner honours when it partitions the
program (`_lazy/spmd_program`).
"""
import jax

from . import Lowering


def _constrain(x, sharding):
    return jax.lax.with_sharding_constraint(x, sharding)


SHARDING_CONSTRAINT = Lowering("xla::mark_sharding", _constrain, static_scalars=True, rng=False,
                               dynamic_shape=False)
