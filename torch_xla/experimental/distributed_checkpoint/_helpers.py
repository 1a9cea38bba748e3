"""What the SPMD planners share: which tensors are sharded, and a state read to the host
with each sharded tensor as the blocks this process writes (`_CpuShards`)."""
import dataclasses
from typing import List

import torch

from torch_xla._lazy.trace import mark_sharding as _sharding
from torch_xla.distributed.spmd import ShardingType, XLAShard, XLAShardedTensor


def _global(obj):
    return obj.global_tensor if isinstance(obj, XLAShardedTensor) else obj


def _is_xla(obj) -> bool:
    return isinstance(obj, torch.Tensor) and obj.device.type == "xla"


def _is_sharded_tensor(obj) -> bool:
    """An XLA tensor split over the devices (not replicated on all of them)."""
    obj = _global(obj)
    return _is_xla(obj) and _sharding.spec_kind(obj) in (
        ShardingType.TILED, ShardingType.PARTIAL)


@dataclasses.dataclass
class _CpuShards:
    """A sharded XLA tensor read to the host for saving: the blocks this process writes, as
    `XLAShard`s on the CPU (one copy of each, padding left out), its global shape, and the
    position of each block among the tensor's `local_shards`."""
    shards: List[XLAShard]
    global_shape: torch.Size
    positions: List[int]

    @staticmethod
    def of(t) -> "_CpuShards":
        shards, positions = [], []
        for i, shard in enumerate(XLAShardedTensor(t).local_shards):
            block = shard.unpadded_data
            if shard.replica_id == 0 and block.numel():  # (a block all padding holds nothing)
                shards.append(XLAShard(block, shard.indices, shard.shard_device, 0))
                positions.append(i)
        return _CpuShards(shards, t.shape, positions)


def _sharded_cpu_state_dict(obj):
    """`obj` (a state_dict, nested) read to the host as `SPMDSavePlanner` writes it: each
    sharded XLA tensor as its `_CpuShards`, each other XLA tensor as a CPU copy, CPU
    tensors cloned. Saving it then touches nothing on the device (a background thread
    writes it while the main thread traces the next steps)."""
    if isinstance(obj, torch.Tensor):
        obj = _global(obj)
        if _is_sharded_tensor(obj):
            return _CpuShards.of(obj)
        return obj.detach().cpu() if _is_xla(obj) else obj.detach().clone()
    if isinstance(obj, dict):
        return type(obj)((k, _sharded_cpu_state_dict(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_sharded_cpu_state_dict(v) for v in obj)
    return obj
