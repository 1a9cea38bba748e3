"""SPMD over every device of the runtime (one process per host under torchrun, each with its
CPU_NUM_DEVICES devices): an MLP trained with FSDPv2 over a global 'fsdp' mesh, each host's
loader giving only its own rows of every batch (MpDeviceLoader with input_sharding). The
same on 1 host x 8 gives the same losses.

  --steps S      train until step S (each step's batch depends on its index only)
  --hybrid       then check a HybridMesh (its 'dcn' axis across the hosts) and train the
                 model again with HSDP: data parallel over 'dcn', FSDP over 'fsdp'
  --ckpt DIR     a CheckpointManager at DIR: resume from its last step, if any (checking
                 the restored values against those saved with it), save after every step
  --announce     emit STEP {"step": k} before each step (a driver kills a host then)

Rank 0 prints one RESULT line (JSON) at the end."""
import argparse
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import torch_xla
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.experimental.distributed_checkpoint as xc
import torch_xla.runtime as xr
from tests.multihost.report import emit
from torch_xla._lazy.runtime import pjrt
from torch_xla.experimental.spmd_fully_sharded_data_parallel import \
    SpmdFullyShardedDataParallel as FSDPv2

BATCH, DIM = 16, 16


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(DIM, 64), nn.Linear(64, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


def _batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH, DIM, generator=g), torch.randn(BATCH, DIM, generator=g)


def _host_rows(step):
    """This process's own rows of step's batch: all that its loader ever sees."""
    count, index = xr.process_count(), xr.process_index()
    rows = BATCH // count
    return tuple(t[index * rows:(index + 1) * rows] for t in _batch(step))


def _check_local_part(x, step, batch_axes):
    """The device batch is global, and this host's devices hold exactly the rows it loaded."""
    assert x.shape == (BATCH, DIM), x.shape
    shards = xs.XLAShardedTensor(x).local_shards
    held = torch.cat([s.data for s in sorted(shards, key=lambda s: s.indices[0].start)])
    assert torch.equal(held, _host_rows(step)[0]), (batch_axes, held.shape)


def _model(mesh):
    torch.manual_seed(11)
    model = FSDPv2(MLP().to("xla"), mesh=mesh, extra_data_axis="dcn" if "dcn" in mesh.axis_names else None)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _values(model, opt):
    out = {f"model.{k}": v.cpu() for k, v in model.state_dict().items()}
    for i, state in opt.state_dict()["state"].items():
        out.update({f"optim.{i}.{k}": v.cpu().clone() for k, v in state.items()})
    return out


def _train(mesh, steps, batch_axes, manager=None, announce=False):
    model, opt = _model(mesh)
    start, restored = 0, None
    if manager is not None and manager.all_steps():
        last = max(manager.all_steps())
        xc.prime_optimizer(opt)
        state = {"model": model.state_dict(), "optim": opt.state_dict()}
        manager.restore(last, state)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        expected = torch.load(f"{manager.base_path.rstrip('/')}.expected/{last}.pt")
        got = _values(model, opt)
        assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got), \
            "restored values differ from those saved"
        start, restored = last + 1, last
    sharding = xs.ShardingSpec(mesh, (batch_axes, None), minibatch=True)
    loader = pl.MpDeviceLoader([_host_rows(s) for s in range(start, steps)], torch_xla.device(),
                               input_sharding=sharding)
    losses = []
    for step, (x, y) in zip(range(start, steps), loader):
        if announce:
            emit("STEP", {"step": step})
        _check_local_part(x, step, batch_axes)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        losses.append(loss.item())
        if manager is not None:
            manager.save(step, {"model": model.state_dict(), "optim": opt.state_dict()}, force=True)
            values = _values(model, opt)
            if xr.process_index() == 0:
                os.makedirs(f"{manager.base_path.rstrip('/')}.expected", exist_ok=True)
                torch.save(values, f"{manager.base_path.rstrip('/')}.expected/{step}.pt")
            dist.barrier()
    return losses, restored


def _hybrid_rows(mesh):
    """The processes whose devices make each 'dcn' row of a hybrid mesh."""
    devices = pjrt.global_devices()  # the mesh's device ids index these
    return [sorted({devices[int(i)].process_index for i in row.flatten()})
            for row in mesh.get_logical_mesh()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--hybrid", action="store_true")
    parser.add_argument("--ckpt")
    parser.add_argument("--announce", action="store_true")
    args = parser.parse_args()
    xr.use_spmd()
    dist.init_process_group("gloo")  # for the checkpoints (torchrun's store)
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n,), ("fsdp",))
    manager = xc.CheckpointManager(args.ckpt, save_interval=1, chkpt_on_preemption=False) if args.ckpt else None
    losses, restored = _train(mesh, args.steps, "fsdp", manager, args.announce)
    result = {"fsdp": losses, "restored": restored, "hosts": xr.process_count(), "devices": n}
    if args.hybrid:
        hosts = xr.process_count()
        hybrid = xs.HybridMesh(ici_mesh_shape=(1, n // hosts), dcn_mesh_shape=(hosts, 1),
                               axis_names=("dcn", "fsdp"))
        result["dcn_rows"] = _hybrid_rows(hybrid)
        result["hsdp"], _ = _train(hybrid, args.steps, ("dcn", "fsdp"))
    if xr.process_index() == 0:
        emit("RESULT", result)


if __name__ == "__main__":
    main()
