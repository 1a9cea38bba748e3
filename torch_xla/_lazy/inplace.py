"""Functionalization of the in-place ops that training loops run most, without the meta check.

PyTorch functionalizes an in-place op by first running it on meta tensors (to catch errors
only in-place forms have), then the functional form, then swapping the result into the
tensor. For ops whose meta kernel is written in Python (addcdiv_, addcmul_, lerp_ ...) the
meta run costs 5-30 times the rest: an optimizer step spends most of its tracing time
there. These kernels, registered on the Functionalize key, do the same swap and check the
two errors the meta run exists for (a result that does not fit `self`'s shape, or a dtype
it cannot be cast to) directly, with PyTorch's messages.
"""
import warnings

import torch

from .lowering import overload_named
from .frames import run_without_dynamo
from .sharding import propagate

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
}

_TYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
               torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
               torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
               torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}


def _unwrap(a):
    if isinstance(a, torch.Tensor) and torch._is_functional_tensor(a):
        torch._sync(a)
        return torch._from_functional_tensor(a)
    return a


def _kernel(inplace, functional):
    def kernel(self, *args, **kwargs):
        if not torch._is_functional_tensor(self):
            with torch._C._ExcludeDispatchKeyGuard(_FUNCTIONALIZE):
                return inplace(self, *args, **kwargs)
        inner = _unwrap(self)
        args = [_unwrap(a) for a in args]
        with torch._C._ExcludeDispatchKeyGuard(_FUNCTIONALIZE):
            out = functional(inner, *args, **kwargs)
            if out.shape != inner.shape:
                raise RuntimeError(f"output with shape {list(inner.shape)} doesn't match the "
                                   f"broadcast shape {list(out.shape)}")
            if out.dtype != inner.dtype:
                if not torch.can_cast(out.dtype, inner.dtype):
                    raise RuntimeError(
                        f"result type {_TYPE_NAMES.get(out.dtype, out.dtype)} can't be cast to the "
                        f"desired output type {_TYPE_NAMES.get(inner.dtype, inner.dtype)}")
                out = out.to(inner.dtype)
        propagate(inner, out)
        torch._functionalize_replace(self, out)
        torch._functionalize_commit_update(self)
        torch._sync(self)
        return self
    return kernel


_libs = []


def install() -> None:
    if _libs:
        return
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": intended
        warnings.simplefilter("ignore")
        for name, functional in _HOT.items():
            kernel = _kernel(overload_named(name), functional)
            lib.impl(name, kernel, "Functionalize")
    run_without_dynamo(kernel)
    _libs.append(lib)
