"""Helpers of torch_xla's StableHLO export tests: a function as an nn.Module, and the
check of an exported program against the TensorFlow SavedModel made from it (needs
TensorFlow; `has_tf_package()` says whether it is there)."""
import importlib.util

import numpy as np
import torch
from torch.utils import _pytree as pytree


def has_tf_package() -> bool:
    return importlib.util.find_spec("tensorflow") is not None


def wrap_func_as_nn_module(f) -> torch.nn.Module:
    """`f` as the forward of a module in eval mode (what torch.export takes)."""

    class Wrapped(torch.nn.Module):
        def forward(self, *args):
            return f(*args)

    return Wrapped().eval()


def load_save_model_and_inference(path: str, args):
    """The outputs of the SavedModel at `path` (its function `f`) on `args` (CPU tensors)."""
    if not has_tf_package():
        raise RuntimeError("TensorFlow is needed to run a SavedModel")
    import tensorflow as tf
    model = tf.saved_model.load(path)
    return model.f(*pytree.tree_map_only(torch.Tensor, lambda t: tf.constant(t.numpy()), args))


def compare_exported_program_and_saved_model_result(ep, saved_model_path, args, atol=1e-7):
    """Asserts the exported program `ep` and the SavedModel give the same outputs (dtype and
    values within `atol`) on `args`; returns both as numpy tuples."""
    expected = load_save_model_and_inference(saved_model_path, args)
    with torch.no_grad():
        got = ep.module()(*args)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected), (len(got), len(expected))
    mine, theirs = tuple(t.numpy() for t in got), tuple(t.numpy() for t in expected)
    for a, b in zip(mine, theirs):
        assert a.dtype == b.dtype, f"torch dtype: {a.dtype}, tf dtype: {b.dtype}"
        assert np.allclose(a, b, atol=atol)
    return mine, theirs
