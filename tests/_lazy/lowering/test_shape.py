import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from tests._lazy.lowering._helpers import seeded_randn
from tests.conftest import check, check_lowered


def leaf(*shape):
    torch.manual_seed(len(shape) + sum(shape))
    return torch.randn(*shape).requires_grad_()


@pytest.mark.parametrize("op", [
    lambda x: x.view(-1, 4) * 1,
    lambda x: x.view(4, -1, 3) * 1,
    lambda x: x.reshape(-1) * 1,
    lambda x: x.expand(2, -1, -1, -1) * 1,
    lambda x: x[:, :1].expand(-1, 3, -1) * 1,
    lambda x: x.permute(2, 0, 1) * 1,
    lambda x: x.permute(-1, -3, -2) * 1,
    lambda x: x.transpose(0, -1) * 1,
    lambda x: x.t() if x.dim() <= 2 else x.mT * 1,
    lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze() * 1,
    lambda x: x.unsqueeze(1).squeeze(1) * 1,
    lambda x: x[:, :1].squeeze((0, 1)) * 1,            # dims list; size-2 dim 0 stays
    lambda x: x[0].squeeze(-1) * 1,
    lambda x: x.select(1, -1) * 1,
    lambda x: x.select(-1, 0) * 1,
    lambda x: x[:, -2:] * 1,
    lambda x: x[:, -100:100] * 1,                      # out-of-range bounds clamp
    lambda x: x[:, 2:1] * 1,                           # empty
    lambda x: x[::2, 1::2] * 1,
    lambda x: x.narrow(-1, 1, 2) * 1,
    lambda x: x.movedim(0, -1) * 1,
    lambda x: x.flatten() * 1,
    lambda x: x.flatten(1) * 1,
    lambda x: x.unflatten(1, (3, 1)) * 1,
    lambda x: x.mT.reshape(-1, 2) * 1,                  # a view of a non-contiguous view
    lambda x: x.view(2, 12)[:, 3:7].reshape(4, 2) * 1,
    lambda x: torch.ops.aten._unsafe_view(x * 1, (6, 4)),
    lambda x: x.swapaxes(0, 1).unsqueeze(2) * 1,
    lambda x: torch.atleast_3d(x[0, 0]) * 1,
    lambda x: x.unfold(1, 2, 1) * 1,
], ids=range(30))
def test_views(op):
    check_lowered(op, leaf(2, 3, 4), grads=True)


@pytest.mark.parametrize("op", [
    lambda x: x.unsqueeze(0) * 1,
    lambda x: x.unsqueeze(-1) * 1,
    lambda x: x.squeeze() * 1,
    lambda x: x.squeeze(0) * 1,
    lambda x: x.squeeze(-1) * 1,
    lambda x: x.view(1, 1) * 1,
    lambda x: x.view(-1) * 1,
    lambda x: x.expand(3) * 1,
    lambda x: x.reshape(()) * 1,
    lambda x: x.t() * 1,
    lambda x: x.permute(()) * 1,
], ids=range(11))
def test_zero_dim(op):
    check_lowered(op, torch.tensor(1.5, requires_grad=True), grads=True)


@pytest.mark.parametrize("op", [
    lambda x: x.split(2),
    lambda x: x.split(3, dim=1),
    lambda x: x.split(10, dim=-1),
    lambda x: x.split([1, 3], 1),
    lambda x: x.split_with_sizes([2, 0, 1]),
    lambda x: x.unbind(),
    lambda x: x.unbind(-1),
    lambda x: x.chunk(2, 1),
    lambda x: x.chunk(3),
    lambda x: x.tensor_split(3, dim=1),
    lambda x: x.hsplit(2),
    lambda x: torch.meshgrid(x[0], x[1, :2], indexing="ij"),
    lambda x: torch.meshgrid(x[0], x[1, :2], indexing="xy"),
], ids=range(13))
def test_splits(op):
    check_lowered(lambda x: [o * 1 for o in op(x)], leaf(3, 4), grads=True)


@pytest.mark.parametrize("op", [
    lambda x, y: torch.cat([x, y]),
    lambda x, y: torch.cat([x, y.int()], -1),                  # promotes to float32
    lambda x, y: torch.cat([x.int(), y.abs().to(torch.uint8)]),  # to int32
    lambda x, y: torch.cat([x.half(), y.bfloat16()]),          # to float32
    lambda x, y: torch.cat([x.bool(), y.bool()]),
    lambda x, y: torch.cat([x, torch.empty(0).to(x.device)]),  # legacy empty input skipped
    lambda x, y: torch.cat([x[:0], y]),
    lambda x, y: torch.stack([x, y], 1),
    lambda x, y: torch.stack([x, y.double()], -1),
    lambda x, y: torch.hstack([x, y]),
    lambda x, y: torch.block_diag(x, y),
], ids=range(11))
def test_cat_stack(op):
    check_lowered(op, torch.randn(2, 3), torch.randn(2, 3))


def test_cat_backward():
    check_lowered(lambda x, y: torch.cat([x, y * 2], 1), leaf(2, 3), leaf(2, 1), grads=True)


