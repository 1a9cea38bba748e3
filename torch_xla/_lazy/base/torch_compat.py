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


@functools.cache
def dtensor_subclasses_dispatch_themselves() -> bool:
    """Whether an op on a DTensor subclass overriding `__torch_dispatch__` reaches that
    override, as in torch 2.9 and 2.12 and newer; torch 2.10 and 2.11 hand every DTensor,
    subclasses too, to DTensor's own C++ dispatch (pytorch/pytorch#177716), which reads
    DTensor's `_spec` and `_local_tensor` (this probe has neither: AttributeError there)."""
    from torch.distributed.tensor import DTensor
    called = []

    class Probe(DTensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            called.append(func)
            return torch.empty(1)

    probe = torch.Tensor._make_wrapper_subclass(Probe, (1,), dtype=torch.float32, device="cpu")
    try:
        aten.neg.default(probe)
    except AttributeError:
        pass
    return bool(called)


# Differences (CPU, delta 8.7) between rounding each step of a Huber loss to the dtype and
# computing it in float32, rounded once: 59.21875 against 59.25, 25.375 against 25.25.
_HUBER_PROBES = {"float16": (7.73046875, -3.4296875), "bfloat16": (9.375, 2.265625)}


@functools.cache
def huber_loss_rounds_each_step(dtype_name: str) -> bool:
    """Whether the CPU's `huber_loss` of float16 or bfloat16 (`dtype_name`) rounds each step
    to the dtype, as torch 2.9's kernel does for both, rather than computing in float32 and
    rounding once, as torch 2.13's does for float16 (its bfloat16 still rounds each step)."""
    dtype = getattr(torch, dtype_name)
    x, y = (torch.tensor([v], dtype=dtype) for v in _HUBER_PROBES[dtype_name])
    once = torch.nn.functional.huber_loss(x.float(), y.float(), reduction="none", delta=8.7)
    each = torch.nn.functional.huber_loss(x, y, reduction="none", delta=8.7)
    return not torch.equal(each, once.to(dtype))


@functools.cache
def arange_int64_length_truncated() -> bool:
    """Whether an int64 `arange` with bounds or a step that are not integers gets its length
    from the bounds and step truncated to integers, as torch 2.13 and older do (0, 5, 1.5:
    5 values), rather than from their ratio in double (4 values: torch 2.14 and newer, where
    only integer arguments get the truncated rule). The values use the truncated step in
    both."""
    return torch.arange(0, 5, 1.5, dtype=torch.int64, device="meta").shape[0] == 5


@functools.cache
def linspace_in_float32(dtype_name: str) -> bool:
    """Whether the CPU's `linspace` of float16 or bfloat16 (`dtype_name`) computes in float32
    from the bounds rounded to the dtype and rounds once, as torch 2.15 does, rather than
    computing in the dtype itself (torch 2.14 and older)."""
    dtype = getattr(torch, dtype_name)
    once = torch.linspace(-1, 7, 13, dtype=torch.float32).to(dtype)
    return torch.equal(torch.linspace(-1, 7, 13, dtype=dtype), once)


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
