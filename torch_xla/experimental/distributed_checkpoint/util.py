"""Helpers for restoring checkpoints."""
import torch

import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla._lazy.trace import mark_sharding as _sharding


def prime_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """Creates `optimizer`'s state (which exists only after a first step) so that a
    checkpoint can be loaded into it: one step on zero gradients, each sharded as its
    parameter. The step changes the parameters: use it only right before restoring them."""
    torch_xla.sync()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if p.device.type == "xla":
                    _sharding.copy_sharding(p, p.grad)
    optimizer.step()
    torch_xla.sync()
    xm.wait_device_ops()
    return optimizer
