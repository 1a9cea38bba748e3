"""Makes 'xla' a device PyTorch can create tensors on.

Hooks installed once at import: the device hooks (the device guard and a refusal of sparse
layouts, from _lazy/hooks/device_guard, which says where they come from; where no guard can be had,
making an XLA tensor raises naming the fix), a fallback kernel for the XLA dispatch key
(reached by factory ops such as `torch.zeros(..., device='xla')`, which have no tensor argument
to dispatch on), and the reseeding of XLA devices by `torch.manual_seed`.
"""
import functools
import importlib
import os
import weakref

import jax
import numpy as np
import torch

from . import device_guard
from ..runtime import pjrt
from ..graph import rng
from ..trace.dispatch import dispatch
from ..launch.transfers import from_cpu
from ..lowering import overload_named
from ..base.frames import run_without_dynamo
from ..graph.ir import Value
from .kernel_libraries import installs_kernels
from ..graph.spmd_layout import shard_data
from ..trace.mark_sharding import from_process_batch
from ..graph.tensor import live_values, to_functional, wrap

_FLOATS = (torch.float32, torch.float64)


def _read_bf16_mode():
    if os.environ.get("XLA_USE_BF16") == "1":
        return {torch.float32: torch.bfloat16, torch.float64: torch.bfloat16}
    if os.environ.get("XLA_DOWNCAST_BF16") == "1":
        return {torch.float32: torch.bfloat16, torch.float64: torch.float32}
    return {}


_bf16 = []


def bf16_mode():
    """The dtype floating tensors take on the device under XLA_USE_BF16/XLA_DOWNCAST_BF16:
    read when the first tensor is put on a device, and fixed from then on (so libraries that
    set the variable after `import torch_xla` still get it)."""
    if not _bf16:
        _bf16.append(_read_bf16_mode())
    return _bf16[0]


_prepared = False


def prepare() -> None:
    """Readies this process for ops on XLA tensors, as asking torch_xla for a device does: the
    runtime started as configured, and the imports done that PyTorch makes lazily on the
    first op (DTensor's, the first time it dispatches to a tensor subclass; dynamo's, by the
    first meta kernel: together over a second), so that they are paid when the device is
    asked for, not inside the first step (its timings, a profile of it). Once per process,
    never while dynamo traces."""
    global _prepared
    if _prepared or torch.compiler.is_compiling():
        return
    pjrt.jax_devices()
    importlib.import_module("torch._dynamo")
    if torch.distributed.is_available():
        importlib.import_module("torch.distributed.tensor")
    _prepared = True


def device_dtype(dtype):
    return bf16_mode().get(dtype, dtype)


def transfer(t: torch.Tensor, device, sharding=None, minibatch=False) -> torch.Tensor:
    """A CPU tensor on an XLA device, already a buffer (`.to(device)` records an `empty` and a
    copy), laid out by the jax `sharding` if given (SPMD; `minibatch`: `t` is this process's
    part of the batch, dim 0 of a global tensor). Data loaders' background threads use it: a
    step ending on another thread at that moment must not find a half-made tensor among the
    live ones."""
    index = torch.device(device).index or 0
    device_guard.check(index)
    value = from_cpu(t, index, dtype=device_dtype(t.dtype))
    if sharding is not None and minibatch:
        try:
            value = from_process_batch(value, sharding)
        except ValueError as e:  # this host's rows do not split over its devices
            raise RuntimeError(
                "When minibatch is configured, the per-host batch size must be divisible by local "
                f"runtime device count. Per host input data shape = {t.size()}, "
                f"local_runtime_device_count = {len(pjrt.jax_devices())} ({e})") from None
    elif sharding is not None:
        shard_data(value, sharding)
    return to_functional(wrap(value))


# The buffers of placeholders, by id (jax arrays cannot be hashed): a placeholder is a buffer
# that never held a value, told apart from one deleted by donation.
placeholder_buffers = weakref.WeakValueDictionary()


def _placeholder_buffer(shape, dtype, index):
    zeros = np.broadcast_to(np.zeros((), pjrt.to_jax_dtype(dtype)), tuple(shape))
    buffer = jax.device_put(zeros, pjrt.jax_device(index))
    buffer.delete()
    placeholder_buffers[id(buffer)] = buffer
    return buffer


def placeholder(shape, dtype, device) -> torch.Tensor:
    """A tensor of `shape` and `dtype` on XLA device `device` with no value: its buffer is
    deleted at once (as a donated one is). Graphs may read it (it is an input of their
    program, whose text shows it); reading it, or running a program on it, raises."""
    index = torch.device(device).index or 0
    device_guard.check(index)
    buffer = _placeholder_buffer(shape, dtype, index)
    return to_functional(wrap(Value(tuple(shape), dtype, index, data=buffer)))


