import math

import pytest
import torch

from tests.conftest import check, check_lowered

nan, inf = math.nan, math.inf


def _distinct(*shape, dtype=torch.float32):
    """Values without ties (so every index PyTorch returns is determined)."""
    torch.manual_seed(0)
    return (torch.randperm(math.prod(shape)).reshape(shape) - 7).to(dtype)


def _ties(*shape):
    torch.manual_seed(1)
    return torch.randint(0, 3, shape).float()


OPS = {
    "sort": lambda x: tuple(x.sort()),
    "sort_dim0_desc": lambda x: tuple(x.sort(0, descending=True)),
    "argsort": lambda x: x.argsort(1, descending=True),
    "msort": lambda x: torch.msort(x),
    "topk": lambda x: tuple(x.topk(2)),
    "topk_smallest": lambda x: tuple(x.topk(3, dim=0, largest=False)),
    "kthvalue": lambda x: tuple(x.kthvalue(2, 1)),
    "kthvalue_keep": lambda x: tuple(x.kthvalue(3, 0, keepdim=True)),
    "median": lambda x: x.median(),
    "median_dim": lambda x: tuple(x.median(1)),
    "median_keep": lambda x: tuple(x.median(0, keepdim=True)),
    "nanmedian": lambda x: x.nanmedian(),
    "nanmedian_dim": lambda x: tuple(x.nanmedian(-1)),
}


@pytest.mark.parametrize("name,dtype", [
    (name, dtype) for name in OPS
    for dtype in (torch.float32, torch.int64, torch.int32, torch.bfloat16)
    if dtype.is_floating_point or not name.startswith("nan")])  # nanmedian: floats only
def test_values_and_indices(name, dtype):
    check_lowered(OPS[name], _distinct(4, 6, dtype=dtype))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
def test_stable_sort_keeps_ties_in_order(descending, dim):
    check_lowered(lambda x: tuple(torch.sort(x, dim=dim, descending=descending, stable=True)),
                  _ties(5, 7))
    check_lowered(lambda x: x.argsort(dim=dim, descending=descending, stable=True), _ties(5, 7))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_nans_infs_and_signed_zeros(descending):
    """NaN sorts above +inf; -0.0 and 0.0 tie (stable order kept)."""
    x = torch.tensor([[0.0, nan, -0.0, inf, -inf, 1.0, nan, -0.0, 0.0]])
    out = check_lowered(lambda x: tuple(torch.sort(x, descending=descending, stable=True)), x)
    expected = torch.sort(x, descending=descending, stable=True)
    assert torch.equal(torch.signbit(out[0].cpu()), torch.signbit(expected[0]))


def test_sort_bool():
    check_lowered(lambda x: tuple(torch.sort(x, stable=True)), _ties(3, 5) > 0)


def test_sort_uint8_descending():
    check_lowered(lambda x: tuple(torch.sort(x, descending=True, stable=True)),
                  _ties(3, 5).to(torch.uint8))


@pytest.mark.parametrize("fn", [
    lambda x: tuple(x.median(1)), lambda x: x.median(), lambda x: tuple(x.nanmedian(1)),
    lambda x: x.nanmedian(), lambda x: tuple(x.topk(2, 1)), lambda x: tuple(x.sort(1))])
def test_nans(fn):
    """median: NaN and the index of the first NaN; nanmedian: the median of the rest, or
    the middle NaN for a row of NaNs; topk: NaN is the largest."""
    x = torch.tensor([[1.0, nan, 2.0, nan, 0.0], [4.0, 1.0, 3.0, 0.0, nan],
                      [3.0, 2.0, 5.0, 1.0, 4.0]])
    check_lowered(fn, x)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_nanmedian_of_nans(n):
    check_lowered(lambda x: tuple(x.nanmedian(1)), torch.full((2, n), nan))


def test_even_count_median_is_lower():
    check_lowered(lambda x: tuple(x.median(1)), torch.tensor([[4.0, 1.0, 3.0, 2.0]]))


