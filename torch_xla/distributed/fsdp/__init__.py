"""torch_xla.distributed.fsdp: the auto-wrap policies FSDP wrappers take (`wrap`) and
gradient checkpointing of wrapped modules (`checkpoint_module`).

Sharded data parallelism here is SPMD's FSDP (FSDPv2,
`torch_xla.experimental.spmd_fully_sharded_data_parallel`); the per-replica
`XlaFullyShardedDataParallel` (FSDPv1) is not part of this torch_xla.
"""
from .utils import checkpoint_module
from .wrap import (always_wrap_policy, lambda_auto_wrap_policy, recursive_wrap,
                   size_based_auto_wrap_policy, transformer_auto_wrap_policy)

__all__ = ["checkpoint_module", "always_wrap_policy", "lambda_auto_wrap_policy", "recursive_wrap",
           "size_based_auto_wrap_policy", "transformer_auto_wrap_policy"]
