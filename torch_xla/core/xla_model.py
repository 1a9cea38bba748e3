"""torch_xla.core.xla_model: devices, steps and the optimizer step (imported as `xm`)."""
import jax
import torch

import torch_xla
from torch_xla._lazy import rng, runtime
from torch_xla._lazy import tensor as _tensor


def xla_device(n: int = None, devkind: str = None) -> torch.device:
    """The XLA device `n` of this process (default 0)."""
    if n is not None and not 0 <= n < len(runtime.jax_devices()):
        raise RuntimeError(f"Invalid XLA device index {n}: there are {len(runtime.jax_devices())} device(s)")
    return torch_xla.device(n)


def get_xla_supported_devices(devkind: str = None, max_devices: int = None):
    """Names of the XLA devices of this process: ['xla:0', 'xla:1', ...]."""
    names = [f"xla:{i}" for i in range(len(runtime.jax_devices()))]
    return names[:max_devices] if max_devices else names


def xla_device_hw(device) -> str:
    return runtime.device_type()


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """Ends a step: compiles (or reuses) and runs one program for every pending tensor."""
    torch_xla.sync(wait)


def wait_device_ops(devices=()) -> None:
    """Blocks until everything queued on the devices has run."""
    for v in _tensor.live_values():
        if v.data is not None:
            v.data.block_until_ready()
    jax.effects_barrier()


def optimizer_step(optimizer, barrier: bool = False, optimizer_args=None, groups=None, pin_layout=True):
    """`optimizer.step(**optimizer_args)`; with `barrier=True` the step then ends (mark_step)."""
    result = optimizer.step(**(optimizer_args or {}))
    if barrier:
        mark_step()
    return result


def _index(device):
    if device is None:
        return 0
    return torch.device(device).index or 0


def set_rng_state(seed: int, device=None) -> None:
    rng.manual_seed(seed, _index(device))


def get_rng_state(device=None) -> int:
    return rng.get_state(_index(device))[0]
