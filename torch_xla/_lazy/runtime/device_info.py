"""What the runtime tells of its devices: their runtime names ('CPU:3', the platform and the
device's global index), kinds, PJRT attributes and memory, and whether the runtime started.
"""
import os

import jax

from ..base import jax_compat
from . import pjrt


def default_device() -> str:
    """This thread's device: a DataParallel replica's own, else xla:0."""
    index = pjrt.thread_device()
    return f"xla:{0 if index is None else index}"


def real_name(d) -> str:
    """The runtime name of jax device `d` ('CPU:3')."""
    return f"{pjrt.device_type()}:{pjrt.global_devices().index(d)}"


def real_devices(devices=()) -> list:
    """Runtime names of `devices` ('xla:N'; default: this process's)."""
    local = pjrt.jax_devices()
    indices = [int(str(d).split(":")[1]) for d in devices] if devices else range(len(local))
    return [real_name(local[i]) for i in indices]


def all_real_devices() -> list:
    """Runtime names of every device of the runtime, all processes'."""
    return [real_name(d) for d in pjrt.global_devices()]


def jax_device_named(device: str):
    """The jax device of 'xla:N' or of a runtime name such as 'CPU:3'."""
    kind, _, index = str(device).partition(":")
    if kind == "xla":
        return pjrt.jax_device(int(index or 0))
    devices = pjrt.global_devices()
    if kind.upper() != pjrt.device_type() or not index.isdigit() or int(index) >= len(devices):
        raise RuntimeError(f"Unknown XLA device '{device}'; the runtime has "
                           f"{pjrt.device_type()}:0 .. {pjrt.device_type()}:{len(devices) - 1}")
    return devices[int(index)]


def device_kind(device: str) -> str:
    """The vendor's name for the kind of `device` ('cpu', 'TPU v4', 'NVIDIA H100 ...')."""
    return jax_device_named(device).device_kind


def device_attributes(device: str) -> dict:
    """What PJRT tells of `device`: its kind, ids, and platform attributes (TPU `coords`,
    `core_on_chip`, ...)."""
    d = jax_device_named(device)
    attributes = {"name": real_name(d), "device_kind": d.device_kind, "id": d.id,
                  "process_index": d.process_index}
    for name in ("coords", "core_on_chip", "slice_index", "num_cores"):
        if hasattr(d, name):
            attributes[name] = getattr(d, name)
    return attributes


def all_device_attributes() -> list:
    return [device_attributes(real_name(d)) for d in pjrt.global_devices()]


def memory_info(device: str) -> dict:
    """Memory of `device` in bytes: PJRT's statistics where the platform keeps them (GPU,
    TPU); on the CPU, whose device memory is the host's, the bytes of the live buffers on
    that device and the host's physical memory as the limit."""
    d = jax_device_named(device)
    stats = d.memory_stats()
    if stats:
        info = {"bytes_used": stats.get("bytes_in_use", 0), "bytes_limit": stats.get("bytes_limit", 0)}
        if "peak_bytes_in_use" in stats:
            info["peak_bytes_used"] = stats["peak_bytes_in_use"]
        return info
    if d.platform != "cpu":
        raise RuntimeError(f"{device}: the {d.platform} runtime reports no memory statistics")
    used = sum(a.nbytes for a in jax.live_arrays() if d in a.devices() and len(a.devices()) == 1)
    return {"bytes_used": used, "bytes_limit": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")}


def is_initialized() -> bool:
    """Whether the runtime (jax's PJRT backends) has started in this process."""
    return jax_compat.backends_are_initialized()
