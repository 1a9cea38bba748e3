"""torch_xla.amp: mixed precision on XLA devices.

`torch.autocast('xla', dtype=torch.bfloat16)` works directly (the kernels are installed
at `import torch_xla`); `torch_xla.amp.autocast(device)` is torch_xla's spelling of it.
"""
import torch

from torch_xla._lazy.runtime import pjrt

from .autocast_mode import install


class autocast(torch.amp.autocast_mode.autocast):
    """`torch.autocast` for the XLA device `device`, in `dtype`: by default float16 on CUDA
    (as torch_xla's XLA:GPU autocast and PyTorch's CUDA autocast default), bfloat16 on TPU
    and the CPU."""

    def __init__(self, device=None, enabled: bool = True, dtype: torch.dtype = None,
                 cache_enabled: bool = None):
        if device is not None and torch.device(device).type != "xla":
            raise ValueError(f"torch_xla.amp.autocast: {device} is not an XLA device")
        if dtype is None:
            dtype = torch.float16 if pjrt.selected_device_type() == "CUDA" else torch.bfloat16
        super().__init__("xla", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


__all__ = ["autocast", "install"]
