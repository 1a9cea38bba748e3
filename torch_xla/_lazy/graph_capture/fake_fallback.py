"""Fake tensors of ops that have no meta kernel, on XLA tensors.

When dynamo (or AOTAutograd, or export) meets an op that has no meta kernel, PyTorch's fake
tensors run the op's real kernel on zeros of the inputs' shapes, on their device, and take
the outputs' shapes from that ("unsafe fallback"). They make those zeros with Python
dispatch turned off, which on an XLA tensor leaves nothing to run it (an internal assert).
This hook does what that fallback does, with dispatch on: zeros on the XLA device, the op
run there (through the counted CPU fallback where it has no lowering, as eagerly), its
outputs made fake. Ops with a meta kernel, custom ops (their fake implementation is their
author's), and calls with no XLA tensor are left to PyTorch.
"""
import torch
from torch._library.utils import is_builtin
from torch._subclasses import fake_impls
from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager
from torch.utils import _pytree as pytree

_meta_works = set()  # ops whose meta kernel ran on XLA fake tensors: left to PyTorch


def _maybe_without_meta(func) -> bool:
    return func not in _meta_works


def _on_xla(obj) -> bool:
    return isinstance(obj, FakeTensor) and obj.fake_device.type == "xla"


def _run_on_xla(fake_mode, func, *args, **kwargs):
    flat, spec = pytree.tree_flatten((args, kwargs))
    if not any(_on_xla(a) for a in flat) or torch.Tag.inplace_view in func.tags \
            or not is_builtin(func):  # a custom op's fake is its author's (a run may act)
        return NotImplemented
    try:  # the meta kernel, as PyTorch tries it first (a kernel may exist and refuse)
        with in_kernel_invocation_manager(fake_mode):
            func(*args, **kwargs)
    except NotImplementedError:
        pass
    else:
        _meta_works.add(func)
        return NotImplemented
    if any(isinstance(a, FakeTensor) and not all(isinstance(d, int) for d in a.shape)
           for a in flat):
        return NotImplemented  # symbolic sizes: no zeros to run on (PyTorch refuses it too)
    real = [torch.zeros(a.shape, dtype=a.dtype, device=a.fake_device)
            if isinstance(a, FakeTensor) else a for a in flat]
    args, kwargs = pytree.tree_unflatten(real, spec)
    out = func(*args, **kwargs)
    inputs = {id(r): a for r, a in zip(real, flat)}  # an input returned is the fake input

    def fake(t):
        given = inputs.get(id(t))
        return fake_mode.fake_tensor_converter.from_real_tensor(fake_mode, t) \
            if given is None else given
    return pytree.tree_map_only(torch.Tensor, fake, out)


def install() -> None:
    if (_maybe_without_meta, _run_on_xla) not in fake_impls.op_implementations_checks:
        fake_impls.op_implementations_checks.append((_maybe_without_meta, _run_on_xla))
