"""The runtime's names of XLA devices ('CPU:0', 'TPU:3'), as `xla_model` gives them:
`xla_real_devices`, `xla_replication_devices`."""
import torch_xla


def xla_real_devices(devices=None) -> list:
    """The runtime names of `devices` (torch devices or 'xla:N' strings; default: every
    device of this process): ['CPU:0', 'CPU:1', ...]."""
    return torch_xla._XLAC._xla_real_devices([str(d) for d in devices or ()])


def xla_replication_devices(local_devices=None) -> list:
    """The runtime names of every device of the runtime (all processes') that replicas of
    `local_devices` run on, by global ordinal: one device type, and all of this process's
    devices of it (a replication covers them all)."""
    from torch_xla.core import xla_model as xm
    local_devices = list(local_devices or xm.get_xla_supported_devices())
    real = xla_real_devices(local_devices)
    kinds = {name.split(":")[0] for name in real}
    if len(kinds) != 1:
        raise RuntimeError(f"Cannot replicate across different device types: "
                           f"devices={local_devices}/{real}")
    kind_devices = xm.get_xla_supported_devices()
    if len(kind_devices) != len(local_devices):
        raise RuntimeError(f"Cannot replicate if number of devices ({len(local_devices)}) is "
                           f"different from {len(kind_devices)}")
    kind = kinds.pop()
    names = [n for n in torch_xla._XLAC._xla_get_all_devices() if n.split(":")[0] == kind]
    return sorted(names, key=lambda n: int(n.split(":")[1]))
