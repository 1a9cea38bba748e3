"""SPMD checks: meshes, shardings, shards, constraints, training on 1-D and 2-D meshes, the
data loader (registered into tests/distributed/_spmd_harness.CHECKS)."""
import copy
import os

import numpy as np
import torch
import torch.nn.functional as F

import torch_xla
import torch_xla._XLAC
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr

from ._spmd_harness import N, check, close, compiles, raises, spec, train_beside_the_cpu
from tests.compare import ALLCLOSE, EXACT, assert_same


@check
def virtual_device():
    assert xr.is_spmd() and xr.global_runtime_device_count() == N
    assert os.environ["XLA_USE_SPMD"] == "1"  # use_spmd() says so to child processes
    assert xr.addressable_device_count() == 1 and xr.addressable_runtime_device_count() == N
    assert torch_xla.devices() == [torch.device("xla:0")] and xr.world_size() == 1
    met.clear_counters()
    torch.ones(3).to('xla')  # uploads arrive on the virtual device, counted
    assert met.counter_value("VirtualDeviceUsage") == 1
    raises(RuntimeError, lambda: xm.xla_device(1), "Invalid XLA device index 1")
    raises(RuntimeError, lambda: torch.ones(2).to("xla:3").cpu(), "no xla:3")
    del os.environ["XLA_USE_SPMD"]  # is_spmd() reads the flag, as torch_xla's does
    try:
        assert not xr.is_spmd()
        assert xr.global_runtime_device_count() == N  # the runtime stays in SPMD mode
        xr.use_spmd()
        assert xr.is_spmd()
    finally:
        os.environ["XLA_USE_SPMD"] = "1"


@check
def saved_graphs_name_their_outputs_shardings():
    """XLA_SAVE_TENSORS_FILE in the hlo format: after an SPMD program's record, each
    output's shape and sharding (torch_xla's `#OUTPUT_SHARDING` block)."""
    import tempfile
    mesh = xs.Mesh(np.arange(N), (1, N))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(XLA_SAVE_TENSORS_FILE=f"{tmp}/graphs", XLA_SAVE_TENSORS_FMT="hlo")
        try:
            x = torch.randn(8, 32).to("xla")
            xs.mark_sharding(x, mesh, (0, 1))
            y = x + 1
            torch_xla.sync()
        finally:
            del os.environ["XLA_SAVE_TENSORS_FILE"], os.environ["XLA_SAVE_TENSORS_FMT"]
        lines = open(f"{tmp}/graphs.0").read().splitlines()
    assert lines[-2] == "#OUTPUT_SHARDING_END", lines[-6:]
    # the shape as XLA's Shape::ToString writes it, without its layout
    assert lines[-4] == f"f32[8,32] {spec(y)}" and "devices=[1,8]" in lines[-4], lines[-6:]
    assert any(line.startswith("HloModule") for line in lines)


@check
def guide_example():
    """The SPMD user guide's example, unchanged, then the shards it promises."""
    num_devices = xr.global_runtime_device_count()
    mesh_shape = (num_devices, 1)
    device_ids = np.array(range(num_devices))
    mesh = xs.Mesh(device_ids, mesh_shape, ('data', 'model'))

    t = torch.randn(8, 4).to('xla')

    # Mesh partitioning, each device holds 1/8-th of the input
    partition_spec = ('data', 'model')
    xs.mark_sharding(t, mesh, partition_spec)

    assert spec(t) == "{devices=[8,1]0,1,2,3,4,5,6,7}", spec(t)
    whole = t.cpu()
    shards = xs.XLAShardedTensor(t).local_shards
    assert [s.shard_device for s in shards] == [f"CPU:{i}" for i in range(N)]
    for i, s in enumerate(shards):
        assert s.data.shape == (1, 4) and s.replica_id == 0
        assert s.indices == [slice(i, i + 1, 1), slice(0, 4, 1)], s.indices
        assert torch.equal(s.data, whole[tuple(s.indices)])
    assert mesh.shape() == {'data': 8, 'model': 1}
    assert mesh.get_logical_mesh().tolist() == [[i] for i in range(N)]


