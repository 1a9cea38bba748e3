"""Saving and loading (seed 5.2): xm.save, torch.save/torch.load of XLA tensors, atomic
writes, and training resumed from a checkpoint."""
import os
import signal
import textwrap

import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from tests.compare import EXACT, assert_same
from tests.fresh_process import python, start


def _model(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                               torch.nn.Linear(8, 2)).to(dev)


def test_xm_save_nested_loads_as_cpu_without_the_package(tmp_path, dev):
    model = _model(dev)
    x = torch.randn(3, device=dev)
    pending = x * 2  # not yet materialised
    data = {"model": model.state_dict(), "items": [pending, (x, 7)], "name": "ckpt"}
    xm.save(data, tmp_path / "xm.pt")
    torch.save({"w": model[0].weight, "sd": model.state_dict(), "x": x}, tmp_path / "torch.pt")
    assert sorted(os.listdir(tmp_path)) == ["torch.pt", "xm.pt"]  # no temporary file left
    script = textwrap.dedent(f"""
        import sys, torch
        a = torch.load({str(tmp_path / 'xm.pt')!r})
        b = torch.load({str(tmp_path / 'torch.pt')!r}, weights_only=False)
        assert not any(m.startswith('torch_xla') for m in sys.modules)
        tensors = list(a['model'].values()) + [a['items'][0], a['items'][1][0], b['w'], b['x']]
        assert all(t.device.type == 'cpu' for t in tensors)
        assert a['items'][1][1] == 7 and a['name'] == 'ckpt'
        assert type(b['w']) is torch.nn.Parameter and b['w'].requires_grad
        assert torch.equal(a['items'][0], a['items'][1][0] * 2)
        assert torch.equal(b['w'], a['model']['0.weight'])
        print('ok')
    """)
    out = python("-c", script)
    assert out.stdout.strip() == "ok", out.stderr
    loaded = torch.load(tmp_path / "xm.pt")
    assert torch.equal(loaded["model"]["0.weight"], model[0].weight.cpu())
    assert torch.equal(loaded["items"][0], pending.cpu())


@pytest.mark.parametrize("location", ["xla", "xla:0", torch.device("xla", 0)])
def test_torch_load_map_location_xla(tmp_path, dev, location):
    shared = torch.randn(2, 3)
    torch.save({"a": shared, "b": [shared, torch.arange(4)], "p": torch.nn.Parameter(torch.ones(2))},
               tmp_path / "c.pt")
    out = torch.load(tmp_path / "c.pt", map_location=location)
    assert out["a"].device == dev and out["b"][1].device == dev and out["p"].device == dev
    assert out["a"] is out["b"][0]  # shared in the file, shared after loading
    assert isinstance(out["p"], torch.nn.Parameter) and out["p"].requires_grad
    assert out["b"][1].dtype == torch.int64
    assert_same(out["a"], shared, **EXACT)
    assert torch.load(tmp_path / "c.pt", map_location="cpu")["a"].device.type == "cpu"


def test_load_state_dict_of_cpu_state_into_device_model(dev):
    cpu_model = torch.nn.Linear(3, 2)
    model = torch.nn.Linear(3, 2).to(dev)
    model.load_state_dict(cpu_model.state_dict())
    assert model.weight.device == dev
    x = torch.randn(4, 3)
    assert_same(model(x.to(dev)), cpu_model(x), rtol=1e-6, atol=1e-6)


def test_save_only_on_the_master(tmp_path, dev, monkeypatch):
    t = torch.ones(2, device=dev)
    monkeypatch.setattr(xr, "local_ordinal", lambda: 1)
    xm.save(t, tmp_path / "local.pt")
    assert not (tmp_path / "local.pt").exists()
    xm.save(t, tmp_path / "all.pt", master_only=False)
    assert (tmp_path / "all.pt").exists()
    monkeypatch.setattr(xr, "global_ordinal", lambda: 0)
    xm.save(t, tmp_path / "global.pt", global_master=True)
    assert torch.equal(torch.load(tmp_path / "global.pt"), torch.ones(2))


def test_killed_save_leaves_previous_checkpoint(tmp_path):
    """A process killed in the middle of xm.save (its data written, not yet renamed) leaves
    the previous checkpoint whole."""
    path = tmp_path / "ckpt.pt"
    script = textwrap.dedent(f"""
        import os, sys, threading, torch
        import torch_xla.core.xla_model as xm
        dev = xm.xla_device()
        xm.save({{'step': 1, 'w': torch.zeros(4, device=dev)}}, {str(path)!r})
        real_fsync = os.fsync
        def fsync(fd):  # the new file is on disk, the rename has not happened
            real_fsync(fd)
            print('saving', flush=True)
            threading.Event().wait()  # until killed
        os.fsync = fsync
        xm.save({{'step': 2, 'w': torch.ones(1 << 20, device=dev)}}, {str(path)!r})
    """)
    proc = start("-c", script)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "saving", proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    ckpt = torch.load(path)
    assert ckpt["step"] == 1 and torch.equal(ckpt["w"], torch.zeros(4))
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.pt"]
    assert leftovers and all(n.startswith(".ckpt.pt.") for n in leftovers)


def _train(model, opt, steps, dev, losses):
    for i in range(steps):
        g = torch.Generator().manual_seed(100 + len(losses))
        x, y = torch.randn(8, 4, generator=g).to(dev), torch.randint(0, 2, (8,), generator=g).to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        xm.mark_step()
        losses.append(loss.item())


def test_resume_from_checkpoint_gives_the_same_losses(tmp_path, dev):
    """Dropout draws from the device RNG: the checkpoint carries its (seed, offset)."""
    model = _model(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    straight = []
    _train(model, opt, 6, dev, straight)

    model = _model(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    resumed = []
    _train(model, opt, 3, dev, resumed)
    xm.save({"model": model.state_dict(), "opt": opt.state_dict(),
             "rng": xm.get_rng_state()}, tmp_path / "ckpt.pt")
    del model, opt
    xm.set_rng_state(12345)  # the interrupted run's RNG is gone
    ckpt = torch.load(tmp_path / "ckpt.pt")
    model = _model(dev)
    model.load_state_dict(ckpt["model"])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(ckpt["opt"])
    xm.set_rng_state(ckpt["rng"])
    _train(model, opt, 3, dev, resumed)
    assert resumed == straight


def test_copy_outside_torch_save_keeps_the_device(dev):
    import copy
    x = torch.arange(3.0, device=dev)
    assert copy.copy(x).device == dev and torch.equal(copy.copy(x).cpu(), x.cpu())
