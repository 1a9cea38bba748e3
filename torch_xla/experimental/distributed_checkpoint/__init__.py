"""torch_xla.experimental.distributed_checkpoint: torch.distributed.checkpoint for SPMD.

`dist_cp.save(state_dict, storage_writer=..., planner=SPMDSavePlanner())` writes sharded
tensors shard by shard; `dist_cp.load(..., planner=SPMDLoadPlanner())` reads them back onto
the shardings of the target tensors, on any mesh. `CheckpointManager` keeps per-step
checkpoints (also written in the background); `prime_optimizer` makes an optimizer's state
to load into.
"""
from .manager import CheckpointManager
from .planners import SPMDLoadPlanner, SPMDSavePlanner
from .util import prime_optimizer

__all__ = ["CheckpointManager", "SPMDSavePlanner", "SPMDLoadPlanner", "prime_optimizer"]
