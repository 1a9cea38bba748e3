"""The probes of what differs between torch releases (torch_xla/_lazy/base/torch_compat.py): each
answers on the running torch without error, and its answer agrees with the behaviour it
describes, observed here directly (so a release whose behaviour moves breaks here, by name)."""
import pytest
import torch

from torch_xla._lazy.base import torch_compat

aten = torch.ops.aten


def test_solve_factors_transpose_says_which_lu_solve_returns():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    lu = aten._linalg_solve_ex(a, torch.eye(2))[1]
    of = a.mT if torch_compat.solve_factors_transpose() else a
    assert torch.equal(lu, torch.linalg.lu_factor(of).LU)


def test_arange_probe_says_how_an_int64_arange_is_sized():
    n = torch.arange(0, 5, 1.5, dtype=torch.int64).shape[0]
    assert n == (5 if torch_compat.arange_int64_length_truncated() else 4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_linspace_probe_says_how_half_precision_linspace_rounds(dtype):
    d = getattr(torch, dtype)
    once = torch.linspace(-3, 11, 29, dtype=torch.float32).to(d)
    same = torch.equal(torch.linspace(-3, 11, 29, dtype=d), once)
    assert same or not torch_compat.linspace_in_float32(dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_huber_probe_answers(dtype):
    assert isinstance(torch_compat.huber_loss_rounds_each_step(dtype), bool)


def test_dtensor_probe_answers():
    assert isinstance(torch_compat.dtensor_subclasses_dispatch_themselves(), bool)


def test_meta_stand_ins_give_the_op_s_output():
    stand_in = torch_compat.meta_stand_in(aten.bucketize.Scalar)
    out = stand_in(2.5, torch.tensor([1.0, 2.0, 3.0], device="meta"))
    assert out.shape == () and out.dtype == torch.int64
    assert torch_compat.meta_stand_in(aten.add.Tensor) is None


def test_aten_overloads_keeps_only_what_this_torch_has():
    assert torch_compat.aten_overloads("add.Tensor", "no_such_op.default") == (aten.add.Tensor,)
