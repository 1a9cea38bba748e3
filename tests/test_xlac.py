"""torch_xla._XLAC's script helpers that are not about graph text or sharding: XLA's
DotGeneral on XLA tensors, the execution guard."""
import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from tests.compare import assert_same


def test_dot_general_contracts_the_dimensions_given(dev):
    t, w = torch.randn(2, 3), torch.randn(3, 4)
    y = torch_xla._XLAC._xla_dot_general(t.to(dev), w.to(dev), (([1], [0]), ()))
    assert_same(y, t @ w)


def test_dot_general_with_batch_dimensions_and_a_result_dtype(dev):
    a, b = torch.randn(3, 4, 5), torch.randn(3, 2, 5)
    y = torch_xla._XLAC._xla_dot_general(a.to(dev), b.to(dev), (([2], [2]), ([0], [0])),
                                         preferred_element_type=torch.float64)
    assert y.dtype == torch.float64 and y.shape == (3, 4, 2)
    assert_same(y, torch.einsum("bik,bjk->bij", a.double(), b.double()))


def test_dot_general_reads_pending_in_place_updates(dev):
    t = torch.ones(2, 1, device=dev)
    t[0][0] = 0
    y = torch_xla._XLAC._xla_dot_general(t, torch.ones(1, 2, device=dev), (([1], [0]), ()))
    assert y.cpu().tolist() == [[0, 0], [1, 1]]


def test_disallowed_execution_raises_and_leaves_the_graph_pending(dev):
    x = torch.ones(2, device=dev) + 1
    torch_xla._XLAC._set_allow_execution(False)
    try:
        met.clear_counters()
        with pytest.raises(RuntimeError, match="Unexpected execution"):
            x.cpu()
        assert met.counter_value("UncachedCompile") is None
    finally:
        torch_xla._XLAC._set_allow_execution(True)
    assert x.cpu().tolist() == [2, 2]
