"""Programs' scalar parameters as arrays on the devices, shared by every program.

A step's scalars (a learning rate, a momentum, the 0.5 of `x * 0.5`) recur across programs
and across steps: each value is placed on a device once and kept (least recently used
first out past `_MAX_KEPT`), so that a new program, or a program whose scalars changed,
copies in only the values no program used before. Each copy counts as a transfer to the
device, as an upload does (`TransferToDevice`, its time and bytes), and each value placed
anew as a `DeviceDataCacheMiss` (torch_xla's name for its cache of device scalars).
"""
import collections
import threading

import jax

from . import counters, pjrt

_MAX_KEPT = 4096
_kept = collections.OrderedDict()  # (device, dtype, bytes) -> 0-d array on that device
_lock = threading.Lock()


def on_device(packed, device: int) -> tuple:
    """The 0-d numpy arrays `packed` as arrays on XLA device `device`."""
    keys = [(device, a.dtype, a.tobytes()) for a in packed]
    with _lock:
        arrays = [_kept.get(k) for k in keys]
        for k, a in zip(keys, arrays):
            if a is not None:
                _kept.move_to_end(k)
    missing = [i for i, a in enumerate(arrays) if a is None]
    if not missing:
        return tuple(arrays)
    counters.count("DeviceDataCacheMiss", len(missing))
    with counters.timed("TransferToDeviceTime"):
        placed = jax.device_put([packed[i] for i in missing], pjrt.jax_device(device))
    counters.count("TransferToDevice")
    counters.sample("OutboundData", sum(packed[i].nbytes for i in missing))
    with _lock:
        for i, a in zip(missing, placed):
            arrays[i] = _kept[keys[i]] = a
        while len(_kept) > _MAX_KEPT:
            _kept.popitem(last=False)
    return tuple(arrays)
