import math

import pytest
import torch

from tests._lazy.lowering._helpers import seeded_randn
from tests.conftest import check, check_lowered

nan, inf = math.nan, math.inf


def _x(*shape, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.randn(*shape).to(dtype)


def _ints(*shape):
    return torch.arange(math.prod(shape)).reshape(shape) % 5 - 2


REDUCTIONS = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "sum_neg_keep": lambda x: x.sum(-1, keepdim=True),
    "sum_dims": lambda x: x.sum((0, 2)),
    "sum_empty_list": lambda x: torch.sum(x, dim=[]),
    "sum_dtype": lambda x: x.sum(1, dtype=torch.float64),
    "nansum": lambda x: torch.nansum(x, 1),
    "mean": lambda x: x.mean(),
    "mean_dims": lambda x: x.mean((0, -1), keepdim=True),
    "prod": lambda x: x.prod(),
    "prod_dim": lambda x: x.prod(1, keepdim=True),
    "amax": lambda x: x.amax((0, 2)),
    "amin": lambda x: x.amin(-1, keepdim=True),
    "amax_all": lambda x: torch.amax(x, dim=()),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "max_dim": lambda x: tuple(x.max(1)),
    "min_dim": lambda x: tuple(x.min(-1, keepdim=True)),
    "argmax": lambda x: x.argmax(),
    "argmax_dim": lambda x: x.argmax(2),
    "argmin_keep": lambda x: x.argmin(keepdim=True),
    "argmin_dim": lambda x: x.argmin(0, keepdim=True),
    "aminmax": lambda x: tuple(torch.aminmax(x)),
    "aminmax_dim": lambda x: tuple(torch.aminmax(x, dim=1, keepdim=True)),
    "var": lambda x: x.var(),
    "var_dim": lambda x: x.var(1),
    "var_c0": lambda x: x.var((0, 2), correction=0, keepdim=True),
    "var_unbiased": lambda x: torch.var(x, 1, unbiased=False),
    "var_empty_list": lambda x: torch.var(x, dim=[]),
    "std": lambda x: x.std(),
    "std_c2": lambda x: x.std(-1, correction=2),
    "var_mean": lambda x: tuple(torch.var_mean(x, 1, keepdim=True)),
    "std_mean": lambda x: tuple(torch.std_mean(x, (0, 1), correction=0)),
    "logsumexp": lambda x: torch.logsumexp(x, 1),
    "logsumexp_keep": lambda x: torch.logsumexp(x, (0, 2), keepdim=True),
    "norm": lambda x: x.norm(),
    "norm_p1": lambda x: x.norm(p=1, dim=1),
    "vnorm_inf": lambda x: torch.linalg.vector_norm(x, ord=inf, dim=(0, 2)),
    "vnorm_ninf": lambda x: torch.linalg.vector_norm(x, ord=-inf),
    "vnorm_0": lambda x: torch.linalg.vector_norm(x, ord=0, dim=-1),
    "vnorm_3": lambda x: torch.linalg.vector_norm(x, ord=3, dim=1, keepdim=True),
    "vnorm_dtype": lambda x: torch.linalg.vector_norm(x, dtype=torch.float64),
    "count_nonzero": lambda x: torch.count_nonzero(x),
    "count_nonzero_dim": lambda x: torch.count_nonzero(x, dim=(0, 2)),
    "cumsum": lambda x: x.cumsum(1),
    "cumsum_neg": lambda x: x.cumsum(-1, dtype=torch.float64),
    "cumprod": lambda x: x.cumprod(2),
    "cummax": lambda x: tuple(x.cummax(1)),
    "cummin": lambda x: tuple(x.cummin(-1)),
    "logcumsumexp": lambda x: x.logcumsumexp(0),
}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_float_values(name):
    check_lowered(REDUCTIONS[name], _x(3, 4, 5), rtol=1e-5)


INT_OK = ["sum", "sum_dim", "sum_dims", "nansum", "prod", "prod_dim", "amax", "amin", "max", "min",
          "max_dim", "min_dim", "argmax", "argmin_dim", "aminmax_dim", "logsumexp", "cumsum",
          "cumprod", "cummax", "cummin", "count_nonzero", "sum_dtype"]


@pytest.mark.parametrize("name", INT_OK)
def test_int_values_and_dtypes(name):
    """Integer inputs: sums and products widen to int64, logsumexp gives float32."""
    check_lowered(REDUCTIONS[name], _ints(3, 4, 5))


