"""`Module.to(xla_device)` keeps tied parameters and buffers tied.

PyTorch's `Module._apply` changes a parameter in place (`param.data = new`) only when the
new tensor's type is compatible with the old one's (CPU and CUDA tensors are); an XLA
tensor is not, so each module's slot gets a new `Parameter` of its own, and a parameter two
modules share (GPT-2's `lm_head.weight is transformer.wte.weight`) becomes two, trained
apart (torch_xla does the same). Buffers are reassigned per module on any device.

Here one conversion (a top-level `_apply` call with its recursion) converts each source
tensor once, and afterwards every slot that held the same parameter or buffer holds the
same result again. Only slots whose results are on an XLA device are touched, so
conversions between other devices behave exactly as PyTorch's.
"""
import threading

import torch

_state = threading.local()


def _on_xla(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "xla"


class _ConvertOnce:
    """fn, with each source tensor converted once per conversion when the result is on an
    XLA device (the tied slots then share one transfer)."""

    def __init__(self, fn):
        self.fn = fn
        self.done = {}  # id(source) -> (source, result); the source is kept alive

    def __call__(self, t):
        hit = self.done.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        out = self.fn(t)
        if _on_xla(out):
            self.done[id(t)] = (t, out)
        return out


def _slots(module):
    """(module, table, key, tensor) for every parameter and buffer slot under `module`."""
    for m in module.modules():
        for table in (m._parameters, m._buffers):
            for key, t in table.items():
                if t is not None:
                    yield m, table, key, t


def _retie(before):
    """Gives the slots that held the same tensor before the conversion the first one's
    result again."""
    first = {}
    for (module, table, key, old) in before:
        new = table.get(key)
        if id(old) not in first:
            first[id(old)] = new
            continue
        shared = first[id(old)]
        if new is not shared and _on_xla(shared) and _on_xla(new):
            table[key] = shared


def install() -> None:
    original = torch.nn.Module._apply
    if getattr(original, "__wrapped__", None) is not None:
        return

    def _apply(self, fn, recurse=True):
        if getattr(_state, "converting", False):  # a child of the conversion running
            return original(self, fn, recurse)
        before = list(_slots(self)) if recurse else []
        _state.converting = True
        try:
            out = original(self, _ConvertOnce(fn), recurse)
        finally:
            _state.converting = False
        _retie(before)
        return out
    _apply.__doc__ = original.__doc__
    _apply.__wrapped__ = original
    torch.nn.Module._apply = _apply
