"""torch_xla.utils.checkpoint: activation checkpointing for XLA devices.

As torch.utils.checkpoint's reentrant variant: the forward runs without keeping its
activations, the backward runs it again and differentiates that. On XLA both runs land in
one graph, where the compiler would see the recomputation as a copy of the forward and
merge them, keeping the activations after all; an optimization barrier on the inputs (and
the module's parameters and buffers) before the recomputation prevents that. The random
state of the XLA device (and the CPU) is replayed, so dropout masks are the forward's.
"""
import inspect
import threading

import torch
from torch.utils.checkpoint import check_backward_validity, detach_variable

from torch_xla._lazy.runtime import pjrt as _pjrt
from torch_xla._lazy.graph import rng as _rng
from torch_xla._lazy.trace import optimization_barrier as _barrier


class CheckpointStatus(threading.local):
    """Whether a checkpointed backward (the recomputation) is running on this thread (each
    DataParallel replica runs its own backward)."""

    def __init__(self):
        self.in_chkpt_bwd = False


chkpt_status = CheckpointStatus()


def _autocast_state(device_type):
    return {"device_type": device_type, "enabled": torch.is_autocast_enabled(device_type),
            "dtype": torch.get_autocast_dtype(device_type),
            "cache_enabled": torch.is_autocast_cache_enabled()}


class CheckpointFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.autocast = [_autocast_state("xla"), _autocast_state("cpu")]
        if preserve_rng_state:
            ctx.xla_rng_state = _rng.get_state(_pjrt.thread_device() or 0)  # this thread's device
            ctx.cpu_rng_state = torch.get_rng_state()
        ctx.inputs = [None if torch.is_tensor(a) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if torch.is_tensor(a)]
        ctx.save_for_backward(*[a for a in args if torch.is_tensor(a)])
        with torch.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if not torch.autograd._is_checkpoint_valid():
            raise RuntimeError("Checkpointing is not compatible with .grad() or when an `inputs` parameter "
                               "is passed to .backward(). Please use .backward() and do not pass its "
                               "`inputs` argument.")
        chkpt_status.in_chkpt_bwd = True
        try:
            inputs = list(ctx.inputs)
            for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
                inputs[i] = t
            fenced = [t for t in inputs + list(grad_outputs) if torch.is_tensor(t)]
            owner = getattr(ctx.run_function, "__self__", None)
            if inspect.ismethod(ctx.run_function) and isinstance(owner, torch.nn.Module):
                fenced += list(owner.parameters()) + list(owner.buffers())
            _barrier.optimization_barrier_([t for t in fenced if t.device.type == "xla"])
            device = _pjrt.thread_device() or 0
            with torch.random.fork_rng(devices=[], enabled=ctx.preserve_rng_state), _rng.fork(device):
                if ctx.preserve_rng_state:
                    _rng.set_state(device, ctx.xla_rng_state)
                    torch.set_rng_state(ctx.cpu_rng_state)
                detached = detach_variable(tuple(inputs))
                with torch.enable_grad(), torch.autocast(**ctx.autocast[0]), torch.autocast(**ctx.autocast[1]):
                    outputs = ctx.run_function(*detached)
            if isinstance(outputs, torch.Tensor):
                outputs = (outputs,)
            pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if torch.is_tensor(o) and o.requires_grad]
            if not pairs:
                raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
            torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
            return (None, None) + tuple(t.grad if isinstance(t, torch.Tensor) else None for t in detached)
        finally:
            chkpt_status.in_chkpt_bwd = False


def checkpoint(function, *args, use_reentrant: bool = True, **kwargs):
    """`function(*args)`, its activations recomputed in the backward instead of kept (see the
    module docstring). `preserve_rng_state=False` skips replaying the random state. Only the
    reentrant variant exists: `use_reentrant=False` raises ValueError, as in torch_xla."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not use_reentrant:
        raise ValueError("XLA currently does not support use_reentrant==False")
    return CheckpointFunction.apply(function, preserve, *args)
