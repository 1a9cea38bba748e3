"""torch_xla.distributed.fsdp: fully sharded data parallelism over the replicas (FSDPv1,
`XlaFullyShardedDataParallel`), the consolidation of its sharded checkpoints, the auto-wrap
policies FSDP wrappers take (`wrap`) and gradient checkpointing of wrapped modules
(`checkpoint_module`). SPMD's FSDP (FSDPv2) is
`torch_xla.experimental.spmd_fully_sharded_data_parallel`.
"""
from .state_dict_utils import consolidate_sharded_model_checkpoints, consolidate_sharded_state_dicts
from .utils import checkpoint_module
from .wrap import (always_wrap_policy, lambda_auto_wrap_policy, recursive_wrap,
                   size_based_auto_wrap_policy, transformer_auto_wrap_policy)
from .xla_fully_sharded_data_parallel import XlaFullyShardedDataParallel

__all__ = ["XlaFullyShardedDataParallel", "consolidate_sharded_state_dicts",
           "consolidate_sharded_model_checkpoints", "checkpoint_module", "always_wrap_policy",
           "lambda_auto_wrap_policy", "recursive_wrap", "size_based_auto_wrap_policy",
           "transformer_auto_wrap_policy"]
