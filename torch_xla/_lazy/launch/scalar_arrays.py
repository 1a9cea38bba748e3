"""Programs' scalar parameters as arrays on the devices, shared by the programs.

A step's scalars (a learning rate, a momentum, the 0.5 of `x * 0.5`) recur across
programs: a value some program holds placed on a device (`Program.pack_on` keeps the
arrays of its last launch) is found here by the next program that needs it, which then
copies in only the values no live program holds. An array is known here only while a
program holds it (a weak reference), so that a value that changes every step (Adam's step
count) leaves nothing behind. Each copy counts as a transfer to the device, as an upload
does (`TransferToDevice`, its time and bytes), and each value placed anew as a
`DeviceDataCacheMiss` (torch_xla's name for its cache of device scalars).
"""
import threading
import weakref

import jax

from ..base import counters
from ..runtime import pjrt, trace_spans

_held = weakref.WeakValueDictionary()  # (device, dtype, bytes) -> 0-d array on that device
_lock = threading.Lock()


def on_device(packed, device: int) -> tuple:
    """The 0-d numpy arrays `packed` as arrays on XLA device `device`."""
    keys = [(device, a.dtype, a.tobytes()) for a in packed]
    with _lock:
        arrays = [_held.get(k) for k in keys]
    missing = [i for i, a in enumerate(arrays) if a is None]
    if not missing:
        return tuple(arrays)
    counters.count("DeviceDataCacheMiss", len(missing))
    with counters.timed("TransferToDeviceTime"), trace_spans.span("TransferToDevice"):
        placed = jax.device_put([packed[i] for i in missing], pjrt.jax_device(device))
    counters.count("TransferToDevice")
    counters.sample("OutboundData", sum(packed[i].nbytes for i in missing))
    with _lock:
        for i, a in zip(missing, placed):
            arrays[i] = _held[keys[i]] = a
    return tuple(arrays)
