"""histc, histogram and histogramdd on the device against the CPU's kernel."""
import pytest
import torch

import torch_xla.core.xla_model as xm
from tests.conftest import check_lowered
from tests._lazy.lowering._helpers import rand

INF, NAN = float("inf"), float("nan")


def _data(dtype=torch.float32):
    """Random values, values on the edges of evenly spaced bins, outliers and a NaN."""
    x = torch.cat([rand(40, seed=1), torch.tensor([-3., 3., 0., 1.5, -1.5, 7., -7., NAN])])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_histc(dtype):
    x = _data(dtype)
    check_lowered(lambda x: (torch.histc(x, 6, -3, 3), torch.histc(x, 5, -1, 2.5),
                             torch.histc(x[:40], 7), torch.histc(torch.full_like(x, 2.), 4)), x)


def test_histc_of_no_data():
    check_lowered(lambda x: torch.histc(x, 3), torch.zeros(0))


@pytest.mark.parametrize("density", [False, True])
def test_histogram(density):
    x, w = _data(torch.float64), rand(48, seed=2, low=0, high=1).double()
    edges = torch.tensor([-3., -1., 0., 0.5, 3.], dtype=torch.float64)
    check_lowered(lambda x, w, e: (torch.histogram(x[:40], 7, density=density),
                                   torch.histogram(x, 4, range=(-2., 2.), weight=w, density=density),
                                   torch.histogram(x, e, weight=w, density=density),
                                   torch.histogram(torch.ones_like(x), 3)), x, w, edges)


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd(density):
    x, w = rand(30, 3, seed=3), rand(30, seed=4, low=0, high=1)
    e0, e1, e2 = torch.tensor([-3., 0., 3.]), torch.tensor([-1., 1.]), torch.tensor([-2., -1., 0., 2.])
    check_lowered(lambda x, w, e0, e1, e2: (
        torch.histogramdd(x, [3, 4, 2], density=density),
        torch.histogramdd(x, [2, 2, 2], range=[-1., 1., -2., 2., 0., 3.], weight=w, density=density),
        torch.histogramdd(x, [e0, e1, e2], weight=w, density=density)), x, w, e0, e1, e2)


def test_errors_as_the_cpu():
    d = xm.xla_device()
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.histogram(torch.ones(3, dtype=torch.int64, device=d), 3)
    with pytest.raises(RuntimeError, match="should have the same dtype"):
        torch.histogram(torch.ones(3, device=d), torch.tensor([0., 1.], dtype=torch.float64, device=d))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.ones(3, device=d), 3, min=2, max=1)
