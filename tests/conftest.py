"""Shared test helpers: the XLA device, and running one function on the CPU and the device."""
import os

os.environ.setdefault("CPU_NUM_DEVICES", "1")

import pytest
import torch

import torch_xla  # noqa: F401
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met


@pytest.fixture
def dev():
    return xm.xla_device()


def to_xla(obj, device=None):
    """Copies every tensor in a nested structure to the XLA device, keeping requires_grad."""
    device = device or xm.xla_device()
    if isinstance(obj, torch.Tensor):
        out = obj.detach().to(device)
        return out.requires_grad_(obj.requires_grad)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_xla(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_xla(v, device) for k, v in obj.items()}
    return obj


def to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(o) for o in obj)
    return obj


def assert_same(actual, expected, rtol=1.3e-6, atol=1e-5):
    """Values, dtypes and shapes equal, `actual` from the device, `expected` from the CPU."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), type(actual)
        actual = actual.detach().cpu()
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
        assert actual.shape == expected.shape, (actual.shape, expected.shape)
        torch.testing.assert_close(actual, expected.detach(), rtol=rtol, atol=atol, equal_nan=True)
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol)
    else:
        assert actual == expected, (actual, expected)


def check(fn, *args, rtol=1.3e-6, atol=1e-5, **kwargs):
    """Runs fn on CPU tensors and on device copies of them; asserts the same results."""
    expected = fn(*args, **kwargs)
    actual = fn(*to_xla(args), **to_xla(kwargs))
    xm.mark_step()  # one program for all outputs
    assert_same(actual, expected, rtol, atol)
    return actual


def compiles():
    return met.counter_value("UncachedCompile") or 0


def fallbacks():
    """Names of the ops that ran through the CPU fallback so far (counters `aten::NAME`,
    `prims::NAME`, ...)."""
    return {n for n in met.counter_names() if "::" in n}


def check_lowered(fn, *args, rtol=1.3e-6, atol=1e-5, **kwargs):
    """`check`, and no op of fn fell back to the CPU while it ran on the device."""
    met.clear_counters()
    out = check(fn, *args, rtol=rtol, atol=atol, **kwargs)
    assert not fallbacks(), f"ran on the CPU: {sorted(fallbacks())}"
    return out
