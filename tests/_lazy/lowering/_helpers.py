"""Inputs and checks shared by the lowering tests."""
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.conftest import check_lowered


def lowered(fn, *args, **kwargs):
    """check_lowered, also catching fallbacks of `prims::` ops (decompositions end there).
    All outputs of fn are computed in one program (mark_step), not one per output."""
    def synced(*a, **k):
        out = fn(*a, **k)
        xm.mark_step()
        return out
    out = check_lowered(synced, *args, **kwargs)
    on_cpu = [n for n in met.counter_names() if "::" in n]
    assert not on_cpu, f"ran on the CPU: {on_cpu}"
    return out


def rand(*shape, seed=0, low=-3.0, high=3.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (high - low) + low


def rint(*shape, seed=0, low=-9, high=10, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)
