"""torch_xla.distributed.spmd (imported as `xs`): SPMD sharding over jax's meshes.

Under `torch_xla.runtime.use_spmd()` one program runs over every device: tensors are laid
out over a `Mesh` with `mark_sharding`, and XLA's partitioner splits the program and
inserts the collectives (see `torch_xla._lazy.graph.spmd_layout`).
"""
from .xla_sharded_tensor import XLAShard, XLAShardedTensor
from .xla_sharding import (HybridMesh, MarkShardingFunction, Mesh, ShardingSpec, ShardingType,
                           _mark_manual_sharding,
                           annotate_custom_sharding, apply_backward_optimization_barrier,
                           clear_sharding, disable_manual_sharding, enable_manual_sharding,
                           get_1d_mesh, get_global_mesh, mark_sharding,
                           mark_sharding_with_gradients, set_global_mesh, shard_as,
                           wrap_as_sharded_tensor, wrap_if_sharded, XLAPatchedLinear,
                           xla_patched_nn_linear_forward)
from .api import auto_policy, xla_distribute_module, xla_distribute_tensor

__all__ = [
    "XLAShard", "XLAShardedTensor", "Mesh", "HybridMesh", "ShardingType", "ShardingSpec",
    "MarkShardingFunction", "mark_sharding", "mark_sharding_with_gradients", "clear_sharding",
    "get_1d_mesh", "wrap_if_sharded", "wrap_as_sharded_tensor", "set_global_mesh",
    "get_global_mesh", "enable_manual_sharding", "disable_manual_sharding",
    "apply_backward_optimization_barrier", "shard_as", "annotate_custom_sharding",
    "XLAPatchedLinear", "xla_patched_nn_linear_forward", "auto_policy", "xla_distribute_tensor",
    "xla_distribute_module", "_mark_manual_sharding",
]
