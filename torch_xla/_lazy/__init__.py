"""The lazy engine behind torch_xla: see ARCHITECTURE.md for how the parts fit.

Importing it installs the engine into PyTorch: the ops with engine meaning into the
dispatch entry, the XLA device's hooks, the fast in-place kernels, torch.save/load and the
configuration of PyTorch's `openxla` dynamo backend.
"""
from . import device, engine_ops, inplace, serialization  # noqa: F401  (engine_ops registers)
from .graph_capture import dynamo_config

device.install()
inplace.install()
serialization.install()
dynamo_config.install()
