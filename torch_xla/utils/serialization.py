"""torch_xla's own save/load format: the data's structure in one file, each tensor in a file
of its own beside it (`PATH.tensors/tensor_N.pt`), so that a large checkpoint is written and
read one tensor at a time. Files written by torch_xla load here and the other way round.

`save` moves XLA tensors to the CPU (all computed by one program first); `load` gives CPU
tensors back, reading as `torch.load(weights_only=True)` does: a file cannot run code. As in
torch_xla, tuples in the structure come back as lists; views are saved as tensors of their
own (recreate them after loading).
"""
import os
import pickle
import shutil

import torch

import torch_xla.utils.utils as xu
from torch_xla._lazy.step import execution as _execution
from torch_xla._lazy.runtime import pjrt as _pjrt
from torch_xla._lazy.graph import tensor as _tensor

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
    """The data `save` wrote to `path`, with CPU tensors.

    Unlike torch_xla's, which unpickles the structure whole (so that a file from elsewhere
    can run any code), it is read as `torch.load(weights_only=True)` reads: containers,
    numbers, strings, tensors, `TensorReference` and the classes allowed by
    `torch.serialization.add_safe_globals` or `safe_globals`; within
    `with torch.serialization.safe_globals([YourClass]):` a structure holding objects of
    your own classes loads too. Any other class is refused (`pickle.UnpicklingError`)."""
    folder = _tensors_folder(path)
    with torch.serialization.safe_globals([TensorReference]):
        data = _load_weights_only(path)

    def tensor(reference):
        if type(getattr(reference, "tid", None)) is not int:
            raise pickle.UnpicklingError(f"{path}: a tensor reference names no tensor file")
        return _load_weights_only(_tensor_file(folder, reference.tid))
    return xu.for_each_instance_rewrite(data, lambda v: type(v) is TensorReference, tensor)


def _load_weights_only(file):
    try:
        return torch.load(file, weights_only=True)
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(
            f"{file} is refused: it holds more than tensors, containers, numbers, strings and "
            "the classes allowed to load (torch.load's weights_only rules); if you trust it, "
            f"load it within torch.serialization.safe_globals([the classes named below])\n{e}") from e
