"""Optimizers for mixed precision that never read the device from the host: `step(found_inf=t)`
skips the update on the device when the scalar tensor `t` is nonzero (a GradScaler found an
inf or NaN), instead of the host checking it first (which would end the step's graph)."""
from .adam import Adam
from .adamw import AdamW
from .sgd import SGD

__all__ = ["Adam", "AdamW", "SGD"]
