"""The lazy engine behind torch_xla: see ARCHITECTURE.md for how the parts fit."""
from . import device, inplace, serialization
from ..amp import autocast_mode

device.install()
inplace.install()
serialization.install()
autocast_mode.install()
