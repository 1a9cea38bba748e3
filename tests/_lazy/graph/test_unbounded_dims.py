"""Dimensions marked unbounded (torch_xla/_lazy/graph/unbounded_dims.py, `_XLAC._xla_mark_dynamic`):
symbolic (`?`) in the pending graph's StableHLO, broadcast by torch_xla's rule; the program
still runs at the buffers' sizes."""
import re

import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm

from tests.compare import assert_same


def _broadcasts(text):
    """(dims, operand type, result type) of each dynamic_broadcast_in_dim of the text."""
    return re.findall(r"dynamic_broadcast_in_dim %\S+, %\S+, dims = (\[[\d, ]*\]) : "
                      r"\((tensor<[^>]*>), tensor<\dxi32>\) -> (tensor<[^>]*>)", text)


def test_a_marked_dim_is_symbolic_and_broadcasts_against_static_and_symbolic_sizes(dev):
    a_cpu, b_cpu = torch.randn(3, 5, 4), torch.randn(1, 4)
    a, b = a_cpu.to(dev), b_cpu.to(dev)
    torch_xla._XLAC._xla_mark_dynamic(a, 0)
    torch_xla._XLAC._xla_mark_dynamic(a, 2)
    torch_xla._XLAC._xla_mark_dynamic(b, 1)
    c = a * b
    text = xm.get_stablehlo([c])
    assert "tensor<?x5x?xf32>" in text
    # a to the result's shape; b's (1, ?) against a's (5, ?): 5, and the larger of the two ?
    assert set(_broadcasts(text)) == {("[0, 1, 2]", "tensor<?x5x?xf32>", "tensor<?x5x?xf32>"),
                                      ("[1, 2]", "tensor<1x?xf32>", "tensor<?x5x?xf32>")}
    assert_same(c, a_cpu * b_cpu)  # runs at the buffers' sizes


def test_without_marks_the_text_is_static(dev):
    c = torch.randn(3, 1, device=dev) * torch.randn(1, 4, device=dev)
    text = xm.get_stablehlo([c])
    assert "?" not in text and not _broadcasts(text)


def test_a_mark_takes_a_buffer_and_a_dim_in_range(dev):
    x = torch.ones(2, 3, device=dev)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch_xla._XLAC._xla_mark_dynamic(x, 2)
    with pytest.raises(NotImplementedError, match="pending graph"):
        torch_xla._XLAC._xla_mark_dynamic(x + 1, 0)
