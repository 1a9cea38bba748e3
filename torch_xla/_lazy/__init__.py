"""The lazy engine behind torch_xla: see ARCHITECTURE.md for how the parts fit."""
from . import device, serialization

device.install()
serialization.install()
