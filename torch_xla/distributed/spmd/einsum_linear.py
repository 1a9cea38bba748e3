"""`nn.Linear` as einsums, forward and backward (upstream's XLAPatchedLinear).

PyTorch's linear flattens its input to 2-D for a matmul, and its backward does the same:
the reshapes merge the batch dims that a sharding splits, which makes the partitioner's
propagation harder. Written as einsums, every dim stays what it is.
"""
from typing import Optional

import torch
from torch import Tensor
from torch.amp import custom_bwd, custom_fwd


class XLAPatchedLinear(torch.autograd.Function):
    """`torch.nn.functional.linear(input, weight, bias)` as einsums (under autocast, its
    inputs are cast to the autocast dtype as a linear's are)."""

    @staticmethod
    @custom_fwd(device_type='xla', cast_inputs=torch.get_autocast_dtype('xla'))
    def forward(ctx, input: Tensor, weight: Tensor, bias: Optional[Tensor] = None):
        ctx.save_for_backward(input, weight, bias)
        product = torch.einsum('...n,mn->...m', input, weight)
        return product if bias is None else product + bias

    @staticmethod
    @custom_bwd(device_type='xla')
    def backward(ctx, grad_output: Tensor):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = torch.einsum('...m,mn->...n', grad_output, weight)
        if ctx.needs_input_grad[1]:
            grad_weight = torch.einsum('...m,...n->mn', grad_output, input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = torch.einsum('...m->m', grad_output)
        return grad_input, grad_weight, grad_bias


def xla_patched_nn_linear_forward(m: torch.nn.Linear, input: Tensor) -> Tensor:
    return XLAPatchedLinear.apply(input, m.weight, m.bias)


class EinsumLinear(torch.nn.Linear):
    """A `torch.nn.Linear` computed by `XLAPatchedLinear`."""

    def forward(self, input):
        return xla_patched_nn_linear_forward(self, input)


def apply_xla_patch_to_nn_linear(module: torch.nn.Module) -> torch.nn.Module:
    """Replaces every `nn.Linear` under `module` (in place) by an `EinsumLinear` holding the
    same parameters; returns `module`."""
    for name, child in module.named_children():
        if isinstance(child, torch.nn.Linear) and not isinstance(child, EinsumLinear):
            with torch.device('meta'):
                einsum_linear = EinsumLinear(child.in_features, child.out_features,
                                             bias=child.bias is not None)
            einsum_linear.load_state_dict(child.state_dict(), strict=True, assign=True)
            setattr(module, name, einsum_linear)
        else:
            apply_xla_patch_to_nn_linear(child)
    return module
