"""PyTorch on XLA devices, compiled and run by XLA through jax/jaxlib (PJRT).

`import torch_xla` makes 'xla' a PyTorch device: tensors placed on it record their ops into
a graph that XLA compiles once and replays. As in torch_xla, it also makes
`torch_xla.runtime`, `torch_xla.core.xla_model` and `torch_xla._XLAC` reachable.
"""
import os as _os

# torch before jax, as a script importing torch first has them: the other order moved the
# interpreter's first full garbage collection of their modules' objects (~0.2 s here) out of
# the imports into the first step's compilation.
import torch as _torch  # noqa: E402

# jax's import marks a host without TPU chips for libtpu (TPU_SKIP_MDS_QUERY=1); the user's
# environment stays as it was (`_internal.tpu` reads the variable as the user sets it).
_skip_mds_query = _os.environ.get("TPU_SKIP_MDS_QUERY")
import jax as _jax  # noqa: E402,F401
if _skip_mds_query is None:
    _os.environ.pop("TPU_SKIP_MDS_QUERY", None)

from . import version as _version  # noqa: E402
_version.warn_if_untested("torch", _torch.__version__)
_version.warn_if_untested("jax", _jax.__version__)

from . import _lazy  # noqa: F401,E402  (installs the device)
from .amp import autocast_mode as _autocast_mode
from .version import __version__  # noqa: F401

_autocast_mode.install()  # torch.autocast('xla') works from here on
from .torch_xla import *  # noqa: F401,F403
from . import _XLAC, runtime  # noqa: F401,E402
from .core import xla_model  # noqa: F401,E402
from . import experimental  # noqa: F401,E402  (reachable as an attribute, as in torch_xla)
from .core import xla_model as xm  # noqa: F401,E402  (torch_xla.xm, as in torch_xla)
from .distributed import xla_backend  # noqa: F401,E402  (registers the 'xla' torch.distributed backend)
from .experimental import gru as _gru  # noqa: E402
_gru.patch_torch_gru()  # torch.nn.GRU runs as a scan on XLA tensors, as in torch_xla

if _os.environ.get("XLA_USE_EAGER_DEBUG_MODE", "0") == "1":  # eager mode from the start
    experimental.eager_mode(True)

_STABLEHLO_NAMES = ("save_as_stablehlo", "save_torch_model_as_stablehlo")


def __getattr__(name):
    """`torch_xla.save_as_stablehlo` and `save_torch_model_as_stablehlo`, as torch_xla exports
    them, imported at first use (`torch_xla.stablehlo` imports torch.export: 0.7 s)."""
    if name in _STABLEHLO_NAMES:
        from . import stablehlo
        return getattr(stablehlo, name)
    raise AttributeError(f"module 'torch_xla' has no attribute '{name}'")
