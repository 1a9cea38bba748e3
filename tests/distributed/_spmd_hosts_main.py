"""One SPMD training run over 8 devices, in one process or in each of several (hosts on
loopback, joined by jax.distributed through TORCH_XLA_* variables): the same script in
every process. A 4 (data) x 2 (model) Megatron MLP, each process loading its own part of
every batch (`ShardingSpec(minibatch=True)`); then a manual region and a tensor whose dim
does not divide; prints its losses and what it sees."""
import numpy as np
import torch
import torch.nn.functional as F

import torch_xla
import torch_xla._XLAC
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
from tests.distributed._spmd_basic import MLP


def main():
    xr.use_spmd()
    count, index = xr.process_count(), xr.process_index()
    mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (4, 2), ('data', 'model'))
    torch.manual_seed(1)
    model = MLP(mesh).to('xla')
    xs.mark_sharding(model.up.weight, mesh, ('model', None))
    xs.mark_sharding(model.up.bias, mesh, ('model',))
    xs.mark_sharding(model.down.weight, mesh, (None, 'model'))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batches = [(torch.randn(8, 16), torch.randn(8, 16)) for _ in range(4)]
    rows = 8 // count
    mine = [(x[index * rows:(index + 1) * rows], y[index * rows:(index + 1) * rows]) for x, y in batches]
    loader = pl.MpDeviceLoader(mine, torch_xla.device(),
                               input_sharding=xs.ShardingSpec(mesh, ('data', None), minibatch=True))
    for x, y in loader:
        assert x.shape == (8, 16)  # the global batch
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xm.mark_step()
        print("loss", repr(loss.item()), flush=True)
    shards = xs.XLAShardedTensor(model.down.weight).local_shards
    print("devices", " ".join(s.shard_device for s in shards))
    print("weight", repr(model.down.weight.cpu().sum().item()))  # gathered from every process
    # a manual region (one sum per block of 4 rows), and 9 values over 4 (padded shards)
    a = torch.arange(64.).reshape(16, 4).to('xla')
    view = xs.enable_manual_sharding(a, ('data', None), mesh=mesh).global_tensor
    sums = xs.disable_manual_sharding(view.sum().reshape(1, 1), ('data', None), (4, 1), mesh=mesh)
    print("manual", " ".join(repr(x) for x in sums.global_tensor.cpu().flatten().tolist()))
    u = torch.arange(9.).to('xla')
    xs.mark_sharding(u, mesh, ('data',))
    blocks = [s.unpadded_data.tolist() for s in xs.XLAShardedTensor(u).local_shards]
    print("uneven", repr((u * 2).sum().item()), repr(blocks))


if __name__ == "__main__":
    main()
