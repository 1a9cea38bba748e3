"""torch_xla.experimental: newer APIs (eager mode, gradient_accumulation,
spmd_fully_sharded_data_parallel, distributed_checkpoint)."""
from .eager import eager_mode, eager_mode_context, is_eager_mode  # noqa: F401
