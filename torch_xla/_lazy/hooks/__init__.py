"""PyTorch integration, the top of the engine: what `_lazy.install()` puts into PyTorch.

The XLA device and its guard (`device`, `device_guard`, `guard_build` compiling
`device_hooks.cpp`), the fast in-place kernels (`inplace`), torch.save/load (`serialization`),
module conversion keeping tied weights tied, packed sequences, einsum as one op, the CPU's
checks of `out=` arguments, XLA tensors' DLPack methods, and `kernel_libraries`, the one frame
of every module registering kernels with PyTorch's dispatcher.

Only `_lazy/__init__` and the public package above call in here. Modules here may import
any folder below: graph_capture, trace, step, inspect, launch, lowering, graph, runtime, base.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("device", "dlpack", "kernel_libraries")
