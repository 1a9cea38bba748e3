"""torch_xla.amp: mixed precision on XLA devices.

`torch.autocast('xla', dtype=torch.bfloat16)` works directly (the kernels are installed
at `import torch_xla`); `torch_xla.amp.autocast(device)` is torch_xla's spelling of it.
"""
import torch

from .autocast_mode import install


class autocast(torch.amp.autocast_mode.autocast):
    """`torch.autocast` for the XLA device `device` (bfloat16 unless `dtype` says
    otherwise)."""

    def __init__(self, device=None, enabled: bool = True, dtype: torch.dtype = None,
                 cache_enabled: bool = None):
        if device is not None and torch.device(device).type != "xla":
            raise ValueError(f"torch_xla.amp.autocast: {device} is not an XLA device")
        super().__init__("xla", enabled=enabled, dtype=dtype or torch.bfloat16,
                         cache_enabled=cache_enabled)


__all__ = ["autocast", "install"]
