"""Functionalization of the in-place ops that training loops run most, without the meta check.

PyTorch functionalizes an in-place op by first running it on meta tensors (to catch errors
only in-place forms have), then the functional form, then swapping the result into the
tensor. For ops whose meta kernel is written in Python (addcdiv_, addcmul_, lerp_ ...) the
meta run costs 5-30 times the rest: an optimizer step spends most of its tracing time
there. These kernels, registered on the Functionalize key, do the same swap and check the
two errors the meta run exists for (a result that does not fit `self`'s shape, or a dtype
it cannot be cast to) directly, with PyTorch's messages.

On an XLA tensor that shares its functional storage with no other tensor (a parameter or
an optimizer's state between steps), the new value becomes the storage's base instead of
an update queued on it. PyTorch's way (`commit_update`, then `sync`) replays the tensor's
view chain onto the new base (a parameter is a `detach` of the tensor it was made from)
and leaves the storage a generation ahead, so every view taken of the tensor afterwards
(`weight.t()` in each forward) starts out of date and is rebuilt, op by op, at its first
use. A fresh storage has neither: the step's graph loses those copies and the tracing
their ops.
"""

import torch

from ..trace.dispatch import dispatch
from ..base.frames import run_without_dynamo
from .kernel_libraries import installs_kernels
from ..lowering import overload_named
from ..trace.mark_sharding import propagate
from ..graph.tensor import XLATensor

aten = torch.ops.aten
_FUNCTIONALIZE = torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)

# in-place overload -> functional overload
_HOT = {
    "add_.Tensor": aten.add.Tensor, "add_.Scalar": aten.add.Scalar,
    "sub_.Tensor": aten.sub.Tensor, "sub_.Scalar": aten.sub.Scalar,
    "mul_.Tensor": aten.mul.Tensor, "mul_.Scalar": aten.mul.Scalar,
    "div_.Tensor": aten.div.Tensor, "div_.Scalar": aten.div.Scalar,
    "addcdiv_": aten.addcdiv.default, "addcmul_": aten.addcmul.default,
    "lerp_.Scalar": aten.lerp.Scalar, "lerp_.Tensor": aten.lerp.Tensor,
    "sqrt_": aten.sqrt.default, "clamp_min_": aten.clamp_min.default,
    "clamp_max_": aten.clamp_max.default,
    # what factories (`torch.zeros`, `torch.full`, `make_tensor`) run on the new tensor
    "zero_": aten.zero.default, "fill_.Scalar": aten.fill.Scalar,
    "uniform_": aten.uniform.default, "normal_": aten.normal_functional.default,
    "random_": aten.random.default, "random_.from": getattr(aten.random, "from"),
    "random_.to": aten.random.to, "exponential_": aten.exponential.default,
    "geometric_": aten.geometric.default,
}

_TYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
               torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
               torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
               torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}

_is_functional = torch._is_functional_tensor
_from_functional = torch._from_functional_tensor
# PyTorch's C++ sync (`torch._sync` adds the handling of Python `FunctionalTensor`s, which
# never reach the Functionalize key's kernels)
_sync = torch._functionalize_sync
_modes = torch._C._len_torch_dispatch_stack
_use_count = torch._C._storage_Use_Count


def _unwrap(a):
    if isinstance(a, torch.Tensor) and _is_functional(a):
        _sync(a)
        return _from_functional(a)
    return a


def _unshared(self) -> bool:
    """Whether no tensor but `self` holds its functional storage (the count includes the
    storage object made to ask), and the storage is no larger than `self`."""
    storage = self.untyped_storage()
    return _use_count(storage._cdata) == 2 and storage.nbytes() == self.nbytes


def _fitted(out, inner):
    """The functional result `out` as the new value of `inner`: PyTorch's errors where it
    does not fit, else cast to `inner`'s dtype."""
    if out.shape != inner.shape:
        raise RuntimeError(f"output with shape {list(inner.shape)} doesn't match the "
                           f"broadcast shape {list(out.shape)}")
    if out.dtype != inner.dtype:
        if not torch.can_cast(out.dtype, inner.dtype):
            raise RuntimeError(
                f"result type {_TYPE_NAMES.get(out.dtype, out.dtype)} can't be cast to the "
                f"desired output type {_TYPE_NAMES.get(inner.dtype, inner.dtype)}")
        with torch._C._ExcludeDispatchKeyGuard(_FUNCTIONALIZE):
            out = out.to(inner.dtype)
    return out


def _kernel(inplace, functional):
    def kernel(self, *args, **kwargs):
        if not _is_functional(self):
            with torch._C._ExcludeDispatchKeyGuard(_FUNCTIONALIZE):
                return inplace(self, *args, **kwargs)
        _sync(self)
        inner = _from_functional(self)
        args = [_unwrap(a) for a in args]
        if type(inner) is XLATensor and not _modes():
            # the engine's entry, as the dispatcher below this key would call it
            out = dispatch(functional, (inner, *args), kwargs)
            old, new = inner._value, out._value
            if new.shape != old.shape or new.dtype is not old.dtype:
                out = _fitted(out, inner)
            if old.sharding is not None:
                propagate(inner, out)
            torch._functionalize_replace(self, out)
            if _unshared(self):
                torch._C._unsafe_reset_storage(self)
                return self
        else:
            with torch._C._ExcludeDispatchKeyGuard(_FUNCTIONALIZE):
                out = _fitted(functional(inner, *args, **kwargs), inner)
            propagate(inner, out)
            torch._functionalize_replace(self, out)
        torch._functionalize_commit_update(self)
        _sync(self)
        return self
    return kernel



@installs_kernels("aten")
def install(lib) -> None:
    for name, functional in _HOT.items():
        kernel = _kernel(overload_named(name), functional)
        lib.impl(name, kernel, "Functionalize")
    run_without_dynamo(kernel)