def clear_pending(device) -> None:
    """Drops the pending graphs of the live tensors on XLA device `device`: each such
    tensor becomes a placeholder (a later sync computes nothing for it; reading it raises),
    as torch_xla's `_clear_pending_irs` leaves it."""
    index = torch.device(device).index or 0
    for value in live_values(index):
        if value.node is not None and value.data is None:
            value.set_data(_placeholder_buffer(value.shape, value.dtype, index))


def _factory(op, *args, **kwargs):
    """Factory ops on an XLA device: traced below, wrapped for functionalization unless the
    call already comes from below it (a decomposition inside the engine)."""
    device_guard.check(kwargs.get("device"))
    downcast = bf16_mode()
    if downcast and op._schema.name != "aten::_to_copy":
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        if dtype in downcast and any(a.name == "dtype" for a in op._schema.arguments):
            kwargs["dtype"] = downcast[dtype]
    out = dispatch(op, args, kwargs)
    if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Functionalize):
        return out
    if isinstance(out, torch.Tensor):
        return to_functional(out)
    if isinstance(out, (tuple, list)):
        return type(out)(to_functional(o) if isinstance(o, torch.Tensor) else o for o in out)
    return out


def _hook_manual_seed() -> None:
    import torch.random as random
    original = random.manual_seed

    def manual_seed(seed):
        generator = original(seed)
        rng.manual_seed(int(seed))
        return generator
    manual_seed.__doc__ = original.__doc__
    manual_seed.__wrapped__ = original
    random.manual_seed = manual_seed
    torch.manual_seed = manual_seed


def _patch_storage_data_ptr() -> None:
    """`t.untyped_storage().data_ptr()` of an XLA tensor is 0, as in torch_xla: its data lives
    in a device buffer, not in host memory. (PyTorch would raise for the functional storage
    users' tensors have; safetensors and transformers' tied-weight detection ask for it.)"""
    original = torch.UntypedStorage.data_ptr

    def data_ptr(self):
        if self.device.type == "xla":
            return 0
        return original(self)
    data_ptr.__doc__ = original.__doc__
    data_ptr.__wrapped__ = original
    torch.UntypedStorage.data_ptr = data_ptr


def _copy_from(src, dst, non_blocking=False):
    """`dst.copy_(src)` reached below Python dispatch: `torch.tensor(data, device='xla')`
    builds its tensor with the Python key excluded, then lifts it into functionalization."""
    return dispatch(torch.ops.aten._copy_from.default, (src, dst, non_blocking), {})


# Factories whose composite kernels write into a resized out= tensor: traced whole instead.
_WHOLE_FACTORIES = ("arange", "arange.start", "arange.start_step", "linspace", "logspace",
                    "eye", "eye.m", "range", "range.step", "kaiser_window",
                    "kaiser_window.periodic", "kaiser_window.beta",
                    # whole, a fresh tensor (PyTorch's composite writes an empty one through
                    # `randperm.out`, and views of it taken later start out of date)
                    "randperm", "randperm.generator")

def _backward_on_the_calling_thread() -> None:
    """PyTorch's autograd engine runs the backward pass of a non-CPU device on a thread of
    its own (one per device) while the thread that called `backward()` waits: every step
    hands the pass over and back, and both threads' caches go cold. With the engine's
    multithreading off (`torch.autograd.set_multithreading_enabled(False)`, thread-local) the
    caller runs it, as it does for the CPU. Set on the thread that installs the engine (the
    main thread, as a rule); `set_multithreading_enabled(True)` brings the device threads
    back, and other threads keep them."""
    torch._C._set_multithreading_enabled(False)


@installs_kernels("_", "aten")
def install(fallback, per_op) -> None:
    device_guard.install()
    _backward_on_the_calling_thread()
    fallback.fallback(_factory, "XLA")
    # PyTorch routes a fallback call whose arguments carry the Python key (an XLATensor met
    # below Python dispatch) through a lookup of per-op registrations, so such ops get their
    # own kernel.
    per_op.impl("_copy_from", _copy_from, "XLA")
    for name in _WHOLE_FACTORIES:
        per_op.impl(name, functools.partial(_factory, overload_named(name)), "XLA")
    run_without_dynamo(_factory, _copy_from)
    _hook_manual_seed()
    _patch_storage_data_ptr()
