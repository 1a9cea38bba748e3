import pytest
import torch

from tests.conftest import check


@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.mul, torch.div, torch.maximum,
                                torch.eq, torch.lt, torch.ge])
def test_binary_float(op):
    torch.manual_seed(0)
    check(op, torch.randn(3, 4), torch.randn(4))


def test_int_tensor_with_float_scalar_promotes_to_float32():
    check(lambda x: x * 0.5, torch.arange(6))


def test_int_division_is_true_division():
    check(lambda x, y: x / y, torch.arange(1, 7), torch.full((6,), 4))