@pytest.mark.parametrize("name", ["sum", "sum_dim", "prod", "amax", "max_dim", "cumsum",
                                  "cummax", "count_nonzero"])
def test_bool_values(name):
    check_lowered(REDUCTIONS[name], _x(3, 4, 5) > 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["sum_dim", "mean", "var_dim", "logsumexp", "cumsum", "norm",
                                  "max_dim"])
def test_low_precision_keeps_dtype(name, dtype):
    check_lowered(REDUCTIONS[name], _x(3, 4, 5, dtype=dtype), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(0), lambda x: x.mean(-1), lambda x: x.prod(0), lambda x: tuple(x.max(0)),
    lambda x: x.argmin(0), lambda x: x.amax(-1), lambda x: x.cumsum(0), lambda x: tuple(x.cummin(0)),
    lambda x: torch.logsumexp(x, 0), lambda x: x.var(0, correction=0), lambda x: x.norm(),
    lambda x: tuple(torch.aminmax(x, dim=0)), lambda x: x.any(0), lambda x: x.logcumsumexp(0)])
def test_zero_dim_input(fn):
    check_lowered(fn, torch.tensor(1.5))


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(1), lambda x: x.prod(), lambda x: x.mean(1), lambda x: tuple(x.max(0)),
    lambda x: x.cumsum(1), lambda x: torch.logsumexp(x, 1), lambda x: x.all(1), lambda x: x.any(),
    lambda x: x.var(1)])
def test_empty_input(fn):
    check_lowered(fn, torch.ones(2, 0))


NAN_ROW = torch.tensor([[1.0, nan, 3.0, 3.0, nan], [2.0, 2.0, -1.0, -1.0, 0.0]])


@pytest.mark.parametrize("fn", [
    lambda x: tuple(x.max(1)), lambda x: tuple(x.min(1)), lambda x: x.argmax(1),
    lambda x: x.argmin(1), lambda x: x.argmax(), lambda x: x.amax(1), lambda x: x.amin(1),
    lambda x: tuple(x.cummax(1)), lambda x: tuple(x.cummin(1)), lambda x: x.max(),
    lambda x: tuple(torch.aminmax(x, dim=1)), lambda x: torch.nansum(x, 1), lambda x: torch.nanmean(x, 1),
    lambda x: x.sum(1), lambda x: torch.logsumexp(x, 1), lambda x: x.var(1)])
def test_nan_propagation_and_tie_indices(fn):
    """NaN wins max/min (the first NaN's index); ties give the first index, except cummax
    and cummin, which move to the latest tie."""
    check_lowered(fn, NAN_ROW)


def test_cummax_ties_and_nans_follow_pytorch():
    x = torch.tensor([1.0, 1.0, nan, 2.0, nan, 3.0])
    out = check_lowered(lambda x: tuple(x.cummax(0)), x)
    assert out[1].cpu().tolist() == [0, 1, 2, 2, 4, 4]


def test_logsumexp_infinities():
    x = torch.tensor([[-inf, -inf], [inf, 1.0], [-inf, 0.0]])
    check_lowered(lambda x: torch.logsumexp(x, 1), x)
    check_lowered(lambda x: x.logcumsumexp(1), x)


@pytest.mark.parametrize("fn", [
    lambda x: x.any(), lambda x: x.all(), lambda x: x.any(1), lambda x: x.all(-1, keepdim=True),
    lambda x: torch.ops.aten.any.dims(x, [0, 1]), lambda x: torch.ops.aten.all.dims(x, []),
    lambda x: torch.ops.aten.any.dims(x, [])])
@pytest.mark.parametrize("make", [lambda: _x(3, 4) > 0, lambda: _ints(3, 4),
                                  lambda: torch.tensor([[0.0, nan], [0.0, 0.0], [1.0, 2.0]]),
                                  lambda: _ints(3, 4).abs().to(torch.uint8)])
def test_any_all(fn, make):
    """Every dtype; NaN counts as true; uint8 inputs give uint8; dims=[] reduces nothing."""
    check_lowered(fn, make())


def test_var_with_too_few_elements_is_nan_or_inf():
    check_lowered(lambda x: (x.var(1), x.std(0, correction=3)), torch.ones(2, 1))


