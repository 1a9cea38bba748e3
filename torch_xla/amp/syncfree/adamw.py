"""torch.optim.AdamW whose `step(found_inf=...)` skips on the device (see the package)."""
import torch

from .adam import _adam_step


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW; `step(found_inf=t)` with a scalar device tensor `t` updates
    nothing where `t` is nonzero, without reading it on the host."""

    @torch.no_grad()
    def step(self, closure=None, found_inf: torch.Tensor = None):
        if found_inf is None:
            return super().step(closure=closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        _adam_step(self, found_inf, use_adamw=True)
        return loss