def test_mode():
    """The most frequent value, the smallest on ties, with the index of its last occurrence."""
    x = torch.tensor([[3, 1, 3, 1, 2, 5], [7, 7, 7, 0, 0, 1], [9, 8, 7, 6, 5, 4]])
    check_lowered(lambda x: tuple(x.mode()), x)
    check_lowered(lambda x: tuple(x.mode(0, keepdim=True)), x.T.contiguous())
    check_lowered(lambda x: tuple(x.mode(1)), x.float())


@pytest.mark.parametrize("fn", [
    lambda x: tuple(x.sort()), lambda x: tuple(x.topk(1)), lambda x: tuple(x.kthvalue(1)),
    lambda x: tuple(x.median(0)), lambda x: x.median(), lambda x: tuple(x.mode()),
    lambda x: tuple(x.nanmedian(0))])
def test_zero_dim(fn):
    check_lowered(fn, torch.tensor(2.5))


def test_topk_k_zero_and_empty_sort():
    check_lowered(lambda x: tuple(x.topk(0)), _distinct(3, 4))
    check_lowered(lambda x: tuple(x.sort()), torch.ones(3, 0))


@pytest.mark.parametrize("fn", [
    lambda x: x.sort(1)[0], lambda x: x.sort(0, descending=True)[0], lambda x: x.topk(2)[0],
    lambda x: x.kthvalue(2, 1)[0], lambda x: x.median(1)[0], lambda x: x.median(),
    lambda x: torch.msort(x)])
def test_gradients(fn):
    """Gradients route through the returned indices (scatter/gather of another family)."""
    check(fn, (_distinct(4, 6) / 3).requires_grad_(), grads=True)


SEQ = torch.tensor([[1.0, 2.0, 2.0, 4.0, 7.0], [-3.0, -1.0, 0.0, 0.0, 5.0]])
VALUES = torch.tensor([[2.0, 0.5, 7.0, 9.0], [0.0, -5.0, 5.0, -1.0]])


@pytest.mark.parametrize("fn", [
    lambda s, v: torch.searchsorted(s, v), lambda s, v: torch.searchsorted(s, v, right=True),
    lambda s, v: torch.searchsorted(s, v, side="right", out_int32=True),
    lambda s, v: torch.searchsorted(s[0], v), lambda s, v: torch.searchsorted(s[1], 0.0),
    lambda s, v: torch.searchsorted(s[0].long(), 2.5),
    lambda s, v: torch.searchsorted(s.flip(-1), v, sorter=s.flip(-1).argsort(stable=True)),
    lambda s, v: torch.bucketize(v, s[0]), lambda s, v: torch.bucketize(v, s[1], right=True),
    lambda s, v: torch.bucketize(3, s[0], out_int32=True)])
def test_searchsorted_and_bucketize(fn):
    check_lowered(fn, SEQ, VALUES)


_UNIQUE_INPUTS = [torch.tensor([[3, 1], [2, 3]]), torch.tensor([1.0, math.nan, math.nan, 2.0, 1.0]),
                  torch.zeros(0), torch.tensor([True, False, True]), torch.tensor(5),
                  torch.randint(0, 3, (4, 5), generator=torch.Generator().manual_seed(0)).bfloat16()]


@pytest.mark.parametrize("x", _UNIQUE_INPUTS, ids=["int", "nan", "empty", "bool", "0d", "bf16"])
def test_unique_and_unique_consecutive(x):
    """On the device (run eagerly: their shapes depend on the values), each NaN its own
    value; outputs not asked for are empty, as on the CPU."""
    a = torch.ops.aten

    def run(t):
        outs = [*a._unique2(t, True, True, True), *a._unique2(t, True, False, False),
                *a._unique(t, True, True), *a.unique_consecutive(t, True, True)]
        if t.dim() and t.numel() and not t.is_floating_point():
            outs += [*a.unique_dim(t, 0, True, True, True), *a.unique_consecutive(t, True, True, -1)]
        return outs
    check_lowered(run, x)
