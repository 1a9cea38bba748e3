"""Sharding constraints inside the graph: `mark_sharding` of a pending value, `shard_as`.

Not ATen ops: the engine's sharding front (`_lazy/trace/mark_sharding`) records them, a jax sharding
as a static argument (part of the node's key). Their lowerings are jax's
`with_sharding_constraint` and `shard_alike`, which XLA's partitioner honours when it
partitions the program (`_lazy/launch/spmd_program`).
"""
import jax
from jax.experimental.shard_alike import shard_alike

from . import Lowering


def _constrain(x, sharding):
    return jax.lax.with_sharding_constraint(x, sharding)


SHARDING_CONSTRAINT = Lowering("xla::mark_sharding", _constrain, static_scalars=True, rng=False,
                               dynamic_shape=False)


SHARD_ALIKE = Lowering("xla::shard_as", shard_alike, static_scalars=True, rng=False,
                       dynamic_shape=False)
