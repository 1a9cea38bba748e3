"""The one frame of every module that registers kernels with PyTorch's dispatcher.

`@installs_kernels("aten", ...)` turns `register(lib, ...)` into an `install()` that runs it
once, given a `torch.library.Library` per namespace ("aten": kernels for ops; "_": fallbacks
for every op), kept alive here (a registration lives as long as its Library), with PyTorch's
"Overriding a previously registered kernel" warnings silenced: overriding PyTorch's kernels
for the XLA keys is what these modules are for.
"""
import functools
import warnings

import torch

_kept = {}  # register function -> its Libraries


def installs_kernels(*namespaces):
    def decorate(register):
        @functools.wraps(register)
        def install() -> None:
            if register in _kept:
                return
            libs = _kept[register] = [torch.library.Library(ns, "IMPL") for ns in namespaces]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                register(*libs)
        return install
    return decorate
