"""SPMD checks of PyTorch's DTensor API on a DeviceMesh of device type 'xla'
(`distribute_tensor`, `distribute_module`), registered into
tests/distributed/_spmd_harness.CHECKS."""
import numpy as np
import torch
from torch.distributed.tensor import Replicate, Shard, distribute_module, distribute_tensor, init_device_mesh

import torch_xla.distributed.spmd as xs
from torch_xla._lazy.base import torch_compat

from ._spmd_harness import N, check, raises, spec
from tests.compare import EXACT, assert_same


@check
def distribute_tensor_shards_over_a_device_mesh():
    mesh = init_device_mesh("xla", mesh_shape=(N,))
    for requires_grad in (True, False):
        t = torch.randn(3 * N, 3, requires_grad=requires_grad, device='xla')
        dt = distribute_tensor(t, mesh, [Shard(0)])
        assert type(dt) is xs.XLAShardedTensor and dt.global_tensor is t
        assert spec(t) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
        assert [s.data.shape for s in dt.local_shards] == [torch.Size([3, 3])] * N
        assert dt.requires_grad == requires_grad and dt.is_leaf
    grid = init_device_mesh("xla", mesh_shape=(4, 2), mesh_dim_names=("dp", "tp"))
    t = torch.randn(8, 4).to('xla')
    distribute_tensor(t, grid, [Replicate(), Shard(0)])
    assert spec(t) == "{devices=[2,1,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}", spec(t)
    both = torch.randn(16, 4).to('xla')
    distribute_tensor(both, grid, [Shard(0), Shard(0)])  # dim 0 over dp, then tp
    assert spec(both) == "{devices=[8,1]0,1,2,3,4,5,6,7}", spec(both)
    replicated = distribute_tensor(torch.randn(4), grid)  # a CPU tensor, moved
    assert replicated.global_tensor.device.type == 'xla' and spec(replicated.global_tensor) == "{replicated}"
    raises(AssertionError, lambda: distribute_tensor(t, grid, [Shard(0)]), "same length")


@check
def distribute_module_partitions_and_hooks():
    mesh = init_device_mesh("xla", mesh_shape=(N,))
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Linear(16, 4)).to('xla')
    seen = []

    def shard_linears(name, module, device_mesh):
        if isinstance(module, torch.nn.Linear):
            distribute_tensor(module.weight, device_mesh, [Shard(0)])

    def inputs(module, args, device_mesh):
        seen.append(("in", args[0].shape))

    def outputs(module, out, device_mesh):
        seen.append(("out", out.shape))
        return out * 2

    model = distribute_module(model, mesh, shard_linears, inputs, outputs)
    assert spec(model[0].weight) == spec(model[1].weight) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    x = torch.randn(2, 4)
    out = model(x.to('xla'))
    assert seen == [("in", torch.Size([2, 4])), ("out", torch.Size([2, 4]))]
    ref = torch.nn.functional.linear(torch.nn.functional.linear(x, model[0].weight.cpu(), model[0].bias.cpu()),
                                     model[1].weight.cpu(), model[1].bias.cpu()) * 2
    assert_same(out, ref, rtol=1e-5, atol=1e-5)
    raises(NotImplementedError, lambda: xs.xla_distribute_module(torch.nn.Linear(2, 2), mesh, xs.auto_policy),
           "auto-sharding")


@check
def sharded_tensors_show_and_change_placements():
    from torch.distributed.tensor.placement_types import Partial
    mesh = xs.Mesh(np.arange(N), (4, 2))
    t = torch.randn(8, 4).to('xla')
    xt = xs.mark_sharding(t, mesh, (1, None))
    assert xt._cached_spec is None
    assert xt.placements == (Replicate(), Shard(0))
    assert xt._cached_spec is not None  # placements are read from the spec, made once
    assert xs.mark_sharding(torch.randn(8, 4).to('xla'), mesh, ((0, 1), None)).placements == (Shard(0), Shard(0))
    moved = xt.redistribute(mesh, [Shard(1), Replicate()])
    assert moved.partition_spec == (None, 0) and moved.placements == (Shard(1), Replicate())
    assert spec(moved.global_tensor) == "{devices=[1,4,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"
    assert_same(moved.global_tensor, t.cpu(), **EXACT)
    raises(ValueError, lambda: xt.redistribute(mesh, [Shard(0)]), "must match mesh dimensions")
    raises(NotImplementedError, lambda: xt.redistribute(mesh, [Partial(), Replicate()]), "Partial")
    raises(IndexError, lambda: xt.redistribute(mesh, [Shard(2), Replicate()]), "out of bounds")
    raises(ValueError, lambda: xs.XLAShardedTensor(t).placements, "mesh_shape and partition_spec")


@check
def sharded_tensors_give_dtensor_their_spec_until_the_layout_changes():
    from torch_xla.distributed.spmd.xla_sharding import wrap_as_sharded_tensor
    mesh = xs.Mesh(np.arange(N), (4, 2))
    xt = xs.mark_sharding(torch.randn(8, 4).to('xla'), mesh, (1, None))
    first = xt._spec
    assert first.mesh.device_type == "xla" and first.mesh.shape == (4, 2)
    assert first.placements == (Replicate(), Shard(0)) and first.tensor_meta.shape == (8, 4)
    assert xt._spec is first and xt._cached_spec is first
    moved = wrap_as_sharded_tensor(xt, mesh_shape=(N,), partition_spec=(None, 0))
    assert moved._spec is not first and moved._spec.placements == (Shard(1),)
    raises(ValueError, lambda: (xt + xt)._spec, "mesh_shape and partition_spec")


@check
def sharded_tensors_are_dtensors_and_a_leaf_of_their_own_gets_gradients():
    from torch.distributed.tensor import DTensor
    if not torch_compat.dtensor_subclasses_dispatch_themselves():
        # torch 2.10 and 2.11 never run the ops on such a leaf in its __torch_dispatch__
        # (they hand DTensor subclasses to DTensor's own dispatch): refused, saying why
        raises(NotImplementedError, lambda: xs.XLAShardedTensor(
            torch.randn(4, 4).to('xla'), requires_grad=True), "pytorch/pytorch#177716")
        return
    leaf = xs.XLAShardedTensor(torch.randn(4, 4).to('xla'), requires_grad=True)
    assert isinstance(leaf, DTensor) and leaf.is_leaf
    (leaf * 3).sum().backward()
    assert type(leaf.grad) is xs.XLAShardedTensor and leaf.grad.shape == leaf.shape
    assert_same(leaf.grad.global_tensor, torch.full((4, 4), 3.0), **EXACT)
