import pytest
import torch

import torch_xla.debug.metrics as met
from tests._lazy.lowering._helpers import seeded_randn
from tests.compare import EXACT, assert_same, check_lowered, fallbacks

# Factories take the device from a tensor argument: an empty CPU tensor in the CPU run, its
# device copy in the XLA run.
ON = torch.empty(0)


def factory(make):
    check_lowered(lambda t: make(t.device), ON)


@pytest.mark.parametrize("make", [
    lambda d: torch.arange(5, device=d),
    lambda d: torch.arange(0, device=d),
    lambda d: torch.arange(1, 2.5, 0.5, device=d),
    lambda d: torch.arange(5, -3, -2, device=d),
    lambda d: torch.arange(3, 3, device=d),                      # empty
    lambda d: torch.arange(1.0, -1.0, -0.3, device=d),
    lambda d: torch.arange(-1, 1, 0.1, device=d),                # length by double arithmetic
    lambda d: torch.arange(0, 1, 0.1, dtype=torch.float64, device=d),
    lambda d: torch.arange(10, dtype=torch.int32, device=d),
    lambda d: torch.arange(0, 3, 0.25, dtype=torch.float16, device=d),
    lambda d: torch.arange(0, 5, 1.5, device=d),
    lambda d: torch.arange(0, 5, 1.5, dtype=torch.int64, device=d),  # step truncated first
    lambda d: torch.arange(0, 5, 1.5, dtype=torch.int32, device=d),  # ... but not the length
    lambda d: torch.arange(2**40, 2**40 + 3, device=d),
], ids=range(14))
def test_arange(make):
    factory(make)


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize("make", [
    lambda d: torch.range(0, 4, 0.5, device=d),
    lambda d: torch.range(0, 1, 0.3, device=d),
    lambda d: torch.range(3, 0, -1, dtype=torch.int64, device=d),
    lambda d: torch.range(1, 4, device=d),
], ids=range(4))
def test_range(make):
    factory(make)


@pytest.mark.parametrize("make", [
    lambda d: torch.hann_window(5, device=d),
    lambda d: torch.hamming_window(6, periodic=False, device=d),
    lambda d: torch.bartlett_window(5, device=d),
    lambda d: torch.blackman_window(5, dtype=torch.float64, device=d),
    lambda d: torch.kaiser_window(6, device=d),
    lambda d: torch.kaiser_window(5, periodic=False, beta=3.0, device=d),
    lambda d: torch.kaiser_window(1, device=d),
], ids=range(7))
def test_windows(make):
    factory(make)


def test_arange_with_inconsistent_step_is_pytorchs_error(dev):
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        torch.arange(-3, 5, -2, device=dev)


@pytest.mark.parametrize("make", [
    lambda d: torch.linspace(0, 1, 7, device=d),
    lambda d: torch.linspace(-3.3, 1e3, 1000, device=d),
    lambda d: torch.linspace(5, -5, 11, device=d),
    lambda d: torch.linspace(0, 10, 4, dtype=torch.int64, device=d),
    lambda d: torch.linspace(-2.7, 7.9, 5, dtype=torch.int32, device=d),
    lambda d: torch.linspace(0, 1, 5, dtype=torch.float64, device=d),
    lambda d: torch.linspace(3, 10, 1, device=d),
    lambda d: torch.linspace(3, 10, 0, device=d),
    lambda d: torch.logspace(0, 2, 5, device=d),
    lambda d: torch.logspace(-1, 3, 6, base=2, device=d),
    lambda d: torch.logspace(0, 3, 4, dtype=torch.int64, device=d),
    lambda d: torch.logspace(1, 3, 1, device=d),
    lambda d: torch.linspace(0, 1 + 1j, 4, device=d),            # complex bounds: complex64
    lambda d: torch.linspace(-1, 7, 13, dtype=torch.float16, device=d),
], ids=range(14))
def test_linspace_logspace(make):
    factory(make)


