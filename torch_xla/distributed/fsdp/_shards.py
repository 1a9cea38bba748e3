"""How FSDP cuts a parameter into shards and puts it back together, on the replicas' xm
collectives.

A parameter is flattened and zero-padded to a multiple of `world_size * multiple` elements
(or, with `on_dim_0`, padded along dim 0 to a multiple of `world_size` rows and left
unflattened); replica r keeps the r-th of `world_size` equal slices. The full parameter is
the all_gather of the slices with the padding cut off; its gradient comes back as the
reduce_scatter (a sum over the replicas, scaled) of the padded full gradient.
"""
from typing import List, Optional

import torch
import torch.nn.functional as F

import torch_xla.core.xla_model as xm


class ShardLayout:
    """The cut of one parameter of shape `size` over `world_size` replicas."""

    def __init__(self, size: torch.Size, world_size: int, multiple: int, on_dim_0: bool):
        self.size, self.world_size, self.on_dim_0 = torch.Size(size), world_size, on_dim_0
        self.on_dim_0 = on_dim_0 and len(self.size) > 0
        if self.on_dim_0:
            self.padding = -self.size[0] % world_size
        else:
            self.padding = -self.size.numel() % (world_size * multiple)

    def padded(self, full: torch.Tensor) -> torch.Tensor:
        """`full` as the tensor the replicas' shards are slices of (dim 0)."""
        if self.on_dim_0:
            return F.pad(full, [0, 0] * (full.dim() - 1) + [0, self.padding]) if self.padding else full
        flat = full.reshape(-1)
        return F.pad(flat, [0, self.padding]) if self.padding else flat

    def shard(self, full: torch.Tensor, rank: int) -> torch.Tensor:
        padded = self.padded(full)
        rows = padded.size(0) // self.world_size
        return padded[rank * rows:(rank + 1) * rows].clone()

    def unpadded(self, gathered: torch.Tensor) -> torch.Tensor:
        """The parameter from the concatenation of every replica's shard."""
        if self.on_dim_0:
            return gathered[:self.size[0]]
        return gathered[:self.size.numel()].view(self.size)


class Collectives:
    """The all_gather and reduce_scatter of one FSDP instance (its replica groups, layout
    pinning and gradient scaling)."""

    def __init__(self, world_size: int, groups: Optional[List[List[int]]], pin_layout: bool,
                 bucket_size_mb: int):
        self.world_size, self.groups, self.pin_layout = world_size, groups, pin_layout
        self.bucket_size_mb = bucket_size_mb
        self.scale = 1.0 / world_size  # sum over the replicas, then the mean

    def gather(self, shards: List[torch.Tensor]) -> List[torch.Tensor]:
        if self.world_size == 1:
            return [s.clone() for s in shards]
        return [xm.all_gather(s, dim=0, groups=self.groups, pin_layout=self.pin_layout) for s in shards]

    def reduce_scatter(self, padded_grads: List[torch.Tensor]) -> List[torch.Tensor]:
        if self.world_size == 1:
            return [g * self.scale for g in padded_grads]
        if self.bucket_size_mb:
            return xm.reduce_scatter_bucketized(xm.REDUCE_SUM, padded_grads, self.scale, 0, self.world_size,
                                                groups=self.groups, pin_layout=self.pin_layout,
                                                bucket_cap_mb=self.bucket_size_mb)
        return [xm.reduce_scatter(xm.REDUCE_SUM, g, self.scale, 0, self.world_size, groups=self.groups,
                                  pin_layout=self.pin_layout) for g in padded_grads]


def grad_norm(grads: List[torch.Tensor], norm_type: float) -> torch.Tensor:
    """The local part of the gradients' norm: max |g| for inf, else sum |g|^p (to be reduced
    over the replicas before the p-th root)."""
    if norm_type == float("inf"):
        return torch.stack([g.detach().abs().max() for g in grads]).max()
    return torch.stack([g.detach().abs().pow(norm_type).sum() for g in grads]).sum()
