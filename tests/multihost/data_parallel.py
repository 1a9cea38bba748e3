"""Data parallel under torchrun, one process per device: what the runtime says of its
layout (checked against torchrun's variables), then a model trained with xm's collectives
and the same model trained with DistributedDataParallel on the `xla` backend. Rank 0 prints
one RESULT line (JSON): both runs' global losses per step; every rank prints its layout.
Run the same on 2 hosts x 4 processes and 1 host x 8: the losses must agree."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_backend  # noqa: F401  (the 'xla' backend)
import torch_xla.runtime as xr
from tests.multihost.report import emit

STEPS, ROWS = 4, 4  # rows of the global batch per replica


def _batches(world):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(world * ROWS, 16, generator=g), torch.randn(world * ROWS, 1, generator=g))
            for _ in range(STEPS)]


def _model(device):
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)


def _layout():
    env = os.environ
    seen = {"process_count": xr.process_count(), "process_index": xr.process_index(),
            "global_runtime_device_count": xr.global_runtime_device_count(),
            "addressable_device_count": xr.addressable_device_count(), "host_index": xr.host_index(),
            "local_process_count": xr.local_process_count(), "world_size": xr.world_size(),
            "global_ordinal": xr.global_ordinal(), "local_ordinal": xr.local_ordinal()}
    world = int(env["WORLD_SIZE"])
    wanted = {"process_count": world, "process_index": int(env["RANK"]),
              "global_runtime_device_count": world, "addressable_device_count": 1,
              "host_index": int(env["GROUP_RANK"]), "local_process_count": int(env["LOCAL_WORLD_SIZE"]),
              "world_size": world, "global_ordinal": int(env["RANK"]), "local_ordinal": int(env["LOCAL_RANK"])}
    emit("LAYOUT", {"seen": seen, "wanted": wanted})
    assert seen == wanted, (seen, wanted)


def _train(model, opt, step_fn, device):
    rank, world = xr.global_ordinal(), xr.world_size()
    losses = []
    for x, y in _batches(world):
        x, y = x[rank * ROWS:(rank + 1) * ROWS].to(device), y[rank * ROWS:(rank + 1) * ROWS].to(device)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        step_fn(opt)
        opt.zero_grad()
        losses.append(xm.all_reduce(xm.REDUCE_SUM, loss.detach(), scale=1.0 / world))
        torch_xla.sync()
    return [v.item() for v in losses]


def main(index):
    device = torch_xla.device()
    _layout()
    model = _model(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xm_losses = _train(model, opt, lambda o: xm.optimizer_step(o), device)
    dist.init_process_group("xla", init_method="xla://")
    ddp = DistributedDataParallel(_model(device), gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ddp_losses = _train(ddp, opt, lambda o: o.step(), device)
    if xr.global_ordinal() == 0:
        emit("RESULT", {"xm": xm_losses, "ddp": ddp_losses})


if __name__ == "__main__":
    torch_xla.launch(main)
