"""torch.optim.Adam whose `step(found_inf=...)` skips on the device (see the package)."""
import torch

from . import _functional as F


def _adam_step(optimizer, found_inf, use_adamw):
    for group in optimizer.param_groups:
        params, grads, avgs, sqs, maxes, steps = [], [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError(f"{type(optimizer).__name__} does not support sparse gradients")
            state = optimizer.state[p]
            if not state:
                state["step"] = torch.zeros_like(found_inf, dtype=torch.float32)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["max_exp_avg_sq"] = (torch.zeros_like(p, memory_format=torch.preserve_format)
                                           if group["amsgrad"] else torch.empty(0, device=p.device))
            params.append(p)
            grads.append(p.grad)
            avgs.append(state["exp_avg"])
            sqs.append(state["exp_avg_sq"])
            maxes.append(state["max_exp_avg_sq"])
            steps.append(state["step"])
        beta1, beta2 = group["betas"]
        F.adam_step(found_inf, steps, params, grads, avgs, sqs, maxes, amsgrad=group["amsgrad"],
                    beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
                    eps=group["eps"], maximize=group["maximize"], use_adamw=use_adamw)


class Adam(torch.optim.Adam):
    """torch.optim.Adam; `step(found_inf=t)` with a scalar device tensor `t` updates
    nothing where `t` is nonzero, without reading it on the host."""

    @torch.no_grad()
    def step(self, closure=None, found_inf: torch.Tensor = None):
        return F.step(super().step, closure, found_inf, lambda f: _adam_step(self, f, use_adamw=False))
