"""PyTorch on XLA devices, compiled and run by XLA through jax/jaxlib (PJRT).

`import torch_xla` makes 'xla' a PyTorch device: tensors placed on it record their ops into
a graph that XLA compiles once and replays.
"""
import torch

from . import _lazy  # noqa: F401  (installs the device)
from ._lazy import execution as _execution
from ._lazy import runtime as _rt
from .amp import autocast_mode as _autocast_mode

_autocast_mode.install()

__version__ = "0.1.0"


def device(index: int = None) -> torch.device:
    """The XLA device `index` (default: this process's first device)."""
    return torch.device("xla", 0 if index is None else index)


def devices():
    """Every XLA device this process drives (under SPMD: xla:0, standing for all)."""
    return [torch.device("xla", i) for i in range(_rt.device_count())]


def sync(wait: bool = False) -> None:
    """Runs every pending computation on every device (torch_xla's mark_step)."""
    _execution.mark_step()
    if wait:
        from .core import xla_model
        xla_model.wait_device_ops()
