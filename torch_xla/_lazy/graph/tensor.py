"""The XLA tensor: a wrapper subclass around a lazy `Value`, and what users hold above it.

Users hold plain `torch.Tensor`s on `xla:N` made by PyTorch's functionalization
(`torch._to_functional_tensor`), exactly as torch_xla does in C++: it turns views and
in-place ops into functional ops before they reach `XLATensor.__torch_dispatch__`, so the
engine below only ever sees values, never aliasing. An `XLATensor`'s own metadata is fixed:
contiguous, with the shape and dtype of its value.

This module is the data model only. The engine's dispatch entry sits above it and installs
itself as `XLATensor`'s handler (`set_dispatch_entry`), so an op arriving here goes down
into the engine without this module importing it.
"""
import sys
import threading
import weakref

import torch

from ..base import counters
from ..base.frames import run_without_dynamo
from .ir import Value

# Every XLATensor made, in creation order (a stable order keeps graph keys stable), as weak
# references without callbacks (a callback run at each tensor's death cost a third of its
# making): the dead ones are dropped when the list is read (`live_tensors`, each
# `mark_step`) and when it has doubled since.
_refs = []
_prune_lock = threading.Lock()  # one pruning at a time; tensors are appended without it
_MIN_BOUND = 1024
_bound = [_MIN_BOUND]           # the length that prunes at the next `wrap`


_DEVICES = [torch.device("xla", i) for i in range(64)]


def dispatch_depth() -> int:
    """How many engine dispatches run on this thread (1: the op came from user code): the
    frames of `XLATensor.__torch_dispatch__` on its stack, counted when asked (rarely), so
    that no op pays for keeping a count."""
    code = XLATensor.__torch_dispatch__.__code__
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth += frame.f_code is code
        frame = frame.f_back
    return depth


def _no_entry(func, args, kwargs):
    raise RuntimeError(f"{func}: the XLA engine's dispatch entry is not installed")


_entry = [_no_entry]


def set_dispatch_entry(fn) -> None:
    """Installs `fn(func, args, kwargs)` as the handler of every ATen op on an XLATensor."""
    _entry[0] = fn


class XLATensor(torch.Tensor):
    # its value in a slot: no instance dict made for each tensor (PyTorch keeps the Python
    # object, slot included, while a functional tensor holds the tensor)
    __slots__ = ("_value",)

    @staticmethod
    def __new__(cls, value: Value):
        return wrap(value)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _entry[0](func, args, kwargs or {})

    def __repr__(self):
        return f"XLATensor({list(self.shape)}, {self.dtype}, xla:{self._value.device})"


run_without_dynamo(XLATensor.__torch_dispatch__)


class BoundedXLATensor(XLATensor):
    """An XLA tensor of bounded dynamic sizes (`Value.sizes`: `dynamic_sizes` SymInts
    where the size is computed on the device). A class of its own so that the dispatch's
    fast paths, which test `type(t) is XLATensor`, never see one: every op on it goes the
    way that keeps its sizes symbolic."""
    __slots__ = ()


def wrap(value: Value) -> XLATensor:
    # positional: (cls, size, strides, storage_offset, memory_format, dtype, layout, device),
    # parsed faster than keywords
    sizes = value.sizes
    t = _make_wrapper(XLATensor if sizes is None else BoundedXLATensor,
                      value.shape if sizes is None else sizes, None, None, None, value.dtype,
                      torch.strided, _DEVICES[value.device])
    t._value = value
    next(_created)
    _refs.append(_ref(t))
    if len(_refs) > _bound[0] and _prune_lock.acquire(blocking=False):
        try:
            _prune()
        finally:
            _prune_lock.release()
    return t


_make_wrapper = torch.Tensor._make_wrapper_subclass
_ref = weakref.ref
_created = counters.op_counter("CreateXlaTensor")  # torch_xla's names for tensors made and gone


def _prune():
    """The live tensors, in creation order, their references alone kept in `_refs` (with
    `_prune_lock` held; tensors made meanwhile, by other threads, stay at its end)."""
    n = len(_refs)
    refs = _refs[:n]
    tensors = [r() for r in refs]
    _refs[:n] = [r for r, t in zip(refs, tensors) if t is not None]
    _bound[0] = max(_MIN_BOUND, 2 * len(_refs))
    return [t for t in tensors if t is not None]


def _destroyed() -> int:
    with _prune_lock:
        return counters.op_total("CreateXlaTensor") - len(_prune())


counters.computed_counter("DestroyXlaTensor", _destroyed)


def to_functional(inner: XLATensor) -> torch.Tensor:
    return torch._to_functional_tensor(inner)


def unwrap(t: torch.Tensor) -> XLATensor:
    """The XLATensor behind a user-visible tensor on an XLA device."""
    if isinstance(t, XLATensor):
        return t
    if torch._is_functional_tensor(t):
        torch._sync(t)
        inner = torch._from_functional_tensor(t)
        if isinstance(inner, XLATensor):
            return inner
    raise TypeError(f"expected a tensor on an XLA device, got one on {t.device}")


def is_pending(t: torch.Tensor) -> bool:
    """Whether user tensor `t`'s value is still pending (a sync would compute it)."""
    return unwrap(t)._value.node is not None


def live_tensors(device=None):
    """Every live XLATensor (on `device`, if given), in creation order."""
    with _prune_lock:
        tensors = _prune()
    return tensors if device is None else [t for t in tensors if t._value.device == device]


def live_values(device=None):
    """The values of every live XLATensor (on `device`, if given), in creation order."""
    return [t._value for t in live_tensors(device)]
