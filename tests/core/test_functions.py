"""torch_xla.core.functions on one replica (several replicas: tests/distributed/_api_workers.py)."""
import pytest
import torch

import torch_xla.core.functions as xf
import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, to_xla


def test_sync_batch_norm_normalizes_by_the_batch(dev):
    x = torch.randn(6, 3, 4, generator=torch.Generator().manual_seed(0))
    bn = xf.SyncBatchNorm(3).to(dev)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
    out = bn(to_xla(x))
    expected = torch.nn.functional.batch_norm(x, None, None, torch.tensor([1.0, 2.0, 0.5]), torch.zeros(3),
                                              training=True, eps=1e-5)
    assert_same(out, expected, rtol=1e-4, atol=1e-5)
    assert_same(bn.running_mean, 0.1 * x.mean(dim=(0, 2)), rtol=1e-4, atol=1e-6)
    bn.eval()
    assert bn(to_xla(x)).shape == x.shape
    with pytest.raises(ValueError, match="3 channels in dimension 1"):
        bn(torch.ones(2, 4, device=dev))


def test_distributed_mm_on_one_replica_is_a_matmul(dev):
    w, x = torch.randn(2, 3), torch.randn(3, 4)
    assert_same(xf.distributed_mm(to_xla(w), to_xla(x), split=2), w @ x, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="split 3 does not divide"):
        xf.distributed_mm(to_xla(w), to_xla(x), split=3)


def test_collectives_without_a_gradient_raise(dev):
    with pytest.raises(RuntimeError, match="'and' has no gradient"):
        xf.all_reduce(xm.REDUCE_AND, torch.ones(2, device=dev))
    with pytest.raises(RuntimeError, match="only 'sum' has a gradient"):
        xf.reduce_scatter(xm.REDUCE_MAX, torch.ones(2, device=dev), 1.0, 0, 1)


def test_gradients_on_one_replica(dev):
    x = torch.tensor([1.0, 2.0], device=dev).requires_grad_()
    (xf.all_reduce(xm.REDUCE_MUL, x, scale=2.0) * 3).sum().backward()
    assert x.grad.cpu().tolist() == [6.0, 6.0]
