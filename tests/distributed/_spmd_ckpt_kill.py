"""A CheckpointManager killed (SIGKILL) while writing an async checkpoint, run by
tests/distributed/test_spmd.py as two processes: `save DIR` takes checkpoint 0, saves the
values it holds, then dies while writing checkpoint 1 in the background; `restore DIR`, a
fresh process, restores the last completed checkpoint and checks every tensor."""
import os
import signal
import socket
import sys

import numpy as np
import torch
import torch.distributed as dist

import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr
import torch_xla.experimental.distributed_checkpoint as xc
from torch_xla.experimental.distributed_checkpoint import manager as manager_module

from ._spmd_ckpt import SHARDINGS, _assert_equal, _model, _train_step, _values


class _DyingWriter(manager_module.FsspecWriter):
    """Kills the process once the checkpoint's data is written, before it is complete."""

    def finish(self, metadata, results):
        os.kill(os.getpid(), signal.SIGKILL)


def main(mode, path):
    xr.use_spmd()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (2, 2), ('data', 'model'))
    torch.manual_seed(8)
    model, opt = _model(mesh, SHARDINGS)
    manager = xc.CheckpointManager(path, save_interval=1)
    if mode == "save":
        _train_step(model, opt, mesh)
        assert manager.save_async(0, {"model": model.state_dict(), "optim": opt.state_dict()})
        manager.join()
        torch.save(_values(model, opt), os.path.join(path, "expected.pt"))
        _train_step(model, opt, mesh)
        manager_module.FsspecWriter = _DyingWriter
        manager.save_async(1, {"model": model.state_dict(), "optim": opt.state_dict()})
        manager.join()
        raise AssertionError("the process outlived its checkpoint")
    assert manager.all_steps() == [0], manager.all_steps()
    xc.prime_optimizer(opt)
    state = {"model": model.state_dict(), "optim": opt.state_dict()}
    manager.restore(0, state)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    _assert_equal(_values(model, opt), torch.load(os.path.join(path, "expected.pt")))
    print("restored", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
