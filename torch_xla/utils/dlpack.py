"""DLPack exchange of XLA tensors with other libraries (jax, numpy, CPU or CUDA PyTorch),
without a copy where the buffer can be shared (see `torch_xla._lazy.hooks.dlpack`).

`to_dlpack(xla_tensor)` gives a DLPack capsule of the tensor's device buffer;
`from_dlpack(obj)` makes an XLA tensor of an object with `__dlpack__` (or of a capsule).
`Tensor.__dlpack__` of XLA tensors gives the same capsule, so `torch.from_dlpack`,
`jax.dlpack.from_dlpack` and `numpy.from_dlpack` take XLA tensors directly.
"""
from typing import Any

from torch_xla._lazy.hooks import dlpack as _dlpack

__all__ = ["to_dlpack", "from_dlpack"]


def to_dlpack(xla_tensor: Any):
    """A DLPack capsule sharing the buffer of `xla_tensor` (computed first if pending)."""
    return _dlpack.to_dlpack(xla_tensor)


def from_dlpack(ext_tensor: Any):
    """An XLA tensor on the buffer of `ext_tensor`: an object with `__dlpack__` and
    `__dlpack_device__` (a jax array, a CPU or CUDA torch tensor, a numpy array), or a DLPack
    capsule."""
    return _dlpack.from_dlpack(ext_tensor)
