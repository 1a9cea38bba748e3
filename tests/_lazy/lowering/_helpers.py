"""Seeded inputs shared by the lowering tests (their comparisons are tests/compare.py's)."""
import torch


def rand(*shape, seed=0, low=-3.0, high=3.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (high - low) + low


def rint(*shape, seed=0, low=-9, high=10, dtype=torch.int64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def seeded_randn(*shape, seed=0, grad=True):
    torch.manual_seed(seed)
    return torch.randn(*shape).requires_grad_(grad)
