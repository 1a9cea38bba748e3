"""Inputs and checks shared by the lowering tests."""
import torch

from tests.conftest import check_lowered


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


def check_input_grad(fn, *shape, x=None):
    """fn (values, and indices where it returns them) and its gradient, on x or a random
    input of the shape, against the CPU."""
    x = torch.randn(shape) if x is None else x
    check_lowered(fn, x.requires_grad_(), grads=True, atol=1e-5, rtol=1e-5)
