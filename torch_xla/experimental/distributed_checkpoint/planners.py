"""torch.distributed.checkpoint planners for SPMD: sharded tensors saved and loaded shard by
shard, so a checkpoint written on one mesh loads onto another.

Saving, each process writes the blocks its devices hold of every sharded tensor (one copy
of each block: the replica 0 of a partially replicated one), as a ShardedTensor's shards
are written; other XLA tensors are written whole from the CPU. Loading reads, for each
sharded tensor, the blocks its devices need (torch's resharding reads work out which saved
chunks overlap them) and loads them onto the devices; other XLA tensors are read on the CPU
and copied in.
"""
import dataclasses
import math

import torch
from torch.distributed.checkpoint.default_planner import (DefaultLoadPlanner, DefaultSavePlanner,
                                                          create_default_local_load_plan)
from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, MetadataIndex,
                                                   TensorProperties)
from torch.distributed.checkpoint.planner import TensorWriteData, WriteItem, WriteItemType
from torch.distributed.checkpoint.planner_helpers import create_read_items_for_chunk_list

from torch_xla._lazy.spmd import mark_sharding as _sharding
from torch_xla.distributed.spmd import ShardingType, XLAShard, XLAShardedTensor


def _global(obj):
    return obj.global_tensor if isinstance(obj, XLAShardedTensor) else obj


def _is_xla(obj) -> bool:
    return isinstance(obj, torch.Tensor) and obj.device.type == "xla"


def _is_sharded(obj) -> bool:
    """An XLA tensor split over the devices (not replicated on all of them)."""
    return _is_xla(obj) and _sharding.spec_kind(obj) in (
        ShardingType.TILED, ShardingType.PARTIAL)


def _offsets(shard):
    return tuple(s.start for s in shard.indices)


@dataclasses.dataclass
class HostShards:
    """A sharded XLA tensor read to the host for saving: its global shape and the blocks
    this process writes, {offsets: CPU tensor} (one copy of each, padding left out)."""
    shape: torch.Size
    blocks: dict

    @staticmethod
    def of(t) -> "HostShards":
        blocks = {}
        for shard in XLAShardedTensor(t).local_shards:
            block = shard.unpadded_data
            if shard.replica_id == 0 and block.numel():  # (a block all padding holds nothing)
                blocks[_offsets(shard)] = block
        return HostShards(t.shape, blocks)


