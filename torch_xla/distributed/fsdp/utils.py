"""Gradient checkpointing for FSDP-wrapped modules (`checkpoint_module`); nn.Linear's
einsum form (`apply_xla_patch_to_nn_linear`, from spmd, where torch_xla also has it here)."""
import torch

from torch_xla.distributed.spmd.einsum_linear import apply_xla_patch_to_nn_linear  # noqa: F401
from torch_xla.utils.checkpoint import checkpoint


def checkpoint_module(module: torch.nn.Module) -> torch.nn.Module:
    """Makes `module`'s forward checkpointed (`torch_xla.utils.checkpoint`), in place: its
    activations are not kept for the backward, which runs the forward again. Keyword
    arguments travel with the positional ones (checkpoint takes positional ones only). Calls
    where no input requires grad run plainly: the parameters alone cannot carry a
    checkpointed backward."""
    original = module.forward

    def forward(*args, **kwargs):
        if not any(isinstance(t, torch.Tensor) and t.requires_grad
                   for t in list(args) + list(kwargs.values())):
            return original(*args, **kwargs)
        keys = tuple(kwargs)

        def run(*flat):
            n = len(flat) - len(keys)
            return original(*flat[:n], **dict(zip(keys, flat[n:])))
        return checkpoint(run, *args, *kwargs.values())

    module.forward = forward
    return module
