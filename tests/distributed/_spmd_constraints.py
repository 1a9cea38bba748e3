"""SPMD checks of the layout hints beyond mark_sharding: `shard_as`,
`annotate_custom_sharding`, the einsum linear (registered into
tests/distributed/_spmd_harness.CHECKS)."""
import copy

import numpy as np
import torch

import torch_xla
import torch_xla._XLAC
import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs

from ._spmd_harness import N, check, raises, spec


@check
def shard_as_lays_two_tensors_out_alike():
    """upstream's test_shard_as: y, given no sharding, takes x's."""
    mesh = xs.Mesh(np.arange(N), (N,))
    x = torch.arange(1., 9., device='xla')
    x = xs.mark_sharding_with_gradients(x, mesh, (0,))
    y = torch.arange(1., 9., device='xla')
    x, y = xs.shard_as(x, y)
    torch_xla.sync()
    assert spec(x) == spec(y) == "{devices=[8]0,1,2,3,4,5,6,7}", (spec(x), spec(y))
    assert torch.equal(y.cpu(), torch.arange(1., 9.))
    # pytrees, None leaves, gradients
    w, v = torch.randn(8, 4), torch.randn(8, 4)
    xw, xv = w.to('xla').requires_grad_(), v.to('xla').requires_grad_()
    xs.mark_sharding(xw, mesh, (0, None))
    (a, none_a), (b, none_b) = xs.shard_as([xw * 2, None], [xv, None])
    assert none_a is None and none_b is None
    (a * b).sum().backward()
    assert torch.allclose(xv.grad.cpu(), w * 2) and torch.allclose(xw.grad.cpu(), 2 * v)
    raises(AssertionError, lambda: xs.shard_as([xw], (xv,)), "same structure")
    raises(ValueError, lambda: xs.shard_as(xw, torch.ones(4, 8).to('xla')), "shapes must be equal")


@check
def annotate_custom_sharding_constrains_without_resharding():
    """upstream's test_annotate_custom_sharding: the data keeps its layout, the graph gets
    the custom one, and after the step the tensor has it."""
    t = torch.randn(2, 4, 8, 8)
    xt = t.to('xla')
    xs.mark_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 4, 2)), (0, 1, 2, 3))
    original = spec(xt)
    xs.annotate_custom_sharding(xt, xs.Mesh(np.arange(N), (1, 1, 1, N)), (0, 1, 2, 3))
    custom = spec(xt)
    assert custom == "{devices=[1,1,1,8]0,1,2,3,4,5,6,7}" and custom != original
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([xt])
    assert "parameter(0), sharding={devices=[1,1,4,2]" in hlo, hlo
    assert 'custom_call_target="Sharding", sharding={devices=[1,1,1,8]' in hlo, hlo
    xm.mark_step()
    assert spec(xt) == custom and torch.equal(xt.cpu(), t)


@check
def einsum_linear_matches_nn_linear():
    """apply_xla_patch_to_nn_linear: the same parameters, the same outputs and gradients as
    nn.Linear on the CPU, with the batch sharded over a 2-D mesh."""
    from torch_xla.distributed.spmd.xla_sharding import EinsumLinear, apply_xla_patch_to_nn_linear
    torch.manual_seed(3)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4, bias=False))
    model = apply_xla_patch_to_nn_linear(copy.deepcopy(cpu).to('xla'))
    assert isinstance(model[0], EinsumLinear) and isinstance(model[2], EinsumLinear)
    assert model[2].bias is None
    mesh = xs.Mesh(np.arange(N), (4, 2), ('data', 'model'))
    xs.mark_sharding(model[0].weight, mesh, ('model', None))
    x = torch.randn(8, 3, 16)
    xx = x.to('xla')
    xs.mark_sharding(xx, mesh, ('data', None, None))
    out = model(xx)
    assert type(out.grad_fn).__name__ == "XLAPatchedLinearBackward"
    out.pow(2).sum().backward()
    cpu(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), cpu.parameters()):
        assert torch.allclose(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)
    y = xs.xla_patched_nn_linear_forward(model[0], xx)
    assert torch.allclose(y.cpu(), torch.nn.functional.linear(x, cpu[0].weight, cpu[0].bias),
                          atol=1e-5)
