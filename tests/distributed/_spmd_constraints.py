"""SPMD checks of layouts beyond even mark_sharding: dims that do not divide, `shard_as`,
`annotate_custom_sharding`, the einsum linear (registered into
tests/distributed/_spmd_harness.CHECKS)."""
import copy

import numpy as np
import torch

import torch_xla
import torch_xla._XLAC
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs

from ._spmd_harness import N, check, close, compiles, raises, spec
from tests.compare import ALLCLOSE, EXACT, assert_same


@check
def uneven_data_shards_are_padded():
    """9 rows over 8 devices: shards of 2 rows, the last ones padded (as XLA pads), read
    and loaded back; programs partition the tensor as its sharding says."""
    mesh = xs.Mesh(np.arange(N), (N,), ('x',))
    a = torch.randn(9, 4)
    xa = a.to('xla')
    xt = xs.mark_sharding(xa, mesh, ('x', None))
    assert spec(xa) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    shards = xt.local_shards
    assert [s.data.shape[0] for s in shards] == [2] * N
    assert [s.unpadded_data.shape[0] for s in shards] == [2, 2, 2, 2, 1, 0, 0, 0]
    assert [(s.indices[0].start, s.indices[0].stop) for s in shards][3:6] == [(6, 8), (8, 9), (9, 9)]
    assert all(torch.equal(s.unpadded_data, a[tuple(s.indices)]) for s in shards)
    assert torch.equal(shards[4].data[1:], torch.zeros(1, 4))  # the padding
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([xa * 2])
    assert 'custom_call_target="Sharding", sharding={devices=[8,1]' in hlo, hlo
    assert_same(xa * 2, a * 2, **ALLCLOSE)
    xt.load_local_shards_([xs.XLAShard(s.data * 2, s.indices, s.shard_device, s.replica_id)
                           for s in shards])
    assert_same(xa, a * 2, **ALLCLOSE)
    assert spec(xa) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    xt.load_local_shards_([xs.XLAShard(s.unpadded_data, s.indices, s.shard_device, s.replica_id)
                           for s in shards])  # unpadded blocks do too
    assert_same(xa, a, **ALLCLOSE)
    raises(RuntimeError, lambda: xt.load_local_shards_(
        [xs.XLAShard(torch.zeros(3, 4), s.indices, s.shard_device, s.replica_id) for s in shards]),
        "has shape [3, 4]; this tensor's shards have shape [2, 4]")
    even = xs.mark_sharding(torch.randn(8, 4).to('xla'), mesh, ('x', None))
    raises(RuntimeError, lambda: even.load_local_shards_(
        [xs.XLAShard(s.data.reshape(2, 2), s.indices, s.shard_device, s.replica_id)
         for s in even.local_shards]), "has shape [2, 2]")
    copies = xs.mark_sharding(torch.randn(8, 4).to('xla'), mesh, (None, None))
    raises(RuntimeError, lambda: copies.load_local_shards_(copies.local_shards),
           "needs a sharded tensor")


@check
def uneven_parameters_train_as_on_one_device():
    """A linear layer of 3 outputs, its weight and bias split over 8 devices: the same
    losses as on the CPU, compiled once."""
    mesh = xs.Mesh(np.arange(N), (N,), ('x',))
    torch.manual_seed(4)
    ref = torch.nn.Linear(5, 3)
    model = copy.deepcopy(ref).to('xla')
    xs.mark_sharding(model.weight, mesh, ('x', None))
    xs.mark_sharding(model.bias, mesh, ('x',))
    opt, ref_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
    counts = []
    for _ in range(4):
        x = torch.randn(16, 5)
        ref_loss = ref(x).pow(2).mean()
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        xx = x.to('xla')
        xs.mark_sharding(xx, mesh, ('x', None))
        loss = model(xx).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        xm.mark_step()
        close(loss.item(), ref_loss.item())
        counts.append(compiles())
    assert counts[1] == counts[-1], counts
    assert spec(model.weight) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    assert_same(model.weight, ref.weight, rtol=1e-5, atol=1e-6)


@check
def uneven_batches_from_several_processes_name_the_dim():
    mesh = xs.Mesh(np.arange(N), (2, 4), ('data', 'model'))
    loader = pl.MpDeviceLoader([torch.randn(4, 6)], torch_xla.device(),
                               input_sharding=xs.ShardingSpec(mesh, (None, 'model'), minibatch=True))
    raises(RuntimeError, lambda: next(iter(loader)),
           "cannot shard dim 1 of a tensor of shape [4, 6] over mesh axes 'model' (4 devices)")
    odd = pl.MpDeviceLoader([torch.randn(3, 6)], torch_xla.device(),
                            input_sharding=xs.ShardingSpec(mesh, ('data', None), minibatch=True))
    raises(RuntimeError, lambda: next(iter(odd)), "When minibatch is configured, the per-host "
           "batch size must be divisible by local runtime device count. Per host input data shape")


