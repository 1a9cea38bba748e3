"""torch_xla.debug.model_comparator: save a model's intermediate tensors from two runs (say
one on the CPU and one on an XLA device) and report where they differ.

    mc.configure(dir_a); model(x)          # each mc.save(name, t) writes t under dir_a
    mc.configure(dir_b); xla_model(xla_x)
    report = mc.compare(dir_a, dir_b, rtol=1e-3, atol=1e-3)   # '' when all agree

A tensor is saved as NAME.N (its Nth save under NAME; unnamed saves are named by the
calling file and line), under step-K/ when a step is given; only the master replica saves.
"""
import os
import re
import sys

import torch

import torch_xla.runtime as xr

_state = {"dir": None, "counts": {}, "step": None}


def configure(save_dir) -> None:
    """Where the following `save` calls write (a fresh numbering)."""
    os.makedirs(save_dir, exist_ok=True)
    _state.update(dir=save_dir, counts={}, step=None)


def _name(name):
    if name is not None:
        return name
    caller = sys._getframe(2)
    return f"{os.path.basename(caller.f_code.co_filename)}.l{caller.f_lineno}"


def save(name, tensor, step=None):
    """Writes a CPU copy of `tensor` (when configured); returns `tensor`."""
    if _state["dir"] is None:
        return tensor
    data = tensor.detach().cpu()
    if xr.global_ordinal() != 0:
        return tensor
    folder = _state["dir"]
    if step is not None:
        folder = os.path.join(folder, f"step-{step}")
        os.makedirs(folder, exist_ok=True)
        if step != _state["step"]:
            _state.update(step=step, counts={})
    key = _name(name)
    index = _state["counts"].get(key, 0)
    _state["counts"][key] = index + 1
    torch.save(data, os.path.join(folder, f"{key}.{index}"))
    return tensor


def compare_tensors(tensor1, tensor2, rtol=1e-05, atol=1e-08, max_diffs=25) -> str:
    """'' if the tensors agree (same shape and dtype, close values), else what differs: at
    most `max_diffs` elements, by index."""
    if tensor1.shape != tensor2.shape or tensor1.dtype != tensor2.dtype:
        return (f"shape or dtype differ: {list(tensor1.shape)} {tensor1.dtype} vs "
                f"{list(tensor2.shape)} {tensor2.dtype}")
    close = torch.isclose(tensor1, tensor2, rtol=rtol, atol=atol, equal_nan=True)
    bad = (~close).nonzero().tolist()
    return "\n".join(f"{tuple(i)}: {tensor1[tuple(i)].item()} vs {tensor2[tuple(i)].item()}"
                     for i in bad[:max_diffs])


def _saved(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root)
                  for f in files if re.search(r"\.\d+$", f))


def compare(save_dir1, save_dir2, rtol=1e-05, atol=1e-08, max_diffs=25) -> str:
    """'' if both folders hold the same saved tensors and they agree, else a report of the
    tensors missing on either side and of those that differ."""
    first, second = _saved(save_dir1), _saved(save_dir2)
    report = [f"Mismatch: {p} not in {save_dir2}" for p in first if p not in second]
    report += [f"Mismatch: {p} not in {save_dir1}" for p in second if p not in first]
    for path in (p for p in first if p in second):
        diff = compare_tensors(torch.load(os.path.join(save_dir1, path)),
                               torch.load(os.path.join(save_dir2, path)),
                               rtol=rtol, atol=atol, max_diffs=max_diffs)
        if diff:
            report.append(f'Changes in saved tensor "{path}"\n  ' + diff.replace("\n", "\n  "))
    return "".join(line + "\n" for line in report)
