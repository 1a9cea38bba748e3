"""The explicit CPU fallback: an op without a lowering or decomposition runs on the CPU.

Every use is counted in the metrics as `aten::NAME` (its schema name) and warned once;
XLA_NO_CPU_FALLBACK=1 makes it an error naming the op instead.
"""
import os
import warnings

import torch
from torch.utils import _pytree as pytree

from ..base import counters
from ..step.execution import to_cpu
from ..graph.tensor import XLATensor, wrap
from ..launch.transfers import from_cpu

_warned = set()


def cpu_fallback(func, args, kwargs):
    """Runs `func` on CPU copies of its arguments; its tensor results go back to the device
    of its XLA arguments."""
    name = func._schema.name
    if os.environ.get("XLA_NO_CPU_FALLBACK") == "1":
        raise NotImplementedError(
            f"{name} ({func}) has no XLA lowering and XLA_NO_CPU_FALLBACK=1 forbids the CPU fallback")
    counters.count(name)
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"{name} has no XLA lowering: it runs on the CPU (counted in metrics as {name})",
                      stacklevel=4)
    devices = []

    def to_cpu_arg(x):
        if isinstance(x, XLATensor):
            devices.append(x._value.device)
            return to_cpu(x._value)
        if isinstance(x, torch.device) and x.type == "xla":
            devices.append(x.index or 0)
            return torch.device("cpu")
        return x

    cargs, ckwargs = pytree.tree_map(to_cpu_arg, (args, kwargs))
    out = func(*cargs, **ckwargs)
    device = devices[-1] if devices else 0
    return pytree.tree_map_only(torch.Tensor, lambda o: wrap(from_cpu(o, device)), out)
