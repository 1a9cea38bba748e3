"""SPMD checks of manual sharding (`enable_manual_sharding` / `disable_manual_sharding`):
per-shard code inside a program, against the same computation on the CPU (registered into
tests/distributed/_spmd_harness.CHECKS)."""
import numpy as np
import torch

import torch_xla
import torch_xla._XLAC
import torch_xla.core.xla_model as xm
import torch_xla.distributed.spmd as xs

from ._spmd_harness import N, check, compiles, raises, spec
from tests.compare import ALLCLOSE, EXACT, assert_same


def _row_mesh():
    return xs.Mesh(np.arange(N), (N,), ('x',))


@check
def manual_region_computes_per_shard_values():
    """Each device sums its own block of rows: the region's result holds one sum per shard."""
    mesh = _row_mesh()
    a = torch.randn(16, 4)
    xa = a.to('xla')
    view = xs.enable_manual_sharding(xa, ('x', None), mesh=mesh)
    assert view.shape == (2, 4) and view.sharding_spec == "{manual}"
    assert view.sharding_type == xs.ShardingType.MANUAL and spec(view.global_tensor) == "{manual}"
    assert spec(xa) == "{devices=[8,1]0,1,2,3,4,5,6,7}"  # laid out as the region reads it
    per_shard = view.global_tensor.sum().reshape(1, 1)
    out = xs.disable_manual_sharding(per_shard, ('x', None), (N, 1), mesh=mesh)
    assert out.shape == (N, 1) and out.sharding_spec == "{devices=[8,1]0,1,2,3,4,5,6,7}"
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([out.global_tensor])
    assert "manual_axes" in hlo or "sharding={manual}" in hlo, hlo[-2000:]
    assert_same(out.global_tensor, a.reshape(N, 2, 4).sum((1, 2)).reshape(N, 1), rtol=1e-5, atol=1e-5)


