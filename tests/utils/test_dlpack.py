"""DLPack: XLA tensors to and from torch, jax and numpy arrays, sharing the buffer on the
CPU, with the values and dtypes the source has."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.utils.dlpack as xdlpack
from torch_xla._lazy.graph.tensor import unwrap
from tests.compare import assert_same


def _pointer(t):
    return unwrap(t)._value.data.unsafe_buffer_pointer()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_from_a_cpu_tensor_shares_its_memory(dev, dtype):
    c = torch.arange(12).reshape(3, 4).to(dtype)
    for source in (c, torch.utils.dlpack.to_dlpack(c)):  # the tensor, or a bare capsule
        x = xdlpack.from_dlpack(source)
        assert x.device == dev and x.dtype == dtype and x.shape == c.shape
        assert _pointer(x) == c.data_ptr()
        assert_same(x, c)
    assert_same(x + x, c + c)


def test_to_dlpack_gives_the_buffer_of_a_computed_tensor(dev):
    a = torch.randn(3, 4)
    y = a.to(dev) * 2  # pending: computed for the capsule
    back = torch.utils.dlpack.from_dlpack(xdlpack.to_dlpack(y))
    assert back.data_ptr() == _pointer(y)
    assert_same(back, a * 2, device="cpu")


def test_tensor_dlpack_protocol_on_xla_tensors(dev):
    a = torch.randn(2, 5)
    y = a.to(dev) + 1
    j = jax.dlpack.from_dlpack(y)
    assert j.unsafe_buffer_pointer() == _pointer(y)
    for host in (np.asarray(j), np.from_dlpack(y)):  # numpy's views of the device's buffer
        assert_same(torch.from_numpy(host), a + 1, rtol=1e-6, atol=0, device="cpu")
    assert torch.from_dlpack(y).data_ptr() == _pointer(y)
    assert y.__dlpack_device__() == j.__dlpack_device__()
    c = torch.ones(2)  # CPU tensors keep PyTorch's own methods
    assert torch.from_dlpack(c).data_ptr() == c.data_ptr()


def test_from_a_jax_array_shares_its_buffer(dev):
    j = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    x = xdlpack.from_dlpack(j)
    assert _pointer(x) == j.unsafe_buffer_pointer()
    assert_same(x.sum(0), torch.arange(6.0).reshape(2, 3).sum(0))


def test_a_step_never_writes_into_a_shared_buffer(dev):
    c = torch.zeros(4)
    x = xdlpack.from_dlpack(c)
    x.add_(1)  # the old buffer is held by no tensor: a step may donate it
    xm.mark_step()
    assert_same(x, torch.ones(4))
    assert torch.equal(c, torch.zeros(4))


def test_refusals():
    with pytest.raises(TypeError, match="DLPack capsule"):
        xdlpack.from_dlpack([1, 2])
