"""What the engine depends on that differs between the torch releases pyproject.toml admits.

Each difference is one function here, decided by asking the running torch (a probe on small
CPU tensors, or the presence of a name), not by comparing version numbers, and cached.
"""
import functools

import torch

aten = torch.ops.aten


@functools.cache
def solve_factors_transpose() -> bool:
    """Whether `_linalg_solve_ex` (and `linalg.inv_ex`, which solves with it) returns the LU
    of Aᵀ for a real A, as torch 2.9 does (its backward then solves with the adjoint), rather
    than the LU of A itself (torch 2.11 and newer). The LU, and the `info` read off it, must be
    the one PyTorch's backward and users expect."""
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    lu_of_a = torch.linalg.lu_factor(a).LU
    return not torch.equal(aten._linalg_solve_ex(a, torch.eye(2))[1], lu_of_a)


# Ops whose meta kernel cannot run on meta tensors in some admitted torch release, though the
# op's outputs do not depend on values: torch 2.9's `bucketize.Scalar` reads its boundaries
# with `.item()`. Their output shapes and dtypes come from a stand-in call given here.
_META_STAND_INS = {
    aten.bucketize.Scalar: lambda self, boundaries, **kwargs: aten.bucketize.Tensor(
        torch.empty((), dtype=torch.result_type(self, boundaries), device="meta"),
        boundaries, **kwargs),
}


def meta_stand_in(func):
    """A meta-tensor call with `func`'s outputs, where `func`'s own meta kernel cannot run on
    some admitted torch release; else None."""
    return _META_STAND_INS.get(func)


def aten_overloads(*names):
    """The overloads among `names` ('packet.overload') that this torch has: ops some admitted
    releases lack get their lowerings only where they exist (torch 2.15 removed
    `aten::cholesky`, whose Python function now goes through linalg_cholesky_ex)."""
    found = []
    for name in names:
        packet, _, overload = name.partition(".")
        op = getattr(getattr(aten, packet, None), overload or "default", None)
        if op is not None:
            found.append(op)
    return tuple(found)
