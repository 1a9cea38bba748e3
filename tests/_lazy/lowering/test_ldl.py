"""LDLᵀ with Bunch-Kaufman pivoting in portable ops: LAPACK's packed factors and pivots
(sytrf/hetrf), and solves with them (sytrs/hetrs), as PyTorch's on the CPU."""
import pytest
import torch

from tests.conftest import check_lowered
from tests._lazy.lowering._helpers import rand


def _matrix(n, dtype, seed, symmetric):
    a = rand(2, n, n, seed=seed).to(dtype)
    if dtype.is_complex:
        a = a + 1j * rand(2, n, n, seed=seed + 1).to(dtype)
    if symmetric:
        a = a + a.mT
    return a


@pytest.mark.parametrize("dtype,hermitian", [(torch.float32, False), (torch.float64, False),
                                             (torch.complex128, False), (torch.complex128, True)])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_ldl_factor_and_solve(n, dtype, hermitian):
    """1×1 and 2×2 pivots with interchanges (random matrices need both), only the lower
    triangle read (the first matrix is not symmetric)."""
    for seed, symmetric in ((1, False), (3, True)):
        a, b = _matrix(n, dtype, seed, symmetric), rand(2, n, 3, seed=seed + 5).to(dtype)
        check_lowered(lambda a: torch.linalg.ldl_factor_ex(a, hermitian=hermitian), a,
                      rtol=1e-4, atol=1e-5)
        check_lowered(lambda ld, p, b: torch.linalg.ldl_solve(ld, p, b, hermitian=hermitian),
                      *torch.linalg.ldl_factor_ex(a, hermitian=hermitian)[:2], b, rtol=1e-4, atol=1e-4)


def test_two_by_two_pivots_are_negative():
    a = torch.tensor([[0., 1., 2.], [1., 0., 3.], [2., 3., 1.]], dtype=torch.float64)
    _, pivots, _ = check_lowered(torch.linalg.ldl_factor_ex, a)
    assert (pivots.cpu() < 0).any()


def test_a_zero_column_sets_info_and_continues():
    a = torch.tensor([[2., 0., 1.], [0., 0., 0.], [1., 0., 3.]], dtype=torch.float64)
    _, _, info = check_lowered(torch.linalg.ldl_factor_ex, a)
    assert info.cpu() == 2


def test_empty_and_broadcast_solves():
    """An unbatched factor against a batch of right-hand sides (a batch of one segfaults
    PyTorch 2.13's CPU kernel)."""
    ld, pivots = torch.linalg.ldl_factor_ex(_matrix(4, torch.float64, 7, True)[0])[:2]
    check_lowered(torch.linalg.ldl_solve, ld, pivots, rand(3, 4, 2, seed=9).double())
    check_lowered(torch.linalg.ldl_factor_ex, torch.zeros(0, 3, 3))
    check_lowered(torch.linalg.ldl_solve, torch.zeros(0, 0), torch.zeros(0, dtype=torch.int32), torch.zeros(0, 2))
