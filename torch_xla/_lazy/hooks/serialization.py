"""torch.save and torch.load with XLA tensors.

Saving: PyTorch pickles a tensor on an 'xla' device as "rebuild from this CPU copy onto
xla:N", which needs an XLA device (and this package) at load time. Within `torch.save`, a
reducer registered for `torch.Tensor` in `copyreg` instead pickles an XLA tensor exactly as
its CPU copy, so the file holds plain CPU tensors that load anywhere. Every other tensor,
and any XLA tensor outside `torch.save` (`copy.copy`, which also consults `copyreg`, or
plain `pickle`), keeps PyTorch's own reduction; subclasses such as `nn.Parameter` pickle
their data through it.

Loading: an XLA tensor has no storage to deserialize into, so `torch.load(f,
map_location='xla[:N]' or torch.device('xla', N))` loads onto the CPU and then moves every
tensor of the result to the device (tensors shared in the file stay shared).
"""
import copyreg
import functools
import threading

import torch

_saving = threading.local()


def _reduce_tensor(t, proto=2):
    if t.device.type == "xla" and getattr(_saving, "depth", 0):
        cpu = t.detach().cpu()
        if t.requires_grad:
            cpu.requires_grad_(True)
        return cpu.__reduce_ex__(proto)
    return torch.Tensor.__reduce_ex__(t, proto)


def _xla_location(map_location):
    if isinstance(map_location, (str, torch.device)):
        device = torch.device(map_location)
        if device.type == "xla":
            return torch.device("xla", device.index or 0)
    return None


def _to_device(obj, device, memo):
    key = id(obj)
    if key in memo:
        return memo[key]
    if isinstance(obj, torch.nn.Parameter):
        out = torch.nn.Parameter(obj.detach().to(device), requires_grad=obj.requires_grad)
    elif isinstance(obj, torch.Tensor):
        out = obj.detach().to(device).requires_grad_(obj.requires_grad)
    elif isinstance(obj, dict):
        out = type(obj)()
        out.update((k, _to_device(v, device, memo)) for k, v in obj.items())
    elif isinstance(obj, list):
        out = [_to_device(v, device, memo) for v in obj]
    elif isinstance(obj, tuple):
        items = [_to_device(v, device, memo) for v in obj]
        out = type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    else:
        return obj
    memo[key] = out
    return out


def _wrap_load(original):
    @functools.wraps(original)
    def load(f, map_location=None, *args, **kwargs):
        device = _xla_location(map_location)
        if device is None:
            return original(f, map_location, *args, **kwargs)
        return _to_device(original(f, "cpu", *args, **kwargs), device, {})
    load.__wrapped__ = original
    return load


def _wrap_save(original):
    @functools.wraps(original)
    def save(*args, **kwargs):
        _saving.depth = getattr(_saving, "depth", 0) + 1
        try:
            return original(*args, **kwargs)
        finally:
            _saving.depth -= 1
    save.__wrapped__ = original
    return save


def install() -> None:
    if copyreg.dispatch_table.get(torch.Tensor) is _reduce_tensor:
        return
    copyreg.pickle(torch.Tensor, _reduce_tensor)
    torch.load = torch.serialization.load = _wrap_load(torch.serialization.load)
    torch.save = torch.serialization.save = _wrap_save(torch.serialization.save)
