"""torch_xla.backends' mat mul precision: what it reads back, what it warns, and that the
programs compiled after a change carry the new precision (compiled anew, not from cache)."""
import logging

import pytest
import torch

import torch_xla
import torch_xla.backends as backends
import torch_xla.debug.metrics as met
from torch_xla._lazy.lowering import precision


@pytest.fixture
def restore_precision(monkeypatch):
    """The setting as it was before the test (unset: PyTorch's is followed)."""
    monkeypatch.setattr(precision, "_chosen", precision._chosen)


@pytest.mark.parametrize("level", ["default", "high", "highest"])
def test_set_then_get(level, restore_precision, caplog):
    with caplog.at_level(logging.WARNING, logger=backends.logger.name):
        backends.set_mat_mul_precision(level)
    assert backends.get_mat_mul_precision() == level
    assert torch_xla._XLAC._xla_get_mat_mul_precision() == level
    assert [r.getMessage() for r in caplog.records] == [backends._WARNING_MESSAGE]


def test_unset_it_follows_pytorch(restore_precision, monkeypatch):
    monkeypatch.setattr(precision, "_chosen", None)
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert backends.get_mat_mul_precision() == "default"
        torch.set_float32_matmul_precision("highest")
        assert backends.get_mat_mul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(old)


def test_unknown_level_is_refused(restore_precision):
    before = backends.get_mat_mul_precision()
    with pytest.raises(ValueError, match="BAD"):
        backends.set_mat_mul_precision("BAD")
    assert backends.get_mat_mul_precision() == before


def test_programs_take_the_precision_set(dev, restore_precision):
    a = torch.randn(4, 4, device=dev)
    b = torch.randn(4, 4, device=dev)
    texts = {}
    for level in ("default", "highest"):
        torch_xla._XLAC._xla_set_mat_mul_precision(level)
        texts[level] = torch_xla._XLAC._get_xla_tensors_hlo([a @ b])
    assert "highest" in texts["highest"]
    assert "highest" not in texts["default"]


def test_a_change_compiles_the_same_graph_anew(dev, restore_precision):
    a = torch.randn(4, 4, device=dev)
    torch_xla._XLAC._xla_set_mat_mul_precision("high")
    (a @ a).cpu()
    met.clear_counters()
    (a @ a).cpu()
    assert met.counter_value("UncachedCompile") is None  # same precision: from the cache
    torch_xla._XLAC._xla_set_mat_mul_precision("highest")
    (a @ a).cpu()
    assert met.counter_value("UncachedCompile") == 1