@check
def shard_as_lays_two_tensors_out_alike():
    """upstream's test_shard_as: y, given no sharding, takes x's."""
    mesh = xs.Mesh(np.arange(N), (N,))
    x = torch.arange(1., 9., device='xla')
    x = xs.mark_sharding_with_gradients(x, mesh, (0,))
    y = torch.arange(1., 9., device='xla')
    x, y = xs.shard_as(x, y)
    torch_xla.sync()
    assert spec(x) == spec(y) == "{devices=[8]0,1,2,3,4,5,6,7}", (spec(x), spec(y))
    assert_same(y, torch.arange(1., 9.), **EXACT)
    # pytrees, None leaves, gradients
    w, v = torch.randn(8, 4), torch.randn(8, 4)
    xw, xv = w.to('xla').requires_grad_(), v.to('xla').requires_grad_()
    xs.mark_sharding(xw, mesh, (0, None))
    (a, none_a), (b, none_b) = xs.shard_as([xw * 2, None], [xv, None])
    assert none_a is None and none_b is None
    (a * b).sum().backward()
    assert_same([xv.grad, xw.grad], [w * 2, 2 * v], **ALLCLOSE)
    raises(AssertionError, lambda: xs.shard_as([xw], (xv,)), "same structure")
    raises(ValueError, lambda: xs.shard_as(xw, torch.ones(4, 8).to('xla')), "shapes must be equal")


@check
def annotate_custom_sharding_constrains_without_resharding():
    """upstream's test_annotate_custom_sharding: the data keeps its layout, the graph gets
    the custom one, and after the step the tensor has it."""
    t = torch.randn(2, 4, 8, 8)
    xt = t.to('xla')
    xs.mark_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 4, 2)), (0, 1, 2, 3))
    original = spec(xt)
    raises(RuntimeError, lambda: xs.mark_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 1, N)), (0, 1, 2, 3)),
           "Existing annotation must be cleared first: {devices=[1,1,4,2]")
    xs.mark_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 4, 2)), (0, 1, 2, 3))  # the same: a no-op
    assert spec(xt) == original
    xs.annotate_custom_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 1, N)), (0, 1, 2, 3))
    custom = spec(xt)
    assert custom == "{devices=[1,1,1,8]0,1,2,3,4,5,6,7}" and custom != original
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([xt])
    assert "parameter(0), sharding={devices=[1,1,4,2]" in hlo, hlo
    assert 'custom_call_target="Sharding", sharding={devices=[1,1,1,8]' in hlo, hlo
    xm.mark_step()
    assert spec(xt) == custom and torch.equal(xt.cpu(), t)
    xs.clear_sharding(xt)  # then it may be resharded
    xs.mark_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 4, 2)), (0, 1, 2, 3))
    assert spec(xt) == original and torch.equal(xt.cpu(), t)
    r = torch.randn(4, 8).to('xla')
    xs.mark_sharding(r, xs.get_1d_mesh(), (None, None))  # replicated: may be resharded
    xs.mark_sharding(r, xs.get_1d_mesh(), (None, 0))
    assert spec(r) == "{devices=[1,8]0,1,2,3,4,5,6,7}"


@check
def einsum_linear_matches_nn_linear():
    """apply_xla_patch_to_nn_linear: the same parameters, the same outputs and gradients as
    nn.Linear on the CPU, with the batch sharded over a 2-D mesh."""
    from torch_xla.distributed.spmd.xla_sharding import EinsumLinear, apply_xla_patch_to_nn_linear
    torch.manual_seed(3)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4, bias=False))
    model = apply_xla_patch_to_nn_linear(copy.deepcopy(cpu).to('xla'))
    assert isinstance(model[0], EinsumLinear) and isinstance(model[2], EinsumLinear)
    assert model[2].bias is None
    mesh = xs.Mesh(np.arange(N), (4, 2), ('data', 'model'))
    xs.mark_sharding(model[0].weight, mesh, ('model', None))
    x = torch.randn(8, 3, 16)
    xx = x.to('xla')
    xs.mark_sharding(xx, mesh, ('data', None, None))
    out = model(xx)
    assert type(out.grad_fn).__name__ == "XLAPatchedLinearBackward"
    out.pow(2).sum().backward()
    cpu(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), cpu.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    y = xs.xla_patched_nn_linear_forward(model[0], xx)
    assert_same(y, torch.nn.functional.linear(x, cpu[0].weight, cpu[0].bias), rtol=1e-5, atol=1e-5)


