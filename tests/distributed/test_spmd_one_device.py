"""SPMD on the devices the runtime has, whatever they are (one GPU, one CPU device): a mesh
of all of them, sharded parameters and batch, a training step equal to the CPU's. SPMD mode
is for a whole process, so the check runs in a fresh one on the device PJRT_DEVICE selects
(scripts/gpu-check runs it on a GPU)."""
import json
import textwrap

from tests.fresh_process import python

_SCRIPT = textwrap.dedent("""
    import copy, json
    import numpy as np, torch
    import torch_xla, torch_xla.runtime as xr, torch_xla.distributed.spmd as xs
    import torch_xla.debug.metrics as met
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model = copy.deepcopy(cpu).to("xla")
    xs.mark_sharding(model[0].weight, mesh, ("model", "data"))
    xs.mark_sharding(model[2].weight, mesh, ("data", "model"))
    x, y = torch.randn(4 * n, 8), torch.randint(0, 4, (4 * n,))
    losses = []
    for m, device in ((cpu, "cpu"), (model, "xla")):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        xd = x.to(device)
        if device == "xla":
            xs.mark_sharding(xd, mesh, ("data", None))
        run = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xd), y.to(device))
            loss.backward()
            opt.step()
            torch_xla.sync() if device == "xla" else None
            run.append(loss.item())
        losses.append(run)
    print(json.dumps({"devices": n, "kind": xr.device_type(), "cpu": losses[0], "xla": losses[1],
                      "sharding": torch_xla._XLAC._get_xla_sharding_spec(model[0].weight),
                      "compiles": met.metric_data("CompileTime")[0]}))
""")


def test_spmd_training_on_every_device_of_the_runtime():
    out = json.loads(python("-c", _SCRIPT).stdout.strip().splitlines()[-1])
    assert out["devices"] >= 1
    for a, b in zip(out["cpu"], out["xla"]):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (out["cpu"], out["xla"])
    assert out["compiles"] <= 2  # the first step's program and the steady one, then replayed
