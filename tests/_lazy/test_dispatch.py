"""What happens at the op: PyTorch's errors for bad input, and the counted CPU fallback."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_xla.debug.metrics as met
from torch_xla._lazy import dispatch

BAD_INPUT = [
    (lambda d: torch.ones(2, 3, device=d) + torch.ones(4, device=d), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d) @ torch.ones(2, 3, device=d), RuntimeError),
    (lambda d: torch.ones(2, 2, device=d).mm(torch.ones(2, 2, dtype=torch.int64, device=d)), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d).view(4), RuntimeError),
    (lambda d: torch.ones(3, device=d)[5], IndexError),
    (lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(2, 4, device=d)]), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d).sum(dim=3), IndexError),
    (lambda d: torch.nn.functional.linear(torch.ones(4, 3, device=d), torch.ones(5, 4, device=d)), RuntimeError),
]


@pytest.mark.parametrize("case", range(len(BAD_INPUT)))
def test_bad_input_raises_pytorchs_error_at_the_op(dev, case):
    make, error = BAD_INPUT[case]
    with pytest.raises(error) as on_cpu:
        make("cpu")
    with pytest.raises(error) as on_xla:
        make(dev)  # raised here, at the op, not at a later compile
    assert str(on_xla.value) == str(on_cpu.value)


def test_a_cpu_tensor_meeting_an_xla_tensor_is_an_error(dev):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device=dev) + torch.ones(2)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, 2, device=dev) @ torch.ones(2, 2)


def test_a_cpu_scalar_tensor_may_meet_an_xla_tensor(dev):
    out = torch.ones(2, device=dev) * torch.tensor(3.0)
    assert out.device.type == "xla" and out.cpu().tolist() == [3.0, 3.0]


def _an_op_without_lowering():
    """An op with no lowering and no decomposition (asserted, so the test stays honest)."""
    op = torch.ops.aten._cdist_forward.default
    assert op not in dispatch.REGISTRY and op not in dispatch.decomposition_table
    return op


def test_fallback_runs_on_the_cpu_counts_and_warns_once(dev):
    op = _an_op_without_lowering()
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    met.clear_counters()
    dispatch._warned.discard("aten::_cdist_forward")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = op(a.to(dev), b.to(dev), 2.0, None)
        op(a.to(dev), b.to(dev), 2.0, None)
    assert out.device.type == "xla"
    torch.testing.assert_close(out.cpu(), op(a, b, 2.0, None))
    assert met.counter_value("aten::_cdist_forward") == 2
    assert "aten::_cdist_forward" in met.short_metrics_report()
    assert len([w for w in caught if "_cdist_forward" in str(w.message)]) == 1


def test_fallback_can_be_turned_into_an_error_naming_the_op(dev, monkeypatch):
    op = _an_op_without_lowering()
    monkeypatch.setenv("XLA_NO_CPU_FALLBACK", "1")
    with pytest.raises(NotImplementedError, match="aten::_cdist_forward"):
        op(torch.randn(3, 4, device=dev), torch.randn(5, 4, device=dev), 2.0, None)


def test_max_of_an_empty_tensor_raises_at_the_op(dev):
    with pytest.raises(RuntimeError) as on_cpu:
        torch.empty(0).max()
    with pytest.raises(RuntimeError) as on_xla:
        torch.empty(0, device=dev).max()
    assert str(on_xla.value) == str(on_cpu.value)
