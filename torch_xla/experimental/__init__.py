"""torch_xla.experimental: newer APIs (spmd_fully_sharded_data_parallel)."""
