"""torch_xla.experimental.distributed_checkpoint: torch.distributed.checkpoint for SPMD.

`dist_cp.save(state_dict, storage_writer=..., planner=SPMDSavePlanner())` writes sharded
tensors shard by shard; `dist_cp.load(..., planner=SPMDLoadPlanner())` reads them back onto
the shardings of the target tensors, on any mesh.
"""
from .planners import SPMDLoadPlanner, SPMDSavePlanner

__all__ = ["SPMDSavePlanner", "SPMDLoadPlanner"]
