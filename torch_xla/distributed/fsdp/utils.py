"""Gradient checkpointing for FSDP-wrapped modules (`checkpoint_module`)."""
import torch

import torch_xla.core.xla_model as xm


class _Checkpoint(torch.autograd.Function):
    """Runs `run(*args)` without keeping its activations; the backward runs it again (with
    the XLA random state it first had, so dropout draws the same masks) and backpropagates
    through the recomputation."""

    @staticmethod
    def forward(ctx, run, *args):
        ctx.run, ctx.rng_state = run, xm.get_rng_state()
        ctx.tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        ctx.others = [None if isinstance(a, torch.Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_at])
        with torch.no_grad():
            return run(*args)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_at, ctx.saved_tensors):
            args[i] = t.detach().requires_grad_(t.requires_grad)
        current = xm.get_rng_state()
        xm.set_rng_state(ctx.rng_state)
        try:
            with torch.enable_grad():
                outputs = ctx.run(*args)
        finally:
            xm.set_rng_state(current)
        outputs = (outputs,) if isinstance(outputs, torch.Tensor) else tuple(outputs)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None,) + tuple(a.grad if isinstance(a, torch.Tensor) and a.requires_grad else None
                               for a in args)


def checkpoint_module(module: torch.nn.Module) -> torch.nn.Module:
    """Makes `module`'s forward checkpointed, in place: its activations are not kept for the
    backward, which runs the forward again. Calls where no input requires grad run plainly
    (the parameters alone cannot carry a checkpointed backward).

    No optimization barrier separates the recomputation from the first forward of the same
    program, so XLA may merge them: the gradients are right, the memory saving may not
    happen."""
    original = module.forward

    def forward(*args, **kwargs):
        if not any(isinstance(t, torch.Tensor) and t.requires_grad
                   for t in list(args) + list(kwargs.values())):
            return original(*args, **kwargs)
        keys = tuple(kwargs)

        def run(*flat):
            n = len(flat) - len(keys)
            return original(*flat[:n], **dict(zip(keys, flat[n:])))
        return _Checkpoint.apply(run, *args, *kwargs.values())

    module.forward = forward
    return module
