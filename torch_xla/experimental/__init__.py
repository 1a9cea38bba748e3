"""torch_xla.experimental: newer APIs (gradient_accumulation)."""
