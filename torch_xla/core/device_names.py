"""The names of XLA devices, as `xla_model` gives them: this process's ('xla:0', ...:
`get_xla_supported_devices`) and the runtime's ('CPU:0', 'TPU:3': `xla_real_devices`,
`xla_replication_devices`)."""
import torch_xla
from torch_xla._lazy.runtime import pjrt


def get_xla_supported_devices(devkind: str = None, max_devices: int = None):
    """Names of the XLA devices of this process: ['xla:0', 'xla:1', ...]."""
    names = [f"xla:{i}" for i in range(pjrt.device_count())]
    return names[:max_devices] if max_devices else names


def xla_real_devices(devices=None) -> list:
    """The runtime names of `devices` (torch devices or 'xla:N' strings; default: every
    device of this process): ['CPU:0', 'CPU:1', ...]."""
    return torch_xla._XLAC._xla_real_devices([str(d) for d in devices or ()])


def xla_replication_devices(local_devices=None) -> list:
    """The runtime names of every device of the runtime (all processes') that replicas of
    `local_devices` run on, by global ordinal: one device type, and all of this process's
    devices of it (a replication covers them all)."""
    local_devices = list(local_devices or get_xla_supported_devices())
    real = xla_real_devices(local_devices)
    kinds = {name.split(":")[0] for name in real}
    if len(kinds) != 1:
        raise RuntimeError(f"Cannot replicate across different device types: "
                           f"devices={local_devices}/{real}")
    kind_devices = get_xla_supported_devices()
    if len(kind_devices) != len(local_devices):
        raise RuntimeError(f"Cannot replicate if number of devices ({len(local_devices)}) is "
                           f"different from {len(kind_devices)}")
    kind = kinds.pop()
    names = [n for n in torch_xla._XLAC._xla_get_all_devices() if n.split(":")[0] == kind]
    return sorted(names, key=lambda n: int(n.split(":")[1]))