@check
def manual_sharding_as_upstream_tests_it():
    """upstream's test_manual_sharding_api_e2e: the global mesh, an op per shard, and back."""
    xs.set_global_mesh(xs.Mesh(np.arange(N), (1, N)))
    try:
        x = torch.zeros(8, 8).to('xla')
        xx = xs.enable_manual_sharding(x, (0, 1))
        assert xx.shape == (8, 8 // N)
        xx = xx + 1
        xxx = xs.disable_manual_sharding(xx, (0, 1), x.shape)
        assert_same(xxx, x.cpu() + 1, **ALLCLOSE)  # shape (8, 8)
    finally:
        xs.set_global_mesh(None)


@check
def manual_sharding_through_xlac_as_upstream_tests_it():
    """upstream's test_manual_sharding_e2e and the checks of test_spmd_full_to_shard_shape /
    test_spmd_shard_to_full_shape: the _XLAC functions, unchanged."""
    mesh = xs.Mesh(np.arange(N), (1, N))
    x = torch.zeros(8, 8).to('xla')
    raises(RuntimeError, lambda: torch_xla._XLAC._spmd_full_to_shard_shape(x), "not sharded")
    partition_spec = (0, 1)
    xt = xs.mark_sharding(x, mesh, partition_spec)
    xx = torch_xla._XLAC._spmd_full_to_shard_shape(xt.global_tensor)
    assert xx.shape == (8, 8 // N) and torch_xla._XLAC._get_xla_sharding_spec(xx) == "{manual}"
    xx = xx + 1
    xxt = xs._mark_manual_sharding(xx)
    assert xxt.sharding_type == xs.ShardingType.MANUAL and xxt.sharding_spec == "{manual}"
    xxx = torch_xla._XLAC._spmd_shard_to_full_shape(
        xxt.global_tensor, mesh.get_op_sharding(partition_spec), x.shape, x.dtype)
    assert_same(xxx, x.cpu() + 1, **ALLCLOSE)  # shape (8, 8)
    assert repr(torch_xla._XLAC.OpSharding([], [], [], xs.ShardingType.MANUAL)) == "OpSharding({manual})"
    raises(RuntimeError, lambda: xs._mark_manual_sharding(torch.zeros(3, 2).to('xla') + 1), "not supported")
    raises(RuntimeError, lambda: torch_xla._XLAC._spmd_shard_to_full_shape(
        x + 1, mesh.get_op_sharding((None, None)), x.shape, x.dtype), "manual sharding mode")


@check
def manual_region_reads_outside_tensors_whole_and_compiles_once():
    mesh = _row_mesh()
    y = torch.randn(2, 4)
    xy = y.to('xla')  # not in the region: every shard reads all of it
    for step in range(3):
        a = torch.randn(16, 4)
        view = xs.enable_manual_sharding(a.to('xla'), ('x', None), mesh=mesh).global_tensor
        out = xs.disable_manual_sharding(view * xy + step, ('x', None), (16, 4), mesh=mesh)
        xm.mark_step()
        if step == 0:
            first = compiles()
        assert_same(out.global_tensor, a * y.repeat(N, 1) + step, rtol=1e-5, atol=1e-6)
    assert compiles() == first, "a steady loop through a manual region recompiled"


@check
def manual_tensors_live_only_inside_a_program():
    mesh = _row_mesh()
    a = torch.randn(16, 4)
    view = xs.enable_manual_sharding(a.to('xla'), ('x', None), mesh=mesh).global_tensor
    doubled = view * 2
    raises(RuntimeError, lambda: doubled.cpu(), "manual sharding mode")
    raises(Exception, lambda: torch_xla._XLAC._get_xla_tensors_hlo([view]), "manual sharding mode")
    kept = torch.ones(3).to('xla') + 1
    xm.mark_step()  # a step with manual tensors alive: they stay pending, the rest runs
    assert_same(kept, torch.full((3,), 2.), **EXACT)
    out = xs.disable_manual_sharding(doubled, ('x', None), (16, 4), mesh=mesh).global_tensor
    assert_same(out, a * 2, **ALLCLOSE)
    raises(RuntimeError, lambda: xs.disable_manual_sharding(torch.ones(2, 4).to('xla'),
                                                            ('x', None), (16, 4), mesh=mesh),
           "manual sharding mode")
    raises(ValueError, lambda: xs.disable_manual_sharding(doubled, ('x', None), (32, 4), mesh=mesh),
           "dim 0")
    raises(RuntimeError, lambda: xs.mark_sharding(doubled, mesh, ('x', None)), "manual sharding")
    raises(AssertionError, lambda: xs.enable_manual_sharding(a.to('xla'), ('x', None)),
           "no mesh given")


@check
def manual_region_pads_an_uneven_dim():
    """13 rows over 8 devices: shards of 2 rows, the last ones padded; the padding is cut
    off when the region ends."""
    mesh = _row_mesh()
    b = torch.randn(13, 4)
    view = xs.enable_manual_sharding(b.to('xla'), ('x', None), mesh=mesh)
    assert view.shape == (2, 4)
    out = xs.disable_manual_sharding(view * 3, ('x', None), (13, 4), mesh=mesh)
    assert out.shape == (13, 4)
    assert_same(out.global_tensor, b * 3, **ALLCLOSE)


@check
def manual_region_is_differentiable():
    mesh = _row_mesh()
    w = torch.randn(16, 4)
    xw = w.to('xla').requires_grad_()
    view = xs.enable_manual_sharding(xw, ('x', None), mesh=mesh).global_tensor
    out = xs.disable_manual_sharding(view.pow(3), ('x', None), (16, 4), mesh=mesh).global_tensor
    out.sum().backward()
    assert_same(xw.grad, 3 * w.pow(2), rtol=1e-5, atol=1e-5)
    # a gradient of zeros (sign's) leaves the region too
    xv = w.to('xla').requires_grad_()
    view = xs.enable_manual_sharding(xv, ('x', None), mesh=mesh).global_tensor
    out = xs.disable_manual_sharding(view.sign(), ('x', None), (16, 4), mesh=mesh).global_tensor
    out.sum().backward()
    assert_same(xv.grad, torch.zeros(16, 4), **EXACT)