@pytest.mark.parametrize("op", [
    lambda x: x.flip(0),
    lambda x: x.flip(0, -1),
    lambda x: x.roll(1, 0),
    lambda x: x.roll((2, -1), (1, 0)),
    lambda x: x.roll(-5),
    lambda x: x.repeat(2, 1),
    lambda x: x.repeat(2, 1, 3),
    lambda x: x.tile((2,)),
    lambda x: x.repeat_interleave(2),
    lambda x: x.repeat_interleave(3, dim=1),
    lambda x: x.rot90(),
    lambda x: x.rot90(2, (1, 0)),
    lambda x: x.rot90(-1),
    lambda x: torch.nn.functional.pad(x, (1, 2)),
    lambda x: torch.nn.functional.pad(x, (1, -1, -1, 2), value=3.5),
    lambda x: torch.nn.functional.pad(x[None], (0, 0, 0, 0, 1, 1)),
], ids=range(16))
def test_reorderings(op):
    check_lowered(op, leaf(3, 4), grads=True)


def test_repeat_interleave_with_tensor_repeats_is_dynamic():
    met.clear_counters()
    check_lowered(lambda x, r: (x.repeat_interleave(r, dim=0), r.repeat_interleave(r),
                                torch.repeat_interleave(r)),
                  torch.randn(3, 2), torch.tensor([1, 0, 3]))
    assert met.counter_value("DynamicShapeOp") >= 1


def test_pad_int_and_bool():
    check_lowered(lambda x: (torch.nn.functional.pad(x, (1, 1), value=7), torch.constant_pad_nd(x > 2, (2, 0))),
                  torch.arange(6).view(2, 3))


def test_complex_of_broadcastable_parts():
    check_lowered(lambda re, im: [torch.complex(re, im), torch.complex(im, re[0]),
                                  torch.complex(re.double(), im.double())],
                  torch.randn(3), torch.randn(2, 3))
    check_lowered(lambda m, a: torch.polar(m, a), torch.rand(4, 1), torch.randn(3))


def test_complex_views():
    check_lowered(lambda z: (torch.view_as_real(z) * 1, torch.view_as_complex(torch.view_as_real(z) * 2)),
                  torch.randn(3, 2, dtype=torch.complex64))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8, torch.float64, torch.bool])
def test_view_dtype(dtype):
    x = torch.arange(16, dtype=torch.int16).view(2, 8) if dtype is torch.bool else torch.randn(2, 8)
    if dtype is torch.bool:
        x = (x % 2).to(torch.uint8)
    check_lowered(lambda x: x.view(dtype) * 1 if dtype is not torch.bool else x.view(dtype), x)


def test_clone_and_alias():
    check_lowered(lambda x: (x.clone(memory_format=torch.contiguous_format) + 1,
                             torch.alias_copy(x) * 2, x.contiguous() * 3), torch.randn(2, 3))


def test_select_out_of_range_is_pytorchs_index_error(dev):
    x = torch.zeros(2, 3, device=dev)
    x.select(1, 2)  # the index is a parameter: its range is checked per call, not per signature
    with pytest.raises(IndexError, match="out of range"):
        x.select(1, 3)
    with pytest.raises(IndexError, match="out of range"):
        torch.ops.aten.select_copy.int(x, 1, -4)


def test_reading_each_row_compiles_once(dev):
    """select's index and unbind's output are no part of the program: a loop over the rows
    of a tensor (upstream's test utilities compare tensors row by row) compiles once."""
    cpu = torch.randn(5, 3)
    x = cpu.to(dev)
    torch_xla.sync()
    met.clear_all()
    rows = [r.cpu() for r in x] + [x[i].cpu() for i in range(-5, 5)]
    assert met.counter_value("UncachedCompile") == 1
    assert all(torch.equal(r, cpu[i % 5]) for i, r in enumerate(rows))


def test_unbinds_gradient_is_slices_not_gathers(dev):
    """select is one slice at its index (a stack's backward selects a gradient per input)."""
    x = torch.randn(4, 3, device=dev)
    torch_xla.sync()
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([x.unbind(0)[-1] * 2, x.select(1, -2)])
    assert "gather(" not in hlo and "call(" not in hlo and hlo.count(" dynamic-slice(") == 2, hlo
    check(lambda x: torch.stack([p * i for i, p in enumerate(x.unbind(1))], 0), leaf(2, 3, 4),
          grads=True)


def test_results_are_contiguous(dev):
    x = torch.randn(3, 4, device=dev)
    assert x.t().is_contiguous() and x[:, ::2].is_contiguous()
    check(lambda x: x.t().contiguous().stride(), torch.randn(3, 4))


@pytest.mark.parametrize("size", [(2, 3), (4, 3), (12,), (0,)])
def test_resize(size):
    """Shrinking keeps the leading elements; growing keeps them in front (the rest is
    uninitialised in PyTorch, so only the kept part is compared)."""
    def resize(x):
        y = x.clone()
        y.resize_(size)
        return y.flatten()[:x.numel()]
    check_lowered(resize, seeded_randn(3, 4, grad=False))
