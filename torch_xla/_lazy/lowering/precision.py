"""The precision of float32 matrix products and convolutions in the programs.

torch_xla's setting (`torch_xla.backends.set_mat_mul_precision`: 'default', 'high' or
'highest', XLA's PrecisionConfig levels) once a user sets it; until then PyTorch's own
(`torch.set_float32_matmul_precision`: 'highest', its default, is exact float32; 'high' and
'medium' allow XLA's faster passes on GPU/TPU). Products read it when a program is traced,
and compiled programs are keyed by it (`setting()`), so a change takes effect at the next
program instead of being hidden by the cache.
"""
import torch
from jax import lax

LEVELS = ("default", "high", "highest")
_LAX = {"default": lax.Precision.DEFAULT, "high": lax.Precision.HIGH,
        "highest": lax.Precision.HIGHEST}
_FROM_TORCH = {"highest": "highest", "high": "high", "medium": "default"}
_chosen = None  # torch_xla's setting, None until set


def set_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"Invalid mat mul precision {level!r}: expected one of "
                         f"{', '.join(LEVELS)}")
    global _chosen
    _chosen = level


def setting() -> str:
    """The level products take now: torch_xla's setting, else PyTorch's."""
    return _chosen or _FROM_TORCH.get(torch.get_float32_matmul_precision(), "default")


def matmul_precision():
    """`setting()` as the lax.Precision jax's products take."""
    return _LAX[setting()]