def host_state(obj):
    """`obj` (a state_dict, nested) read to the host as `SPMDSavePlanner` writes it: each
    sharded XLA tensor as its `HostShards`, each other XLA tensor as a CPU copy, CPU
    tensors cloned. Saving it then touches nothing on the device (a background thread
    writes it while the main thread traces the next steps)."""
    if isinstance(obj, torch.Tensor):
        obj = _global(obj)
        if _is_sharded(obj):
            return HostShards.of(obj)
        return obj.detach().cpu() if _is_xla(obj) else obj.detach().clone()
    if isinstance(obj, dict):
        return type(obj)((k, host_state(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(host_state(v) for v in obj)
    return obj


class SPMDSavePlanner(DefaultSavePlanner):
    """Writes sharded XLA tensors shard by shard (see the module docstring); also writes a
    state read to the host beforehand (`host_state`)."""

    def set_up_planner(self, state_dict, storage_meta=None, is_coordinator=False) -> None:
        super().set_up_planner(state_dict, storage_meta, is_coordinator)
        self._sharded, self._blocks, plain = {}, {}, {}
        for fqn, obj in self.state_dict.items():
            obj = _global(obj)
            if isinstance(obj, HostShards):
                self._sharded[fqn] = obj
            elif _is_sharded(obj):
                self._sharded[fqn] = HostShards.of(obj)
            else:
                plain[fqn] = obj.detach().cpu() if _is_xla(obj) else obj
        self.state_dict = plain

    def create_local_plan(self):
        plan = super().create_local_plan()
        items = []
        for fqn, t in self._sharded.items():
            for offsets, block in t.blocks.items():
                offsets = torch.Size(offsets)
                self._blocks[(fqn, tuple(offsets))] = block
                items.append(WriteItem(
                    index=MetadataIndex(fqn, offsets), type=WriteItemType.SHARD,
                    tensor_data=TensorWriteData(
                        chunk=ChunkStorageMetadata(offsets=offsets, sizes=block.shape),
                        properties=TensorProperties.create_from_tensor(block), size=t.shape)))
        self.plan = dataclasses.replace(plan, items=list(plan.items) + items)
        return self.plan

    def resolve_data(self, write_item):
        index = write_item.index
        if index.fqn in self._sharded:
            return self._blocks[(index.fqn, tuple(index.offset))]
        return super().resolve_data(write_item)


class SPMDLoadPlanner(DefaultLoadPlanner):
    """Reads sharded XLA tensors shard by shard onto their devices, whatever mesh they were
    saved from (see the module docstring). The tensors of `state_dict` are updated in
    place; load them into the model with `load_state_dict` as usual."""

    def set_up_planner(self, state_dict, metadata=None, is_coordinator=False) -> None:
        super().set_up_planner(state_dict, metadata, is_coordinator)
        self._sharded, self._copied, self._blocks, plain = {}, {}, {}, {}
        for fqn, obj in self.state_dict.items():
            obj = _global(obj)
            if _is_sharded(obj):
                self._sharded[fqn] = obj
            elif _is_xla(obj):
                buffer = torch.empty(obj.shape, dtype=obj.dtype)
                self._copied[fqn] = (obj, buffer)
                plain[fqn] = buffer
            else:
                plain[fqn] = obj
        self.state_dict = plain

    def create_local_plan(self):
        plan = create_default_local_load_plan(self.state_dict, self.metadata, not self.allow_partial_load)
        items = list(plan.items)
        self._shards = {}
        for fqn, t in self._sharded.items():
            md = self.metadata.state_dict_metadata.get(fqn)
            if md is None:
                if self.allow_partial_load:
                    continue
                raise RuntimeError(f"Missing key in checkpoint state_dict: {fqn}.")
            if md.size != t.size():
                raise ValueError(f"Size mismatch between saved {md.size} and current: "
                                 f"{t.size()} for {fqn}")
            shards = self._shards[fqn] = XLAShardedTensor(t).local_shards
            chunks = {}
            for shard in shards:  # devices holding the same block read it once
                chunks.setdefault(_offsets(shard), shard.unpadded_data.shape)
            for offsets, sizes in chunks.items():
                self._blocks[(fqn, offsets)] = torch.empty(sizes, dtype=t.dtype)
            items += create_read_items_for_chunk_list(
                fqn, md, [ChunkStorageMetadata(torch.Size(o), torch.Size(s))
                          for o, s in chunks.items() if math.prod(s)])  # (not padding only)
        self._left = {}
        for item in items:
            fqn = item.dest_index.fqn
            if fqn in self._sharded or fqn in self._copied:
                self._left[fqn] = self._left.get(fqn, 0) + 1
        return dataclasses.replace(plan, items=items)

    def lookup_tensor(self, index):
        if index.fqn in self._sharded:
            return self._blocks[(index.fqn, tuple(index.offset))]
        return super().lookup_tensor(index)

    def commit_tensor(self, read_item, tensor) -> None:
        fqn = read_item.dest_index.fqn
        if fqn not in self._left:
            return
        self._left[fqn] -= 1
        if self._left[fqn]:
            return
        if fqn in self._sharded:
            XLAShardedTensor(self._sharded[fqn]).load_local_shards_(
                [XLAShard(self._blocks[(fqn, _offsets(s))], s.indices, s.shard_device, s.replica_id)
                 for s in self._shards[fqn]])
        else:
            target, buffer = self._copied[fqn]
            with torch.no_grad():
                target.copy_(buffer)
