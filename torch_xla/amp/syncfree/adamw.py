"""torch.optim.AdamW whose `step(found_inf=...)` skips on the device (see the package)."""
import torch

from . import _functional as F
from .adam import _adam_step


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW; `step(found_inf=t)` with a scalar device tensor `t` updates
    nothing where `t` is nonzero, without reading it on the host."""

    @torch.no_grad()
    def step(self, closure=None, found_inf: torch.Tensor = None):
        return F.step(super().step, closure, found_inf, lambda f: _adam_step(self, f, use_adamw=True))
