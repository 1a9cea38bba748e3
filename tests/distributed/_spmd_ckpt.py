"""Distributed checkpoints of SPMD models (torch.distributed.checkpoint with the SPMD
planners). The check saves a trained Megatron MLP and its AdamW state from 8 devices and
loads it back onto another sharding; run as a script on 4 devices, it loads the same
checkpoint onto a 2 x 2 mesh and checks every tensor against the values saved with it."""
import os
import signal
import socket
import sys
import tempfile
import threading

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dist_cp
import torch.nn.functional as F
from fsspec.implementations.local import LocalFileSystem

import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
import torch_xla.experimental.distributed_checkpoint as xc
from torch_xla._lazy.runtime import pjrt

from ._spmd_basic import MLP
from ._spmd_harness import check, spec

SHARDINGS = {"up.weight": ('model', None), "up.bias": ('model',), "down.weight": (None, 'model')}


def _model(mesh, shardings):
    model = MLP(mesh).to('xla')
    for name, p in model.named_parameters():
        if name in shardings:
            xs.mark_sharding(p, mesh, shardings[name])
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _values(model, opt):
    """Every tensor of the model's and the optimizer's state, on the CPU, by name."""
    out = {f"model.{k}": v.cpu() for k, v in model.state_dict().items()}
    for i, state in opt.state_dict()["state"].items():  # ('step' is a CPU tensor: copied)
        out.update({f"optim.{i}.{k}": v.cpu().clone() for k, v in state.items()})
    return out


def _load(path, model, opt):
    state = {"model": model.state_dict(), "optim": opt.state_dict()}
    dist_cp.load(state, storage_reader=dist_cp.FileSystemReader(path), planner=xc.SPMDLoadPlanner())
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])


def _assert_equal(actual, expected):
    assert actual.keys() == expected.keys(), (actual.keys(), expected.keys())
    for name, value in expected.items():
        assert torch.equal(actual[name], value), (name, actual[name], value)


@check
def checkpoint_saved_on_one_mesh_loads_on_another():
    mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))
    torch.manual_seed(4)
    model, opt = _model(mesh, SHARDINGS)
    for _ in range(2):
        _train_step(model, opt, mesh)
    path = os.environ.get("SPMD_CHECKPOINT_DIR") or tempfile.mkdtemp()
    dist_cp.save({"model": model.state_dict(), "optim": opt.state_dict()},
                 storage_writer=dist_cp.FileSystemWriter(path), planner=xc.SPMDSavePlanner())
    saved = _values(model, opt)
    torch.save(saved, os.path.join(path, "expected.pt"))
    # onto 8-way sharding of other dims, from a differently initialized model
    other = xs.Mesh(np.arange(8), (8,), ('model',))
    torch.manual_seed(5)
    model2, opt2 = _model(other, {"up.weight": (None, 'model'), "down.weight": ('model', None)})
    xc.prime_optimizer(opt2)
    _load(path, model2, opt2)
    assert spec(model2.up.weight) == "{devices=[1,8]0,1,2,3,4,5,6,7}"
    _assert_equal(_values(model2, opt2), saved)


@check
def checkpoint_of_uneven_shards_loads_onto_other_uneven_shards():
    """9 rows over 8 devices (the last shards padded) saved; loaded onto 9 rows over 4 and
    6 columns over 2: every value as saved, no padding written or read."""
    a = torch.randn(9, 6)
    t = a.to('xla')
    xs.mark_sharding(t, xs.Mesh(np.arange(8), (8,), ('x',)), ('x', None))
    path = tempfile.mkdtemp()
    dist_cp.save({"t": t}, storage_writer=dist_cp.FileSystemWriter(path), planner=xc.SPMDSavePlanner())
    u = torch.zeros(9, 6).to('xla')
    xs.mark_sharding(u, xs.Mesh(np.arange(8), (2, 4), ('a', 'b')), ('b', 'a'))
    dist_cp.load({"t": u}, storage_reader=dist_cp.FileSystemReader(path), planner=xc.SPMDLoadPlanner())
    assert torch.equal(u.cpu(), a) and spec(u) == "{devices=[4,2]0,4,1,5,2,6,3,7}", spec(u)


