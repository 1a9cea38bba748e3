"""torch_xla.distributed.spmd (imported as `xs`): SPMD sharding annotations.

This torch_xla runs one program per replica (xmp.spawn, DataParallel) and has no SPMD mode:
tensors carry no sharding, and XLA's SPMD partitioner is never asked to split a program.
The module exists so that clients which import it unconditionally (transformers' Trainer)
load; each of its names raises `NotImplementedError` when used.
"""

_NAMES = (
    "auto_policy", "XLAShard", "XLAShardedTensor", "Mesh", "HybridMesh", "ShardingType",
    "ShardingSpec", "XLAPatchedLinear", "mark_sharding", "mark_sharding_with_gradients",
    "shard_as", "annotate_custom_sharding", "clear_sharding", "get_1d_mesh", "wrap_if_sharded",
    "xla_distribute_tensor", "xla_distribute_module", "xla_patched_nn_linear_forward",
    "set_global_mesh", "get_global_mesh", "enable_manual_sharding", "disable_manual_sharding",
    "apply_backward_optimization_barrier")


def _unavailable(name):
    def unavailable(*args, **kwargs):
        raise NotImplementedError(
            f"torch_xla.distributed.spmd.{name}: SPMD sharding is not available in this torch_xla "
            f"(one program per replica; use xmp.spawn / torch_xla.launch for data parallelism)")
    unavailable.__name__ = unavailable.__qualname__ = name
    unavailable.__doc__ = f"Not available: raises NotImplementedError (see the module docstring)."
    return unavailable


globals().update({name: _unavailable(name) for name in _NAMES})
__all__ = list(_NAMES)
