"""torch_xla's own save/load format: the data's structure in one file, each tensor in a file
of its own beside it (`PATH.tensors/tensor_N.pt`), so that a large checkpoint is written and
read one tensor at a time. Files written by torch_xla load here and the other way round.

`save` moves XLA tensors to the CPU (all computed by one program first); `load` gives CPU
tensors back. As in torch_xla, tuples in the structure come back as lists; views are saved
as tensors of their own (recreate them after loading).
"""
import os
import shutil

import torch

import torch_xla.utils.utils as xu
from torch_xla._lazy import execution as _execution
from torch_xla._lazy import pjrt as _pjrt
from torch_xla._lazy import tensor as _tensor

__all__ = ["TensorReference", "save", "load"]


class TensorReference:
    """Stands for tensor number `tid` in the saved structure."""

    def __init__(self, tid):
        self.tid = tid


def _tensors_folder(path):
    return path + ".tensors"


def _tensor_file(folder, tid):
    return os.path.join(folder, f"tensor_{tid}.pt")


def _is_tensor(v):
    return type(v) is torch.Tensor


def save(data, path, master_only=True, global_master=False):
    """Saves `data` (any nesting of lists, tuples, sets, dicts and objects holding tensors)
    to `path`, its tensors on the CPU in `path`.tensors/. With `master_only` only the master
    replica writes (`global_master`: the global one, else each host's); every replica
    computes its tensors."""
    tensors = []
    xu.for_each_instance(data, _is_tensor, tensors.append)
    _execution.materialize([_tensor.unwrap(t)._value for t in tensors if t.device.type == "xla"])
    if master_only and (_pjrt.global_ordinal() if global_master else _pjrt.local_ordinal()) != 0:
        return
    folder = _tensors_folder(path)
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.mkdir(folder)
    numbers = {}

    def reference(t):
        tid = numbers.setdefault(id(t), len(numbers))
        torch.save(t.detach().cpu(), _tensor_file(folder, tid))
        return TensorReference(tid)
    xu.atomic_save(xu.for_each_instance_rewrite(data, _is_tensor, reference), path)


def load(path):
    """The data `save` wrote to `path`, with CPU tensors."""
    folder = _tensors_folder(path)
    return xu.for_each_instance_rewrite(
        torch.load(path, weights_only=False), lambda v: type(v) is TensorReference,
        lambda r: torch.load(_tensor_file(folder, r.tid)))