@check
def save_planner_splits_the_state_into_sharded_and_unsharded():
    """`_sharded_cpu_state_dict` reads the sharded tensors as `_CpuShards` (one block per
    distinct shard, on the CPU) and the others as CPU tensors, nesting kept; the save
    planner's `sharded_state_dict`/`unsharded_state_dict` hold the flattened names."""
    from torch_xla.experimental.distributed_checkpoint._helpers import (
        _CpuShards, _is_sharded_tensor, _sharded_cpu_state_dict)
    mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))
    w, b = torch.randn(8, 4).to('xla'), torch.randn(4).to('xla')
    xs.mark_sharding(w, mesh, ('data', None))  # 4 distinct blocks, each on 2 devices
    state = _sharded_cpu_state_dict({"m": {"w": w, "b": b}})
    assert _is_sharded_tensor(w) and not _is_sharded_tensor(b)
    assert isinstance(state["m"]["w"], _CpuShards) and state["m"]["w"].global_shape == (8, 4)
    assert sorted(s.indices[0].start for s in state["m"]["w"].shards) == [0, 2, 4, 6]
    assert state["m"]["b"].device.type == "cpu" and torch.equal(state["m"]["b"], b.cpu())
    planner = xc.SPMDSavePlanner()
    planner.set_up_planner(state, None, True)
    assert list(planner.sharded_state_dict) == ["m.w"], planner.sharded_state_dict
    assert list(planner.unsharded_state_dict) == ["m.b"]
    sharded = [i for i in planner.create_local_plan().items if i.index.fqn == "m.w"]
    assert len(sharded) == 4
    # each write item's index hint is its block's place among the tensor's local shards
    local = xs.wrap_if_sharded(w).local_shards
    for item in sharded:
        assert torch.equal(planner.resolve_data(item), local[item.index.index].data)
        assert local[item.index.index].replica_id == 0


def _train_step(model, opt, mesh):
    x = torch.randn(8, 16).to('xla')
    xs.mark_sharding(x, mesh, ('data', None))
    F.mse_loss(model(x), torch.zeros(8, 16).to('xla')).backward()
    opt.step()
    opt.zero_grad()
    xm.mark_step()


@check
def checkpoint_manager_keeps_steps_and_restores_them():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    mesh = xs.Mesh(np.arange(8), (4, 2), ('data', 'model'))
    torch.manual_seed(6)
    model, opt = _model(mesh, SHARDINGS)
    path = tempfile.mkdtemp()
    manager = xc.CheckpointManager(path, save_interval=2, max_to_keep=2)
    taken, readers = {}, set()
    host_array = pjrt.to_host_array

    def read(buffer):  # every read of the device, by the thread that made it
        readers.add(threading.current_thread())
        return host_array(buffer)
    pjrt.to_host_array = read
    try:
        for step in range(6):
            _train_step(model, opt, mesh)
            if manager.save_async(step, {"model": model.state_dict(), "optim": opt.state_dict()}):
                taken[step] = _values(model, opt)
        manager.join()
    finally:
        pjrt.to_host_array = host_array
    # the background writer touches no engine state (the training thread's): it writes
    # what save_async read to the host
    assert readers == {threading.main_thread()}, readers
    assert sorted(taken) == [0, 2, 4] and manager.all_steps() == [2, 4]
    assert sorted(os.listdir(path)) == ["2", "4"]
    assert not manager.should_save(5)
    os.kill(os.getpid(), signal.SIGTERM)  # a preemption notice: the next step saves
    assert manager.reached_preemption(5) and manager.should_save(5)
    again = xc.CheckpointManager(path, save_interval=2, chkpt_on_preemption=False)
    # hosts sharing a filesystem: another host makes the directory right after this one looked
    shared, exists = os.path.join(tempfile.mkdtemp(), "shared"), LocalFileSystem.exists

    def looked_then_made(fs, p, **kw):
        found = exists(fs, p, **kw)
        if p.rstrip("/") == shared:
            os.makedirs(shared, exist_ok=True)
        return found
    LocalFileSystem.exists = looked_then_made
    try:
        assert xc.CheckpointManager(shared, save_interval=2, chkpt_on_preemption=False).all_steps() == []
    finally:
        LocalFileSystem.exists = exists
    assert again.all_steps() == [2, 4]
    torch.manual_seed(7)
    model2, opt2 = _model(mesh, SHARDINGS)
    xc.prime_optimizer(opt2)
    assert spec(opt2.state[opt2.param_groups[0]["params"][0]]["exp_avg"]) == spec(model2.up.weight)
    state = {"model": model2.state_dict(), "optim": opt2.state_dict()}
    again.restore(2, state)
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["optim"])
    _assert_equal(_values(model2, opt2), taken[2])
    dist.destroy_process_group()


def load_on_four_devices(path):
    xr.use_spmd()
    assert xr.global_runtime_device_count() == 4
    mesh = xs.Mesh(np.arange(4), (2, 2), ('data', 'model'))
    model, opt = _model(mesh, {"up.weight": (None, 'model'), "down.weight": ('model', 'data')})
    xc.prime_optimizer(opt)
    _load(path, model, opt)
    assert spec(model.down.weight) == "{devices=[2,2]0,2,1,3}", spec(model.down.weight)
    assert len(xs.XLAShardedTensor(model.down.weight).local_shards) == 4
    _assert_equal(_values(model, opt), torch.load(os.path.join(path, "expected.pt")))
    print("loaded", flush=True)


if __name__ == "__main__":
    load_on_four_devices(sys.argv[1])
