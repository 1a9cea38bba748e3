"""DLPack: XLA tensors to and from other libraries' arrays, sharing the device buffer.

An XLA tensor's value is a jax array, so its DLPack capsule is the jax array's own
(`to_dlpack`: the pending value is computed first) and an array from elsewhere becomes the
buffer of a new XLA tensor through `jax.dlpack.from_dlpack`: no copy where jax can share
the memory (on the CPU, a buffer aligned as XLA needs it; on a GPU, a buffer of the same
device), a copy otherwise (another device, or an array on the CPU when the devices are
GPUs). Shared memory is shared both ways, as DLPack means it: writing into the other
library's array changes the XLA tensor.

`install` makes `Tensor.__dlpack__` and `__dlpack_device__` of XLA tensors these on every
backend (PyTorch's own accept XLA tensors only when the XLA devices are CUDA GPUs).
"""
import ctypes
import struct

import jax
import torch

from ..step import execution
from ..runtime import pjrt
from ..graph.ir import Value
from ..graph.tensor import to_functional, unwrap, wrap


def _array(t: torch.Tensor):
    """The computed jax array behind XLA tensor `t`."""
    value = unwrap(t)._value
    execution.materialize([value])
    if value.data is None:
        raise value.failure()
    if len(value.data.devices()) > 1:
        raise RuntimeError("to_dlpack: this tensor is laid out over several devices (SPMD); "
                           "DLPack describes a buffer on one device")
    return value.data


def to_dlpack(t: torch.Tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule of XLA tensor `t`'s buffer (the buffer itself, not a copy)."""
    array = _array(t)
    if next(iter(array.devices())).platform == "cpu":
        stream = None  # (PyTorch passes -1: no stream on a CPU)
    return array.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                            copy=copy)


def dlpack_device(t: torch.Tensor):
    """(DLPack device type, device id) of XLA tensor `t`'s buffer."""
    return _array(t).__dlpack_device__()


class _Capsule:
    """A bare DLPack capsule with the methods `jax.dlpack.from_dlpack` asks of an array: its
    device read from the DLTensor it holds."""

    def __init__(self, capsule):
        self.capsule = capsule
        for name, offset in ((b"dltensor", 8), (b"dltensor_versioned", 40)):
            if ctypes.pythonapi.PyCapsule_IsValid(capsule, name):
                address = _capsule_pointer(capsule, name)
                self.device = struct.unpack("ii", ctypes.string_at(address + offset, 8))
                return
        raise TypeError("from_dlpack: expected an object with __dlpack__ or an unused DLPack "
                        f"capsule, got {type(capsule).__name__}")

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


ctypes.pythonapi.PyCapsule_IsValid.restype = ctypes.c_int
ctypes.pythonapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def from_dlpack(external) -> torch.Tensor:
    """An XLA tensor on the buffer of `external` (an object with `__dlpack__`, or a DLPack
    capsule), on the XLA device that buffer is on, else (copied) on xla:0."""
    if not hasattr(external, "__dlpack__"):
        external = _Capsule(external)
    array = jax.dlpack.from_dlpack(external)
    devices = pjrt.jax_devices()
    device = next(iter(array.devices()))
    if device in devices and not pjrt.is_spmd():
        index = devices.index(device)
    else:
        index = 0
        array = jax.device_put(array, pjrt.jax_device(0))
    value = Value(tuple(array.shape), pjrt.to_torch_dtype(array.dtype), index, data=array)
    return to_functional(wrap(value))


def install() -> None:
    """XLA tensors' `__dlpack__` and `__dlpack_device__` from this module; others' PyTorch's."""
    original, original_device = torch.Tensor.__dlpack__, torch.Tensor.__dlpack_device__
    if getattr(original, "__wrapped__", None) is not None:
        return

    def __dlpack__(self, *args, **kwargs):
        if self.device.type == "xla":
            return to_dlpack(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    def __dlpack_device__(self):
        if self.device.type == "xla":
            return dlpack_device(self)
        return original_device(self)

    for patched, orig in ((__dlpack__, original), (__dlpack_device__, original_device)):
        patched.__doc__, patched.__wrapped__ = orig.__doc__, orig
    torch.Tensor.__dlpack__, torch.Tensor.__dlpack_device__ = __dlpack__, __dlpack_device__
