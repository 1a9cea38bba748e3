"""Gradient checkpointing for FSDP-wrapped modules (`checkpoint_module`); nn.Linear's
forward patched to a linear whose backward reads the weight parameter itself
(`apply_xla_patch_to_nn_linear`), so that FSDP can free the full parameter after the forward."""
from types import MethodType

import torch

from torch_xla.distributed.spmd.einsum_linear import xla_patched_nn_linear_forward
from torch_xla.utils.checkpoint import checkpoint


def apply_xla_patch_to_nn_linear(module: torch.nn.Module,
                                 patched_function=xla_patched_nn_linear_forward) -> torch.nn.Module:
    """Patches, in place, the forward of every `nn.Linear` in `module` (itself included)
    whose forward is still nn.Linear's to `patched_function(linear, input)` (by default
    the einsum linear, whose backward uses the weight parameter, not an intermediate
    result); the original stays as `_nn_linear_forward_original`. Returns `module`.
    (`torch_xla.distributed.spmd`'s function of the same name swaps the modules instead.)"""
    for m in module.modules():
        forward = getattr(m, "forward", None)
        if isinstance(m, torch.nn.Linear) and getattr(forward, "__func__", None) is torch.nn.Linear.forward:
            m._nn_linear_forward_original = forward
            m.forward = MethodType(patched_function, m)
    return module


def checkpoint_module(module: torch.nn.Module) -> torch.nn.Module:
    """Makes `module`'s forward checkpointed (`torch_xla.utils.checkpoint`), in place: its
    activations are not kept for the backward, which runs the forward again. Keyword
    arguments travel with the positional ones (checkpoint takes positional ones only). Calls
    where no input requires grad run plainly: the parameters alone cannot carry a
    checkpointed backward. The forward runs as a method of `module`, so that the
    recomputation's optimization barrier takes its parameters and buffers too."""
    original = module.forward

    def forward(*args, **kwargs):
        if not any(isinstance(t, torch.Tensor) and t.requires_grad
                   for t in list(args) + list(kwargs.values())):
            return original(*args, **kwargs)
        keys = tuple(kwargs)

        def run(_, *flat):
            n = len(flat) - len(keys)
            return original(*flat[:n], **dict(zip(keys, flat[n:])))
        return checkpoint(MethodType(run, module), *args, *kwargs.values())

    module.forward = forward
    return module
