import pytest
import torch

from tests.conftest import check_lowered

S = torch.special
INF, NAN = float("inf"), float("nan")


def _points():
    """Random values, a grid across every branch point of the approximations (|x| = 2, 5, 8,
    2.09, 8.32 ...), and the edge values."""
    torch.manual_seed(0)
    return torch.cat([torch.randn(24) * 3, torch.linspace(-12, 12, 49),
                      torch.tensor([0., -0., 1e-6, 1., -1., 2., 2.09, -2.09, 5., 8., 8.5, 30., 150.,
                                    -150., 104., INF, -INF, NAN])])


X = _points()
INTS = torch.arange(-8, 13)

UNARY = ["i0e", "i1", "i1e", "ndtri", "erfcx", "log_ndtr", "bessel_j0", "bessel_j1", "bessel_y0",
         "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
         "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
         "spherical_bessel_j0", "airy_ai"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    fn = getattr(S, name)
    x = torch.rand(16) if name == "ndtri" else X  # ndtri: (0, 1)
    check_lowered(fn, torch.cat([x, torch.tensor([0., 1.])]))


def test_unary_int_and_float64_inputs():
    """Integers compute in float32 (and return it), float64 in float64."""
    check_lowered(lambda i: tuple(getattr(S, n)(i) for n in UNARY), INTS)
    check_lowered(lambda x: tuple(getattr(S, n)(x) for n in UNARY), X.double(), rtol=1e-9)


def test_erfcx_where_float32_erfc_underflows():
    x = torch.tensor([5., 8., 9.25, 9.4, 12., 26., 30., 50., 100., 1e4, -3., -10., -27.])
    check_lowered(lambda x: (S.erfcx(x), S.log_ndtr(-x)), x)


def test_zeta():
    torch.manual_seed(1)
    x = torch.cat([torch.randn(12) * 4, torch.tensor([1., 0.5, 2., 3., 2.5, 4.])])
    q = torch.cat([torch.randn(12) * 4, torch.tensor([1., 1., -2., -1.5, -1.5, 0.])])
    check_lowered(lambda x, q: (S.zeta(x, q), S.zeta(x.abs() + 1, q.abs()), S.zeta(3., q),
                                S.zeta(x, 2.)), x, q)


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
               "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


def _polynomial_inputs():
    """x inside (-1, 1) (the closed forms), outside, at the special points; degrees -2 .. 12
    (fractional ones truncate), and NaN, inf and huge degrees (0) on a second row."""
    torch.manual_seed(2)
    x = torch.cat([torch.rand(30) * 2 - 1, torch.randn(12) * 3,
                   torch.tensor([1., -1., 0., 0.5, -0.5, 2.])])
    n = torch.randint(-2, 13, x.shape).float()
    n = torch.stack([n + 0.25 * (torch.arange(x.numel()) % 2), torch.full_like(x, NAN)])
    n[1, ::3], n[1, 1::3] = INF, 1e30
    return x, n


@pytest.mark.parametrize("name", POLYNOMIALS)
def test_polynomial(name):
    fn = getattr(S, name)
    x, n = _polynomial_inputs()
    check_lowered(lambda x, n, i: (fn(x, n), fn(i, i.flip(0) % 7)), x, n, INTS, rtol=1e-5)


def test_polynomial_scalar_overloads_and_float64():
    x, n = _polynomial_inputs()
    names = ["chebyshev_polynomial_t", "shifted_chebyshev_polynomial_v", "hermite_polynomial_he",
             "laguerre_polynomial_l"]
    check_lowered(lambda x, n: tuple(out for p in names for out in (
        getattr(S, p)(x, 3), getattr(S, p)(0.25, n), getattr(S, p)(x.double(), n.double()))),
        x, n, rtol=1e-5)


def test_hermite_degree_limit():
    """NaN above degree 128 (512 in float64)."""
    big = torch.tensor([100., 128., 129., 511., 513.])
    check_lowered(lambda x, n: (S.hermite_polynomial_h(x, n), S.hermite_polynomial_he(x, n),
                                S.hermite_polynomial_h(x.double(), n.double())),
                  torch.full((5,), 0.3), big, rtol=1e-4)


def test_decompositions_end_in_lowered_prims():
    """torch.special ops that decompose (to prims.bessel_j0, prims.ndtri ...) stay on the
    device; their gradients too."""
    x = torch.rand(8) + 0.1

    def fn(x):
        return S.i0e(x) + S.i1(x) + S.i1e(x) + S.erfcx(x) + S.spherical_bessel_j0(x) + S.ndtri(x / 2)
    check_lowered(fn, x.requires_grad_(), grads=True, rtol=1e-5)


def test_igamma_igammac_with_pytorchs_boundary_values():
    """NaN off the domain, the limits at a == 0, x == 0 and infinite a or x (SciPy's)."""
    a = torch.tensor([0., 0., 1., 2., -1., 1., .5, INF, 1., NAN, 3., 0., 1e-3, 100., 1., INF, NAN, 7.])
    x = torch.tensor([0., 1., 0., 3., 1., -1., 2., 1., INF, 1., INF, INF, 1e3, 99., NAN, INF, 0., 6.])
    check_lowered(lambda a, x: (torch.igamma(a, x), torch.igammac(a, x)), a, x)
    check_lowered(lambda a, x: (torch.igamma(a, x), torch.igammac(a, x)), a.double(), x.double(), rtol=1e-9)
    check_lowered(lambda a, x: torch.igamma(a, x), a.half(), x.abs().half())
