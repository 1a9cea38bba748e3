"""PyTorch's `openxla` backend, configured for this engine when dynamo first loads it.

PyTorch defines `torch.compile(..., backend='openxla')` as AOTAutograd around
`torch_xla.core.dynamo_bridge`, with inputs that a graph writes (an optimizer step) written
back by AOTAutograd after the program, one copy per tensor. This engine takes those writes
inside the graph (`copy_` nodes, `keep_inference_input_mutations`), so the program can
donate the old buffers: one copy of the model, and no extra op per tensor after the step.

The setting is made before dynamo looks the backend up: at the first `torch.compile` call
(which then puts `torch.compile` back as it was), or at once if dynamo already loaded it.
"""
import functools
import importlib
import sys

import torch

_BACKENDS = "torch._dynamo.backends.torchxla"


def _configure(module) -> None:
    module.openxla.kwargs["keep_inference_input_mutations"] = True


def install() -> None:
    if _BACKENDS in sys.modules:
        _configure(sys.modules[_BACKENDS])
        return
    original = torch.compile

    @functools.wraps(original)
    def compile(*args, **kwargs):
        if torch.compile is compile:
            torch.compile = original
        _configure(importlib.import_module(_BACKENDS))
        return original(*args, **kwargs)
    torch.compile = compile