def _linear_steps(mesh, steps, shard):
    """A linear layer trained on sharded inputs; its losses, the CPU's, and the compile
    count after each step."""
    torch.manual_seed(0)
    ref = torch.nn.Linear(32, 10)
    model = torch.nn.Linear(32, 10)
    model.load_state_dict(ref.state_dict())
    model = model.to('xla')
    shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    batches = ((torch.randn(8, 32), torch.randn(8, 10)) for _ in range(steps))  # drawn step by step
    # 4-way data parallel inputs
    return (model, *train_beside_the_cpu(model, opt, ref, ref_opt, batches, F.mse_loss, mesh, (0, None)))


@check
def linear_training_matches_one_device_and_compiles_once():
    """mark_sharding's own example (4-way data parallel, 2-way model parallel weight)
    trained for a few steps."""
    mesh = xs.Mesh(np.array(range(N)), (4, 2), ('x', 'y'))

    def shard(linear):
        xs.mark_sharding(linear.weight, mesh, (None, 1))  # 2-way model parallel
    model, losses, ref_losses, counts = _linear_steps(mesh, 6, shard)
    for a, b in zip(losses, ref_losses):
        close(a, b)
    assert counts[2] == counts[-1], counts  # a steady loop compiles nothing new
    assert spec(model.weight) == "{devices=[1,2,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}", \
        spec(model.weight)
    cached = met.counter_value("CachedCompile")
    model(torch.zeros(8, 32).to('xla')).sum().item()
    model(torch.ones(8, 32).to('xla')).sum().item()
    assert met.counter_value("CachedCompile") > cached


@check
def sharding_specs_print_as_xla_does():
    row = xs.Mesh(np.arange(N), (1, N))
    grid = xs.Mesh(np.arange(N), (2, 4), ('a', 'b'))
    backwards = xs.Mesh(np.arange(N)[::-1], (N,), ('r',))
    cases = [
        (row, (4, 8), (0, 1), "{devices=[1,8]0,1,2,3,4,5,6,7}", xs.ShardingType.TILED),
        (grid, (4, 4), ('a', None), "{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}",
         xs.ShardingType.PARTIAL),
        (grid, (4, 4), (None, 'b'), "{devices=[1,4,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}",
         xs.ShardingType.PARTIAL),
        (grid, (8, 2), (('a', 'b'), None), "{devices=[8,1]0,1,2,3,4,5,6,7}", xs.ShardingType.TILED),
        (backwards, (8,), ('r',), "{devices=[8]7,6,5,4,3,2,1,0}", xs.ShardingType.TILED),
        (grid, (4, 4), (None, None), "{replicated}", xs.ShardingType.REPLICATED),
    ]
    for mesh, shape, partition, text, kind in cases:
        t = torch.randn(shape).to('xla')
        assert spec(t) == "" and torch_xla._XLAC._get_xla_sharding_type(t) is None
        xt = xs.mark_sharding(t, mesh, partition)
        assert spec(t) == text and xt.sharding_spec == text, (partition, spec(t))
        assert xt.sharding_type == kind
        info = torch_xla._XLAC._get_xla_tensor_debug_info(t)
        assert f"XLAShardedData: \n  Data Device: SPMD:0\n" in info, info
        assert f"  OpSharding: {text}\n  NumShards: {N}\n" in info, info
        xs.clear_sharding(t)
        assert spec(t) == ""


@check
def data_stays_on_the_host_until_used_or_laid_out():
    """`.to('xla')` under SPMD keeps the data on the host (a copy: later changes of the CPU
    tensor do not show); mark_sharding then sends each device only its shard, once; a read
    before costs no transfer; a use uploads it; a sync uploads what is still on the host."""
    info = torch_xla._XLAC._get_xla_tensor_debug_info
    met.clear_all()
    cpu = torch.randn(8, 16)
    expected = cpu.clone()
    t = cpu.to('xla')
    cpu.add_(1)
    assert "Tensor on host: with size [8, 16]" in info(t) and "Device: SPMD:0" in info(t)
    assert "XLAData: None" in info(t) and met.counter_value("TransferToDevice") is None
    assert torch.equal(t.cpu(), expected) and met.counter_value("TransferToDevice") is None
    mesh = xs.Mesh(np.arange(N), (1, N))
    xs.mark_sharding(t, mesh, (0, 1))
    assert met.counter_value("TransferToDevice") == 1
    assert met.metric_data("OutboundData")[1] == cpu.nelement() * cpu.element_size()  # shards
    assert "Tensor on host: None" in info(t) and "NumShards: %d" % N in info(t)
    assert "IR: f32[8,16] xla::device_data, xla_shape=f32[8,16]{1,0}, device=SPMD:0" in info(t)
    for shard in xs.wrap_as_sharded_tensor(t).local_shards:
        assert torch.equal(shard.data, expected[tuple(shard.indices)])
    u = torch.arange(6.).to('xla')
    assert torch.equal((u * 2).cpu(), torch.arange(6.) * 2)  # used: uploaded
    assert met.counter_value("TransferToDevice") == 2 and "Tensor on host: None" in info(u)
    assert "xla::device_data" in info(u)  # uploaded for its use
    w = torch.ones(3).to('xla')
    torch_xla.sync()
    assert "Tensor on host: None" in info(w) and met.counter_value("TransferToDevice") == 3


