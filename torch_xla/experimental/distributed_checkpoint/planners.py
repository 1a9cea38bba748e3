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

from torch_xla.distributed.spmd import XLAShard, XLAShardedTensor

from ._helpers import _CpuShards, _global, _is_sharded_tensor, _is_xla


def _offsets(shard):
    return tuple(s.start for s in shard.indices)


class SPMDSavePlanner(DefaultSavePlanner):
    """Writes sharded XLA tensors shard by shard (see the module docstring); also writes a
    state read to the host beforehand (`_sharded_cpu_state_dict`). After `set_up_planner`,
    `sharded_state_dict` holds the flattened state's sharded tensors (as `_CpuShards`) and
    `unsharded_state_dict` the others (on the CPU)."""

    def set_up_planner(self, state_dict, storage_meta=None, is_coordinator=False) -> None:
        super().set_up_planner(state_dict, storage_meta, is_coordinator)
        self.sharded_state_dict, self._blocks, plain = {}, {}, {}
        for fqn, obj in self.state_dict.items():
            obj = _global(obj)
            if isinstance(obj, _CpuShards):
                self.sharded_state_dict[fqn] = obj
            elif _is_sharded_tensor(obj):
                self.sharded_state_dict[fqn] = _CpuShards.of(obj)
            else:
                plain[fqn] = obj.detach().cpu() if _is_xla(obj) else obj
        self.state_dict = self.unsharded_state_dict = plain

    def create_local_plan(self):
        plan = super().create_local_plan()
        items = []
        for fqn, t in self.sharded_state_dict.items():
            for shard, position in zip(t.shards, t.positions):
                offsets, block = torch.Size(_offsets(shard)), shard.data
                self._blocks[(fqn, tuple(offsets))] = block
                items.append(WriteItem(  # (index: the block's place among the local shards)
                    index=MetadataIndex(fqn, offsets, position), type=WriteItemType.SHARD,
                    tensor_data=TensorWriteData(
                        chunk=ChunkStorageMetadata(offsets=offsets, sizes=block.shape),
                        properties=TensorProperties.create_from_tensor(block), size=t.global_shape)))
        self.plan = dataclasses.replace(plan, items=list(plan.items) + items)
        return self.plan

    def resolve_data(self, write_item):
        index = write_item.index
        if index.fqn in self.sharded_state_dict:
            return self._blocks[(index.fqn, tuple(index.offset))]
        return super().resolve_data(write_item)


class SPMDLoadPlanner(DefaultLoadPlanner):
    """Reads sharded XLA tensors shard by shard onto their devices, whatever mesh they were
    saved from (see the module docstring). The tensors of `state_dict` are updated in
    place; load them into the model with `load_state_dict` as usual. After `set_up_planner`,
    `sharded_state_dict` holds the flattened state's sharded tensors and
    `unsharded_state_dict` the others (XLA ones as the CPU buffers read into)."""

    def set_up_planner(self, state_dict, metadata=None, is_coordinator=False) -> None:
        super().set_up_planner(state_dict, metadata, is_coordinator)
        self.sharded_state_dict, self._copied, self._blocks, plain = {}, {}, {}, {}
        for fqn, obj in self.state_dict.items():
            obj = _global(obj)
            if _is_sharded_tensor(obj):
                self.sharded_state_dict[fqn] = obj
            elif _is_xla(obj):
                buffer = torch.empty(obj.shape, dtype=obj.dtype)
                self._copied[fqn] = (obj, buffer)
                plain[fqn] = buffer
            else:
                plain[fqn] = obj
        self.state_dict = self.unsharded_state_dict = plain

    def create_local_plan(self):
        plan = create_default_local_load_plan(self.state_dict, self.metadata, not self.allow_partial_load)
        items = list(plan.items)
        self._shards = {}
        for fqn, t in self.sharded_state_dict.items():
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
            if fqn in self.sharded_state_dict or fqn in self._copied:
                self._left[fqn] = self._left.get(fqn, 0) + 1
        return dataclasses.replace(plan, items=items)

    def lookup_tensor(self, index):
        if index.fqn in self.sharded_state_dict:
            return self._blocks[(index.fqn, tuple(index.offset))]
        return super().lookup_tensor(index)

    def commit_tensor(self, read_item, tensor) -> None:
        fqn = read_item.dest_index.fqn
        if fqn not in self._left:
            return
        self._left[fqn] -= 1
        if self._left[fqn]:
            return
        if fqn in self.sharded_state_dict:
            XLAShardedTensor(self.sharded_state_dict[fqn]).load_local_shards_(
                [XLAShard(self._blocks[(fqn, _offsets(s))], s.indices, s.shard_device, s.replica_id)
                 for s in self._shards[fqn]])
        else:
            target, buffer = self._copied[fqn]
            with torch.no_grad():
                target.copy_(buffer)
