"""torch_xla.backends: settings of the XLA backend, as torch.backends.* are for PyTorch's.

`set_mat_mul_precision` / `get_mat_mul_precision`: the precision of float32 matrix products
and convolutions in the programs compiled from then on ('default', 'high', 'highest': XLA's
PrecisionConfig levels; on TPU 'default' multiplies in bfloat16, 'high' in three bfloat16
passes, 'highest' in six; the CPU computes float32 at every level). Until it is set, the
programs follow `torch.get_float32_matmul_precision()` ('highest' by default, where upstream
torch_xla starts at 'default'). Programs compiled before a change are not reused after it.
"""
import logging

from torch_xla._lazy.lowering import precision as _precision

__all__ = ["set_mat_mul_precision", "get_mat_mul_precision"]

logger = logging.getLogger(__name__)
_WARNING_MESSAGE = ("The mat mul precision is global state of the process: set it once, "
                    "before the programs it should apply to, and check results where it "
                    "changes.")
_LEVELS = ("default", "high", "highest")


def set_mat_mul_precision(precision: str) -> None:
    """Sets the precision of float32 products: 'default', 'high' or 'highest'."""
    if precision not in _LEVELS:
        raise ValueError(f"Invalid precision: {precision!r}. Must be one of "
                         f"{', '.join(_LEVELS)}.")
    logger.warning(_WARNING_MESSAGE)
    _precision.set_level(precision)


def get_mat_mul_precision() -> str:
    """The precision float32 products take now: 'default', 'high' or 'highest'."""
    return _precision.setting()