@check
def op_shardings_pass_layouts_around():
    """torch_xla._XLAC's OpSharding: from a mesh, from a tensor, built from torch_xla's
    arguments, given to tensors (the idiom that lays a gradient out as its parameter)."""
    OpSharding = torch_xla._XLAC.OpSharding
    mesh = xs.Mesh(np.arange(N), (2, 4), ('a', 'b'))
    t = torch.randn(4, 8).to('xla')
    assert torch_xla._XLAC._get_xla_op_sharding(t) is None
    tiled = mesh.get_op_sharding(('a', 'b'))
    torch_xla._XLAC._xla_mark_sharding(t, tiled)
    assert spec(t) == "{devices=[2,4]0,1,2,3,4,5,6,7}" and repr(tiled) == f"OpSharding({spec(t)})"
    assert torch_xla._XLAC._get_xla_op_sharding(t) == tiled
    grad = torch.zeros_like(t)
    torch_xla._XLAC._xla_mark_sharding(grad, torch_xla._XLAC._get_xla_op_sharding(t))
    assert spec(grad) == spec(t)
    assert OpSharding(np.arange(N).reshape(2, 4).tolist(), [], [], xs.ShardingType.TILED) == tiled
    partial = OpSharding(np.arange(N).reshape(2, 4).tolist(), [[0], [1]],
                         [[0, 1, 2, 3], [4, 5, 6, 7]], xs.ShardingType.PARTIAL)
    assert partial == mesh.get_op_sharding(('a', None)) and partial != tiled
    u = torch.randn(4, 8).to('xla')
    torch_xla._XLAC._xla_mark_sharding(u, partial)
    assert spec(u) == "{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}", spec(u)
    assert_same(u + t, u.cpu() + t.cpu(), **ALLCLOSE)
    replicated = OpSharding([], [], [], xs.ShardingType.REPLICATED)
    torch_xla._XLAC._xla_annotate_custom_sharding(u, replicated)
    assert spec(u) == "{replicated}"
    assert torch_xla._XLAC._get_xla_sharding_specs([t, u]) == [spec(t), "{replicated}"]
    raises(ValueError, lambda: OpSharding([], [], [], xs.ShardingType.TUPLE), "type 2")


@check
def global_tensors_from_cpu_shards():
    """_XLAC._global_tensor_from_cpu_shards: one CPU block per device, laid out by an
    OpSharding; the global shape inferred from the tiles or checked when given."""
    from_shards = torch_xla._XLAC._global_tensor_from_cpu_shards
    mesh = xs.Mesh(np.arange(N), (N,))
    tiled = from_shards([torch.tensor([i, 10 * i]) for i in range(N)], mesh.get_op_sharding((0,)))
    assert tiled.shape == (2 * N,) and spec(tiled) == "{devices=[8]0,1,2,3,4,5,6,7}"
    assert tiled.cpu().tolist() == [v for i in range(N) for v in (i, 10 * i)]
    replicated = mesh.get_op_sharding((None,))
    same = [torch.arange(4)] * N
    assert from_shards(same, replicated).cpu().tolist() == [0, 1, 2, 3]
    assert from_shards(same, replicated, torch.Size((4,))).shape == (4,)
    for bad in ((5,), (2, 2)):
        raises(RuntimeError, lambda: from_shards(same, replicated, torch.Size(bad)), "do not make")
    raises(RuntimeError, lambda: from_shards(same[:-1], replicated), "one shard for each")
    # a global shape whose last shards are padding takes the blocks' leading values
    padded = from_shards([torch.tensor([i, 10 * i]) for i in range(N)], mesh.get_op_sharding((0,)),
                         torch.Size((2 * N - 3,)))
    assert padded.cpu().tolist() == [v for i in range(N) for v in (i, 10 * i)][:2 * N - 3]
    assert spec(padded) == "{devices=[8]0,1,2,3,4,5,6,7}"
    for bad in ((3 * N,), (4 * N + 1,)):  # shards of 3 (of 4, padded: 5)
        raises(RuntimeError, lambda: from_shards(same, mesh.get_op_sharding((0,)),
                                                 torch.Size(bad)), "do not make")


@check
def lowering_context_of_sharded_inputs_copies_nothing():
    """A LoweringContext over sharded inputs: their parameters carry their shardings in the
    module, and mapping parameters to XLA tensors moves no data."""
    import torch_xla.debug.metrics as met
    mesh = xs.Mesh(np.arange(N), (N // 2, 2), ('x', 'y'))
    a = torch.randn(32, 64).to('xla')
    xs.mark_sharding(a, mesh, ('x', 'y'))
    b = torch.ones(64).to('xla')
    xs.mark_sharding(b, mesh, ('y',))
    torch_xla.sync()
    ctx = torch_xla._XLAC.lowering.LoweringContext("sharded")
    ctx.build([a + b])
    met.clear_all()
    mapping = ctx.device_parameter_id_tensor_mapping()
    assert sorted(mapping) == [0, 1] and met.metric_data("TransferFromDeviceTime") is None
    assert {ctx.tensor_parameter_id(a), ctx.tensor_parameter_id(b)} == {0, 1}
    assert spec(mapping[ctx.tensor_parameter_id(a)]) == spec(a)
    text = ctx.hlo_text()
    assert text.count('opcode: "parameter"') == 2 and "sharding" in text
    assert_same(mapping[ctx.tensor_parameter_id(b)], torch.ones(64), **EXACT)