@check
def program_outputs_are_replicated_and_data_tensors_dump_their_sharding():
    """Under SPMD a program's output is replicated ({replicated}, as torch_xla propagates
    output shardings), data only moved to the virtual device has no sharding; the HLO of a
    tensor holding a buffer is its parameter, with its sharding."""
    a, b = torch.randn(4, 4).to('xla'), torch.randn(4, 4).to('xla')
    c = a @ b
    assert torch_xla._XLAC._get_xla_sharding_spec(c) == ""  # pending
    torch_xla.sync()
    assert torch_xla._XLAC._get_xla_sharding_spec(a) == ""
    assert torch_xla._XLAC._get_xla_sharding_spec(c) == "{replicated}"
    assert torch_xla._XLAC._get_xla_sharding_type(c) == xs.ShardingType.REPLICATED.value
    assert "XLAShardedData" in torch_xla._XLAC._get_xla_tensor_debug_info(c)
    mesh = xs.Mesh(np.arange(N), (2, N // 2, 1))
    xs.mark_sharding(a, mesh, (2, 1))
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([a])
    assert f"parameter(0), sharding={{devices=[1,{N // 2},2]" in hlo, hlo
    # written as the tensor's spec writes it: its devices listed, not XLA's iota form
    assert f"parameter(0), sharding={torch_xla._XLAC._get_xla_sharding_spec(a)}" in hlo, hlo
    assert "<=[" not in hlo, hlo


@check
def shards_of_tiled_partial_and_replicated_tensors():
    t = torch.arange(16, dtype=torch.float32)
    xt = xs.mark_sharding(t.to('xla'), xs.get_1d_mesh('x'), ('x',))
    shards = xt.local_shards
    assert [(s.indices, s.replica_id) for s in shards] == \
        [([slice(2 * i, 2 * i + 2, 1)], 0) for i in range(N)]
    assert all(torch.equal(s.data, t[tuple(s.indices)]) for s in shards)
    grid = xs.Mesh(np.arange(N), (2, 4))
    m = torch.arange(16.).reshape(4, 4)
    partial = xs.mark_sharding(m.to('xla'), grid, (0, None)).local_shards
    assert [s.replica_id for s in partial] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert all(torch.equal(s.data, m[tuple(s.indices)]) for s in partial)
    replicated = xs.mark_sharding(m.to('xla'), grid, (None, None)).local_shards
    assert [(s.indices, s.replica_id) for s in replicated] == [(Ellipsis, i) for i in range(N)]
    # loading shards back: each block doubled
    xt = xs.mark_sharding(m.to('xla'), grid, (0, 1))
    xt.load_local_shards_([xs.XLAShard(s.data * 2, s.indices, s.shard_device, s.replica_id)
                           for s in xt.local_shards])
    assert torch.equal(xt.global_tensor.cpu(), m * 2) and spec(xt.global_tensor).startswith("{devices=[2,4]")


@check
def in_place_updates_keep_the_sharding():
    mesh = xs.Mesh(np.arange(N), (1, N))
    xt = torch.ones(2, 8).to('xla')
    xs.mark_sharding(xt, mesh, (0, 1))
    before = spec(xt)
    xt.add_(1)
    assert spec(xt) == before
    assert 'custom_call_target="Sharding", sharding={devices=[1,8]' in \
        torch_xla._XLAC._get_xla_tensors_hlo([xt])
    xt.mul_(3)
    xm.mark_step()
    assert spec(xt) == before and torch.equal(xt.cpu(), torch.full((2, 8), 6.))
    xt.copy_(torch.zeros(2, 8))
    assert spec(xt) == before and torch.equal(xt.cpu(), torch.zeros(2, 8))


@check
def intermediates_take_a_sharding_constraint():
    mesh = xs.Mesh(np.arange(N), (N,), ('x',))
    a = torch.randn(9, 4)
    xa = a.to('xla') * 2  # pending: 9 rows over 8 devices is uneven, fine inside a program
    xs.mark_sharding(xa, mesh, ('x', None))
    assert spec(xa) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    assert_same(xa + 1, a * 2 + 1, **ALLCLOSE)
    xb = a.to('xla') * 3
    xs.mark_sharding(xb, mesh, ('x', None))
    xs.clear_sharding(xb)  # the constraint is gone from the graph
    assert spec(xb) == "" and 'custom_call_target="Sharding"' not in \
        torch_xla._XLAC._get_xla_tensors_hlo([xb])
    # max gives two outputs; only the marked one is constrained
    values, indices = torch.max(torch.randn(8, 8).to('xla'), 1)
    xs.mark_sharding(values, mesh, ('x',))
    assert spec(values) != "" and spec(indices) == ""


@check
def mark_sharding_checks_its_arguments():
    mesh = xs.Mesh(np.arange(N), (2, 4), ('a', 'b'))
    t = torch.ones(4, 4).to('xla')
    raises(AssertionError, lambda: xs.mark_sharding(t, mesh, ('a',)), "Partition spec length")
    raises(ValueError, lambda: xs.mark_sharding(t, mesh, ('a', 'c')), "Axis name c")
    raises(AssertionError, lambda: xs.mark_sharding(t, mesh, ('a', 'a')), "at most once")
    raises(AssertionError, lambda: xs.Mesh(np.arange(4), (4,)), "global number of devices")
    raises(AssertionError, lambda: xs.Mesh(np.arange(N), (4, 4)), "mesh size")


@check
def meshes():
    mesh = xs.Mesh(np.arange(N), (4, 2), ('data', 'model'))
    assert mesh.size() == N and mesh.get_axis_name_idx('model') == 1
    again = xs.Mesh.from_str(str(mesh))
    assert again.mesh_shape == (4, 2) and again.axis_names == ('data', 'model')
    assert again.device_ids.tolist() == list(range(N))
    one = xs.get_1d_mesh('data')
    assert one.mesh_shape == (N,) and one.axis_names == ('data',)
    assert xs.get_global_mesh() is None
    xs.set_global_mesh(mesh)
    assert xs.get_global_mesh() is mesh
    xs.set_global_mesh(None)
    hybrid = xs.HybridMesh(ici_mesh_shape=(2, 4), axis_names=('a', 'b'))
    assert hybrid.shape() == {'a': 2, 'b': 4} and sorted(hybrid.device_ids.tolist()) == list(range(N))
    assert hybrid.get_jax_mesh().shape == {'a': 2, 'b': 4}


@check
def sharded_tensors_wrap_their_results():
    mesh = xs.Mesh(np.arange(N), (1, N))
    t = torch.randn(4, 8).to('xla')
    xt = xs.mark_sharding(t, mesh, (0, 1))
    assert isinstance(xt, xs.XLAShardedTensor) and xt.global_tensor is t
    out = xt * 2
    assert isinstance(out, xs.XLAShardedTensor) and "XLAShardedTensor" in repr(out)
    assert_same(out.global_tensor, t.cpu() * 2, **ALLCLOSE)
    y = torch.matmul(xt, xs.XLAShardedTensor(torch.ones(8, 3).to('xla')))
    assert isinstance(y, xs.XLAShardedTensor)
    assert_same(y.global_tensor, t.cpu().sum(1, keepdim=True).expand(4, 3), **ALLCLOSE)
    before = t.cpu()
    xt.add_(1)  # in place on the wrapper: the global tensor changes
    assert_same(t, before + 1, **ALLCLOSE)
    assert xs.wrap_if_sharded(t).global_tensor is t
    plain = torch.ones(2).to('xla')
    assert xs.wrap_if_sharded(plain) is plain


@check
def sharded_and_plain_tensors_meet_in_ops():
    """An op on an XLAShardedTensor and a plain tensor runs on its global tensor: the result
    is wrapped, an in-place op gives back the tensor it updated, gradients flow."""
    mesh = xs.Mesh(np.arange(N), (1, N))
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    xt, plain = xs.mark_sharding(a.to('xla'), mesh, (0, 1)), b.to('xla')
    for out in (xt + plain, plain + xt, torch.add(plain, xt)):
        assert isinstance(out, xs.XLAShardedTensor) and out.shape == torch.Size([4, 8])
        assert_same(out.global_tensor, a + b, **ALLCLOSE)
    assert plain.add_(xt) is plain
    assert_same(plain, a + b, **ALLCLOSE)
    assert xt.mul_(plain) is xt
    assert_same(xt.global_tensor, a * (a + b), **ALLCLOSE)
    assert type(xt.cpu()) is torch.Tensor and type(xt.sum().item()) is float
    w = torch.randn(4, 8)
    xw = w.to('xla').requires_grad_()
    wt = xs.mark_sharding(xw, mesh, (0, 1))
    loss = (wt * torch.full((4, 8), 3.).to('xla')).sum()
    assert wt.requires_grad and loss.requires_grad
    loss.backward()
    assert_same(xw.grad, torch.full((4, 8), 3.), **ALLCLOSE)


@check
def collectives_are_refused():
    t = torch.ones(4).to('xla')
    raises(RuntimeError, lambda: xm.all_reduce(xm.REDUCE_SUM, t).cpu(), "do not run under SPMD")


class MLP(torch.nn.Module):
    """A 2-layer MLP; with a mesh, its hidden activations are sharded (data, model)."""

    def __init__(self, mesh=None):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)
        self.mesh = mesh

    def forward(self, x):
        h = F.gelu(self.up(x))
        if self.mesh is not None:
            xs.mark_sharding(h, self.mesh, ('data', 'model'))
        return self.down(h)


@check
def megatron_mlp_on_a_2d_mesh():
    """4 (data) x 2 (model): the up projection split by output features, the down
    projection by input features, activations (data, model); AdamW for 5 steps."""
    mesh = xs.Mesh(np.arange(N), (4, 2), ('data', 'model'))
    torch.manual_seed(1)
    ref = MLP()
    model = MLP(mesh)
    model.load_state_dict(ref.state_dict())
    model.to('xla')
    xs.mark_sharding(model.up.weight, mesh, ('model', None))
    xs.mark_sharding(model.up.bias, mesh, ('model',))
    xs.mark_sharding(model.down.weight, mesh, (None, 'model'))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    counts = []
    for step in range(5):
        x, y = torch.randn(8, 16), torch.randn(8, 16)
        xx = x.to('xla')
        xs.mark_sharding(xx, mesh, ('data', None))
        loss = F.mse_loss(model(xx), y.to('xla'))
        loss.backward()
        if step == 4:
            hlo = torch_xla._XLAC._get_xla_tensors_hlo([loss])
            assert 'custom_call_target="Sharding", sharding={devices=[4,2]' in hlo
            os.environ["XLA_DUMP_POST_OPTIMIZATIONS"] = "1"  # the HLO XLA partitioned
            before = compiles()
            try:
                partitioned = torch_xla._XLAC._get_xla_tensors_hlo([loss])
            finally:
                del os.environ["XLA_DUMP_POST_OPTIMIZATIONS"]
            dumped = compiles() - before  # (the loss's own program, compiled to be shown)
            assert dumped == 1, dumped
            # the row-parallel down projection's partial sums meet in an all-reduce
            assert "all-reduce(" in partitioned and "all-reduce(" not in hlo, partitioned[:2000]
        opt.step()
        opt.zero_grad()
        xm.mark_step()
        counts.append(compiles() - (step == 4))
        ref_loss = F.mse_loss(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        close(loss.item(), ref_loss.item())
    assert counts[2] == counts[-1], counts
    for name, p in model.named_parameters():
        assert_same(p, dict(ref.named_parameters())[name].detach(), rtol=1e-5, atol=1e-6)
    # each device holds half of the up projection (and all of it is there)
    shards = xs.XLAShardedTensor(model.up.weight).local_shards
    assert all(s.data.shape == (16, 16) for s in shards)


@check
def mark_sharding_with_gradients_constrains_the_gradient():
    mesh = xs.Mesh(np.arange(N), (N,), ('x',))
    w = torch.randn(8, 4)
    xw = w.to('xla').requires_grad_()
    h = xs.mark_sharding_with_gradients(xw * 3, mesh, ('x', None))
    assert spec(h) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    (h ** 2).sum().backward()
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([xw.grad])
    assert hlo.count('custom_call_target="Sharding"') >= 2, hlo
    assert_same(xw.grad, 18 * w)


@check
def loader_shards_each_batch():
    """MpDeviceLoader(input_sharding=...) puts batches on the devices already sharded; a
    data-parallel loop over it matches the CPU and compiles once."""
    mesh = xs.Mesh(np.arange(N), (N, 1), ('data', 'model'))
    torch.manual_seed(2)
    batches = [(torch.randn(16, 8), torch.randn(16)) for _ in range(5)]
    loader = pl.MpDeviceLoader(batches, torch_xla.device(),
                               input_sharding=xs.ShardingSpec(mesh, ('data', None)))
    ref = torch.nn.Linear(8, 1)
    model = torch.nn.Linear(8, 1)
    model.load_state_dict(ref.state_dict())
    model.to('xla')
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    counts = []
    for (x, y), (cx, cy) in zip(loader, batches):
        assert spec(x) == "{devices=[8,1]0,1,2,3,4,5,6,7}" and spec(y) == ""  # y: rank 1
        loss = F.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_loss = F.mse_loss(ref(cx).squeeze(1), cy)
        ref_loss.backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        xm.mark_step()
        close(loss.item(), ref_loss.item())
        counts.append(compiles())
    assert counts[2] == counts[-1], counts
    by_key = {'x': xs.ShardingSpec(mesh, ('data', None)), 'y': xs.ShardingSpec(mesh, ('data',))}
    dicts = [{'x': torch.randn(16, 8), 'y': torch.randn(16)}]
    batch = next(iter(pl.MpDeviceLoader(dicts, torch_xla.device(), input_sharding=by_key)))
    assert spec(batch['x']) == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    assert spec(batch['y']) == "{devices=[8]0,1,2,3,4,5,6,7}"
    assert_same(batch['y'], dicts[0]['y'], **EXACT)
    raises(KeyError, lambda: next(iter(pl.MpDeviceLoader(
        dicts, torch_xla.device(), input_sharding={'x': by_key['x']}))), "['y'] are missing")
    raises(ValueError, lambda: next(iter(pl.MpDeviceLoader(
        batches, torch_xla.device(), input_sharding=by_key))), "should be a dict")


@check
def the_xla_process_group_is_refused():
    import torch.distributed as dist
    raises(AssertionError, lambda: dist.init_process_group("xla", init_method="xla://"),
           "not supported under SPMD")


@check
def dynamo_mark_sharding_is_mark_sharding_as_an_op():
    t = torch.randn(8, 4).to('xla')
    torch.ops.xla.dynamo_mark_sharding(t, list(range(N)), [N, 1], "('data', 'model')", "(0, None)")
    assert spec(t) == "{devices=[8,1]0,1,2,3,4,5,6,7}", spec(t)

    def fn(x):
        y = x + 1
        torch.ops.xla.dynamo_mark_sharding(y, list(range(N)), [1, N], "None", "(1, 0)")
        return y * 2
    x = torch.randn(8, 8).to('xla')
    torch_xla.sync()
    assert_same(torch.compile(fn, backend="openxla")(x), fn(x).cpu())


@check
def a_compiled_model_trains_over_the_mesh_as_on_the_cpu():
    """torch.compile of a model whose weight is sharded (and inputs laid out on the mesh or
    still on the virtual device): one program over the mesh per graph, the CPU's losses,
    outputs laid out as the program left them, no compilation once the layouts settle."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    model = copy.deepcopy(ref).to("xla")
    mesh = xs.Mesh(np.arange(N), (N, 1), ("data", "model"))
    xs.mark_sharding(model[0].weight, mesh, ("data", None))
    opt, ref_opt = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
    compiled = torch.compile(model, backend="openxla")
    counts = []
    for _ in range(4):
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        xx = x.to("xla")
        xs.mark_sharding(xx, mesh, ("data", None))
        out = compiled(xx)
        assert "XLAShardedData" in torch_xla._XLAC._get_xla_tensor_debug_info(out)
        loss = F.mse_loss(out, y.to("xla"))
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch_xla.sync()
        ref_loss = F.mse_loss(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        close(loss.item(), ref_loss.item())
        counts.append(met.counter_value("DynamoCompile"))
    assert counts[1] == counts[-1], counts
    assert spec(model[0].weight) == "{devices=[8,1]0,1,2,3,4,5,6,7}", spec(model[0].weight)


@check
def mark_sharding_inside_a_compiled_function_is_captured():
    """mark_sharding_with_gradients (an autograd.Function) under torch.compile and under
    AOTAutograd: the graph keeps the annotation as an op, the value and its gradient come
    out laid out as marked, with the CPU's values."""
    from functorch.compile import aot_function, make_boxed_func
    mesh = xs.Mesh(np.arange(N), (N,))

    def fn(x):
        return xs.mark_sharding_with_gradients(torch.sin(x), mesh, (0,)) + 42

    def boxed(gm, _):
        assert any(n.target is torch.ops.xla.dynamo_mark_sharding.default for n in gm.graph.nodes)
        return make_boxed_func(gm)

    for compiled in (torch.compile(fn, backend="openxla"), aot_function(fn, boxed)):
        cpu = torch.randn(16)
        x = cpu.to('xla').requires_grad_(True)
        y = compiled(x)
        y.sum().backward()
        torch_xla.sync()
        assert spec(y) == spec(x.grad) == "{devices=[8]0,1,2,3,4,5,6,7}", (spec(y), spec(x.grad))
        assert_same(y, torch.sin(cpu) + 42, **ALLCLOSE)
        assert_same(x.grad, torch.cos(cpu), **ALLCLOSE)


@check
def assume_pure_of_mark_sharding_runs_over_the_mesh():
    """A traced function (assume_pure) whose body marks a sharding: its program runs over
    the mesh its constraint names though its input is still on the virtual device, nested
    and differentiated too, and mark_sharding's XLAShardedTensor comes out as its tensor."""
    from torch_xla.experimental.assume_pure import assume_pure
    mesh = xs.Mesh(np.arange(N), (N, 1), ('model', 'x'))
    cpu = torch.randn(8, 4)
    y = assume_pure(xs.mark_sharding)(cpu.to('xla'), mesh, ('model', None))
    torch_xla.sync()
    assert spec(y) == "{devices=[8,1]0,1,2,3,4,5,6,7}", spec(y)
    assert_same(y, cpu, **EXACT)

    def inner(t):
        return xs.mark_sharding_with_gradients(torch.sin(t), mesh, ('model', None))
    outer = assume_pure(lambda t: assume_pure(inner)(t) * 2)
    x = cpu.to('xla').requires_grad_(True)
    z = outer(x)
    z.sum().backward()
    torch_xla.sync()
    assert spec(z) == "{devices=[8,1]0,1,2,3,4,5,6,7}", spec(z)
    assert_same(z, torch.sin(cpu) * 2, **ALLCLOSE)
    assert_same(x.grad, torch.cos(cpu) * 2, **ALLCLOSE)


@check
def scanned_layers_keep_their_weights_sharding():
    """scan_layers over layers whose weights are sharded on a 2-D mesh: the stacked weights
    and their gradients stay sharded as each weight is (not gathered), with the CPU's
    values."""
    from torch_xla.experimental.scan_layers import scan_layers
    mesh = xs.Mesh(np.arange(N), (2, N // 2), ('fsdp', 'tensor'))
    torch.manual_seed(0)
    ref = torch.nn.Sequential(*[torch.nn.Linear(16, 16, bias=False) for _ in range(3)])
    layers = copy.deepcopy(ref).to('xla')
    for layer in layers:
        xs.mark_sharding(layer.weight, mesh, ('tensor', 'fsdp'))
    cpu = torch.randn(4, 16)
    out = scan_layers(layers, cpu.to('xla'))
    out.sum().backward()
    torch_xla.sync()
    ref(cpu).sum().backward()
    assert_same(out, ref(cpu).detach(), **ALLCLOSE)
    for layer, r in zip(layers, ref):
        assert spec(layer.weight.grad) == spec(layer.weight) == "{devices=[4,2]0,4,1,5,2,6,3,7}", \
            (spec(layer.weight.grad), spec(layer.weight))
        assert_same(layer.weight.grad, r.weight.grad, rtol=1e-5, atol=1e-5)
