"""Run with CPU_NUM_DEVICES=2: each program runs on the device of its tensors."""
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla._lazy.graph.tensor import unwrap
from tests.compare import assert_same


def device_of(t):
    return list(unwrap(t)._value.data.devices())[0].id


def step(device):
    x = torch.ones(3, 3, device=device) * 2  # factories only: no input buffer to follow
    y = torch.randn(3, 3, device=device).abs() + x
    xm.mark_step()
    return x, y


x0, y0 = step(xm.xla_device(0))
before = met.counter_value("UncachedCompile")
x1, y1 = step(xm.xla_device(1))  # the same graph on the other device
assert met.counter_value("UncachedCompile") == before + 1, "one program per (graph, device)"
assert [device_of(t) for t in (x0, y0)] == [0, 0]
assert [device_of(t) for t in (x1, y1)] == [1, 1], [device_of(t) for t in (x1, y1)]
z = x1 @ y1 + 1  # reads device 1's buffers
xm.mark_step()
assert device_of(z) == 1
assert_same(z, x1.cpu() @ y1.cpu() + 1)
x0b, _ = step(xm.xla_device(0))
assert met.counter_value("UncachedCompile") == before + 2  # z's program; step's are cached
print("ok")
