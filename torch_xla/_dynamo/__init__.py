"""torch.compile on XLA devices: PyTorch's `openxla` and `openxla_eval` backends call
`dynamo_bridge.extract_compiled_graph` (also importable as `torch_xla.core.dynamo_bridge`)."""
