"""torch.optim.SGD whose `step(found_inf=...)` skips on the device (see the package)."""
import torch

from . import _functional as F


def _sgd_step(optimizer, found_inf):
    for group in optimizer.param_groups:
        params, grads, buffers, steps = [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("SGD does not support sparse gradients")
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.zeros_like(found_inf, dtype=torch.float32)
                state["momentum_buffer"] = torch.zeros_like(p) if group["momentum"] else None
            params.append(p)
            grads.append(p.grad)
            buffers.append(state["momentum_buffer"])
            steps.append(state["step"])
        F.sgd_step(found_inf, steps, params, grads, buffers, weight_decay=group["weight_decay"],
                   momentum=group["momentum"], lr=group["lr"], dampening=group["dampening"],
                   nesterov=group["nesterov"], maximize=group["maximize"])


class SGD(torch.optim.SGD):
    """torch.optim.SGD; `step(found_inf=t)` with a scalar device tensor `t` updates nothing
    where `t` is nonzero, without reading it on the host."""

    @torch.no_grad()
    def step(self, closure=None, found_inf: torch.Tensor = None):
        return F.step(super().step, closure, found_inf, lambda f: _sgd_step(self, f))
