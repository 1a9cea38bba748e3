"""torch_xla.experimental: newer APIs (gradient_accumulation, spmd_fully_sharded_data_parallel,
distributed_checkpoint)."""