def test_sum_of_int32_is_int64_and_float16_accumulates_in_float32():
    out = check_lowered(lambda x: x.sum(), torch.full((3,), 2**30, dtype=torch.int32))
    assert out.dtype == torch.int64
    check_lowered(lambda x: x.sum(), torch.full((4096,), 1.0, dtype=torch.float16), rtol=0, atol=0)


GRADS = {
    "sum": lambda x: x.sum(1),
    "mean": lambda x: x.mean((0, 2)),
    "prod": lambda x: x.prod(1),
    "amax": lambda x: x.amax(1),
    "max": lambda x: x.max(),
    "var": lambda x: x.var(1),
    "std_mean": lambda x: sum(t.sum() for t in torch.std_mean(x, 0)),
    "logsumexp": lambda x: torch.logsumexp(x, -1),
    "norm": lambda x: x.norm(dim=1),
    "cumsum": lambda x: x.cumsum(1),
    "cumprod": lambda x: x.cumprod(1),
    "logcumsumexp": lambda x: x.logcumsumexp(2),
    "max_dim": lambda x: x.max(1)[0],
    "cummax": lambda x: x.cummax(1)[0],
}


@pytest.mark.parametrize("name", GRADS)
def test_gradients(name):
    """Gradients (the backward formulas also use ops of other families, which may fall back)."""
    check(GRADS[name], _x(3, 4, 5).requires_grad_(), grads=True, rtol=1e-5)


LENGTHS = torch.tensor([[2, 0, 3, 0], [0, 1, 2, 2], [3, 0, 2, 0], [1, 1, 1, 2], [0, 1, 2, 2]])
OFFSETS = torch.cat([torch.zeros(5, 1, dtype=torch.long), LENGTHS], 1).cumsum(1)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    def segments(x, y, short, lengths, offsets):
        return [torch.segment_reduce(x, reduce, lengths=short, unsafe=True),  # covers 4 rows of 5
                torch.segment_reduce(x, reduce, lengths=short, initial=2.0, unsafe=True),
                torch.segment_reduce(y, reduce, lengths=lengths, axis=1),
                torch.segment_reduce(y, reduce, offsets=offsets, axis=1, initial=-1.5)]
    check_lowered(segments, seeded_randn(5, 3), seeded_randn(5, 5, seed=1),
                  torch.tensor([1, 2, 0, 1]), LENGTHS, OFFSETS, grads=True, rtol=1e-5)


def test_segment_reduce_ties_and_zeros():
    """Tied maxima share a positive gradient but each keep a negative one (PyTorch's CPU
    kernel); a product's gradient at a zero is the product of the others."""
    x = torch.tensor([2., 0., 0., 3., 0., 4., 1., 1., 5., 5.], requires_grad=True)
    lengths = torch.tensor([3, 2, 1, 2, 2])
    check_lowered(lambda x, n: [torch.segment_reduce(x, r, lengths=n) for r in ("prod", "max", "min")]
                  + [torch.segment_reduce(x, "prod", lengths=n, initial=3.0)], x, lengths, grads=True)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_logsumexp_and_logcumsumexp_keep_the_cpus_branches(dtype):
    """logsumexp shifts by the largest real part (its imaginary part is the principal angle
    of the sum); logcumsumexp is PyTorch's sequential complex log-add-exp, whose imaginary
    parts leave the principal range as the CPU's do."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 6, dtype=dtype, generator=g) * 4
    check_lowered(lambda t: [torch.logsumexp(t, 1), torch.logsumexp(t, (0, 1)),
                             torch.logcumsumexp(t, 1), torch.logcumsumexp(t, 0)], x,
                  rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int64, torch.int8,
                                   torch.uint8, torch.bool])
def test_hash_tensor_xors_the_64_bit_widened_elements(dtype):
    x = (torch.arange(-6, 6).reshape(3, 4) * 1.25).to(dtype)
    check_lowered(lambda x: (torch.hash_tensor(x), torch.hash_tensor(x, 1),
                             torch.hash_tensor(x, [0], keepdim=True)), x)


def test_hash_tensor_refuses_complex_as_the_cpu():
    with pytest.raises(NotImplementedError, match="xor_sum_cpu"):
        torch.hash_tensor(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(NotImplementedError, match="xor_sum_cpu"):
        torch.hash_tensor(torch.ones(2, dtype=torch.complex64, device="xla"))
