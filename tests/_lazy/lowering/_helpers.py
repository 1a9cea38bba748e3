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


def seeded_randn(*shape, seed=0, grad=True):
    torch.manual_seed(seed)
    return torch.randn(*shape).requires_grad_(grad)


def outputs_and_grads(fn):
    """fn's outputs followed by the gradients of its floating outputs (weighted by a fixed
    cotangent) with respect to its inputs that require grad."""
    def run(*args):
        out = fn(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        diff = [o for o in outs if o.requires_grad]
        ins = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        cts = [torch.arange(o.numel(), device=o.device).reshape(o.shape).cos().to(o.dtype) for o in diff]
        return tuple(outs) + torch.autograd.grad(diff, ins, cts)
    return run


def with_input_grad(fn):
    """fn(x) (and its indices, where it returns them) and the gradient with respect to x."""
    def run(x, g):
        out = fn(x)
        value = out[0] if isinstance(out, tuple) else out
        rest = tuple(out[1:]) if isinstance(out, tuple) else ()
        return (value,) + rest + torch.autograd.grad(value, [x], g)
    return run


def check_input_grad(fn, *shape, x=None):
    x = torch.randn(shape) if x is None else x
    out = fn(x)
    out = out[0] if isinstance(out, tuple) else out
    check_lowered(with_input_grad(fn), x.requires_grad_(), torch.randn(out.shape), atol=1e-5, rtol=1e-5)
