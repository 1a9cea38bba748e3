"""FSDP's auto-wrap policies and checkpoint_module, on one device."""
import functools

import torch
import torch.nn as nn

from torch_xla.distributed.fsdp import checkpoint_module
from tests.compare import assert_same
from torch_xla.distributed.fsdp.wrap import (recursive_wrap, size_based_auto_wrap_policy,
                                             transformer_auto_wrap_policy)


class Wrapped(nn.Module):
    def __init__(self, module, tag=None):
        super().__init__()
        self.module, self.tag = module, tag

    def forward(self, *args):
        return self.module(*args)


def _model():
    return nn.Sequential(nn.Linear(4, 8), nn.TransformerEncoderLayer(8, 2, 16), nn.Linear(8, 2))


def test_transformer_policy_wraps_the_layers_and_passes_arguments():
    model = _model()
    policy = functools.partial(transformer_auto_wrap_policy,
                               transformer_layer_cls={nn.TransformerEncoderLayer})
    out, count = recursive_wrap(model, policy, Wrapped, set(), set(), only_wrap_children=True, tag=7)
    assert out is model and isinstance(model[1], Wrapped) and model[1].tag == 7
    assert not isinstance(model[0], Wrapped) and not isinstance(model[2], Wrapped)
    assert count == sum(p.numel() for p in model[1].parameters())


def test_size_policy_wraps_what_holds_enough_parameters():
    model = _model()
    big = sum(p.numel() for p in model[1].parameters())
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=big)
    out, count = recursive_wrap(model, policy, Wrapped, set(), set())
    # the layer is wrapped; what is left at the root (the two linears) is too small
    assert out is model and isinstance(model[1], Wrapped) and count == big
    model = _model()
    out, count = recursive_wrap(model, functools.partial(size_based_auto_wrap_policy, min_num_params=1),
                                Wrapped, set(), set())
    # every child is wrapped, nothing is left for the root
    assert out is model and all(isinstance(m, Wrapped) for m in model)
    assert count == sum(p.numel() for p in model.parameters())


def test_checkpointed_module_gives_the_same_gradients_with_dropout(dev):
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.GELU(), nn.Linear(6, 6)).to(dev)
    x = torch.randn(5, 6)
    grads = []
    for checkpointed in (False, True):
        torch.manual_seed(1)
        if checkpointed:
            checkpoint_module(block)
        xx = x.to(dev).requires_grad_()
        block.zero_grad()
        block(xx).pow(2).sum().backward()
        grads.append([xx.grad.cpu()] + [p.grad.cpu() for p in block.parameters()])
    for a, b in zip(*grads):
        assert_same(a, b, device="cpu")


def test_checkpointed_module_fences_its_parameters_and_buffers(dev):
    """The recomputation's optimization barrier takes the input, the gradient of the output
    and the module's parameters and buffers, as torch_xla's does."""
    import torch_xla
    block = nn.Linear(8, 8)
    block.register_buffer("state", torch.zeros(3, 5))
    checkpoint_module(block.to(dev))
    block(torch.randn(4, 8, device=dev, requires_grad=True)).sum().backward()
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([block.weight.grad])
    barrier = next(line for line in hlo.splitlines() if "opt-barrier(" in line)
    operands = barrier.split("opt-barrier((", 1)[1]
    assert [operands.count(s) for s in ("f32[4,8]", "f32[8,8]", "f32[8]", "f32[3,5]")] == [2, 1, 1, 1]


def test_patched_linear_forward_reads_the_weight_and_matches_nn_linear(dev):
    from torch_xla.distributed.fsdp.utils import apply_xla_patch_to_nn_linear
    torch.manual_seed(0)
    cpu = nn.Linear(3, 2)
    linear = apply_xla_patch_to_nn_linear(nn.Linear(3, 2).to(dev))  # the module itself patched
    linear.load_state_dict(cpu.state_dict())
    assert linear._nn_linear_forward_original.__func__ is nn.Linear.forward
    x = torch.randn(4, 5, 3, requires_grad=True)
    xx = x.detach().to(dev).requires_grad_()
    out = linear(xx)
    assert type(out.grad_fn).__name__ == "XLAPatchedLinearBackward"
    out.sum().backward()
    cpu(x).sum().backward()
    assert torch.allclose(out.detach().cpu(), cpu(x).detach(), atol=1e-6)
    assert torch.allclose(linear.weight.grad.cpu(), cpu.weight.grad, atol=1e-5)
    assert torch.allclose(xx.grad.cpu(), x.grad, atol=1e-6)
    seq = apply_xla_patch_to_nn_linear(nn.Sequential(nn.Linear(3, 3), nn.ReLU()),
                                       lambda m, inp: inp * 0)
    assert torch.equal(seq(torch.ones(2, 3)), torch.zeros(2, 3))
