"""The lazy engine behind torch_xla: see ARCHITECTURE.md for how the parts fit."""
from . import device, serialization
from ..amp import autocast_mode

device.install()
serialization.install()
autocast_mode.install()
