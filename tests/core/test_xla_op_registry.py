"""torch_xla.core.xla_op_registry: ops built with XLA's op builder are refused, naming the way
that works here (`call_jax`)."""
import pytest
import torch


def test_op_builder_ops_refuse_naming_call_jax():
    import torch_xla.core.xla_op_registry as xor
    op = xor.register("slice_and_add", lambda a, b: a + b)
    with pytest.raises(NotImplementedError, match="call_jax"):
        op(torch.ones(2), torch.ones(2))