@pytest.mark.parametrize("make", [
    lambda d: torch.full((2, 2), 3, device=d),                   # int fill: int64
    lambda d: torch.full((2,), True, device=d),                  # bool fill: bool
    lambda d: torch.full((2,), 1 + 2j, device=d),                # complex fill: complex64
    lambda d: torch.full((2,), 1.5, device=d),
    lambda d: torch.full((), 7, device=d),
    lambda d: torch.full((3,), 2.5, dtype=torch.int32, device=d),
    lambda d: torch.full((2, 0), 1.0, device=d),
    lambda d: torch.zeros(2, 3, device=d),
    lambda d: torch.zeros(0, 3, device=d),
    lambda d: torch.ones(2, dtype=torch.int8, device=d),
    lambda d: torch.zeros(2, dtype=torch.complex64, device=d),
    lambda d: torch.ones((), dtype=torch.bool, device=d),
    lambda d: torch.eye(3, device=d),
    lambda d: torch.eye(2, 4, dtype=torch.int32, device=d),
    lambda d: torch.eye(3, dtype=torch.bool, device=d),
    lambda d: torch.scalar_tensor(2, device=d),
    lambda d: torch.scalar_tensor(2, dtype=torch.int64, device=d),
    lambda d: torch.tril_indices(3, 4, device=d),
    lambda d: torch.tril_indices(4, 3, -1, device=d),
    lambda d: torch.triu_indices(3, 4, 1, device=d),
    lambda d: torch.triu_indices(3, 3, dtype=torch.int32, device=d),
    lambda d: torch.triu_indices(2, 2, 5, device=d),
    lambda d: torch.complex(torch.ones(2, device=d), torch.arange(2.0, device=d)),
    lambda d: torch.polar(torch.ones(2, device=d), torch.arange(2.0, device=d)),
], ids=range(24))
def test_filled(make):
    factory(make)


@pytest.mark.parametrize("make", [
    lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
    lambda d: torch.tensor([1.5, 2], dtype=torch.float16, device=d),
    lambda d: torch.tensor([True, False], device=d),
    lambda d: torch.tensor([1 + 1j], device=d),
    lambda d: torch.tensor(3.5, device=d),
    lambda d: torch.tensor([], device=d),
    lambda d: torch.as_tensor([1, 2], device=d),
    lambda d: torch.as_tensor(torch.arange(3), device=d),
], ids=range(8))
def test_tensor_from_data(make):
    factory(make)


def test_tensor_from_data_is_functional_and_writable(dev):
    t = torch.tensor([1.0, 2.0, 3.0], device=dev)
    t[1:].mul_(10)
    assert_same(t, torch.tensor([1.0, 20.0, 30.0]), **EXACT)


@pytest.mark.parametrize("make", [
    lambda x: torch.zeros_like(x, dtype=torch.int32),
    lambda x: torch.ones_like(x),
    lambda x: torch.full_like(x.long(), 2.7),
    lambda x: torch.full_like(x, True, dtype=torch.bool),
    lambda x: x.int().new_zeros(3),
    lambda x: x.new_ones((2, 2), dtype=torch.float64),
    lambda x: x.new_full((2,), 5),
    lambda x: x.new_tensor([1, 2]),
    lambda x: x.new_tensor(3.5),
    lambda x: x.new_empty(3).shape,
    lambda x: torch.empty_like(x).shape,
    lambda x: torch.empty_strided((2, 3), (1, 2), device=x.device).shape,
    lambda x: torch.empty(1, 2, 2, 2, device=x.device, memory_format=torch.channels_last).shape,
    lambda x: x.clone().fill_(3),
    lambda x: x.clone().fill_(torch.tensor(4.0).to(x.device)),
    lambda x: x.int().fill_(2.9),
    lambda x: x.clone().zero_(),
], ids=range(17))
def test_like_and_new(make):
    check_lowered(make, torch.randn(2, 3))


@pytest.mark.parametrize("make", [
    lambda d: torch.randn(2, 3, device=d),
    lambda d: torch.rand(4, dtype=torch.float64, device=d),
    lambda d: torch.randint(3, (4,), device=d),
    lambda d: torch.randint(-2, 3, (4,), dtype=torch.int32, device=d),
    lambda d: torch.normal(0.0, 1.0, (3,), device=d),
    lambda d: torch.empty(3, device=d).uniform_(-1, 1),
])
def test_random_factories_shapes_and_dtypes(dev, make):
    met.clear_counters()
    out, ref = make(dev), make("cpu")
    assert (out.shape, out.dtype) == (ref.shape, ref.dtype)
    out.cpu()
    assert not fallbacks()


@pytest.mark.parametrize("make", [
    lambda x: torch.rand_like(x),
    lambda x: torch.randn_like(x),
    lambda x: torch.randint_like(x, 5),
    lambda x: torch.randperm(5, device=x.device),
])
def test_random_like_forms_are_lowered(dev, make):
    met.clear_counters()
    make(torch.ones(2, device=dev)).cpu()
    assert not fallbacks()


def test_randperm_is_a_permutation(dev):
    out = torch.randperm(7, device=dev)
    assert out.dtype == torch.int64
    assert torch.equal(out.cpu().sort().values, torch.arange(7))


def test_sgn_backward_of_real_tensors_uses_zero_tensors():
    check_lowered(lambda x: x.sgn(), seeded_randn(3, 4), grads=True)
