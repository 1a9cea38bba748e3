"""geqrf and ormqr in portable ops (loops and products), against LAPACK's on the CPU."""
import pytest
import torch

import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, check_lowered
from tests._lazy.lowering._helpers import rand

SHAPES = [(5, 3), (3, 5), (4, 4), (2, 3, 2), (1, 1), (4, 0)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_geqrf(shape, dtype):
    a = rand(*shape, seed=1).to(dtype)
    if dtype.is_complex:
        a = a + 1j * rand(*shape, seed=2).to(dtype)
    check_lowered(torch.geqrf, a, rtol=1e-4, atol=1e-5)


def test_geqrf_of_a_zero_column_reflects_nothing():
    """tau = 0 (H = I) where the column below the diagonal is 0 and its head real."""
    a = torch.tensor([[0., 1.], [0., 2.], [0., 3.]], dtype=torch.float64)
    qr, tau = check_lowered(torch.geqrf, a)
    assert tau.cpu()[0] == 0


def test_geqrf_errors_as_the_cpu():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        torch.geqrf(torch.ones(3, device=xm.xla_device()))
    with pytest.raises(NotImplementedError, match="geqrf_cpu"):
        torch.geqrf(torch.ones(3, 3, dtype=torch.int64, device=xm.xla_device()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 5)], ids=str)
def test_ormqr(shape, left, transpose, dtype):
    a = rand(2, *shape, seed=3).to(dtype)
    if dtype.is_complex:
        a = a + 1j * rand(2, *shape, seed=4).to(dtype)
    qr, tau = torch.geqrf(a)
    m = shape[0]
    other = rand(2, m, 3, seed=5).to(dtype) if left else rand(2, 3, m, seed=5).to(dtype)
    check_lowered(lambda q, t, c: torch.ormqr(q, t, c, left=left, transpose=transpose), qr, tau, other)


def test_ormqr_and_geqrf_export_without_library_calls():
    """The StableHLO of both holds no custom call (LAPACK's have no compatibility guarantee)."""
    from torch_xla import stablehlo

    class QR(torch.nn.Module):
        def forward(self, a, c):
            qr, tau = torch.geqrf(a)
            return torch.ormqr(qr, tau, c, transpose=True)

    a, c = rand(5, 3, seed=8), rand(5, 2, seed=9)
    exported = stablehlo.exported_program_to_stablehlo(torch.export.export(QR(), (a, c)))
    assert "custom_call" not in exported.get_stablehlo_text()
    expected = torch.ormqr(*torch.geqrf(a), c, transpose=True)
    assert_same(exported(a, c), expected, rtol=1e-4, atol=1e-5)
