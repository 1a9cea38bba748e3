"""Special functions (`torch.special.*`): Bessel and Airy functions, the orthogonal
polynomials, and the ones jax.scipy.special has (i0e, i1, i1e, ndtri, erfcx, zeta).

Integer inputs compute in float32, half inputs in float32 (as PyTorch's CPU kernels do).
The functions jax lacks follow PyTorch's kernels (ATen/native/Math.h): Cephes' (S. L.
Moshier's) rational and Chebyshev-series approximations, with their coefficients, in the
input's precision and PyTorch's order of operations, so results agree to rounding. The
polynomials run their three-term recurrences up to each element's degree (one loop to the
largest degree in use), with PyTorch's closed forms and special cases.

The decompositions of several torch.special ops end in prims (prims.bessel_j0 ...): they
share these lowerings.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import torch

from . import aten, lower
from ._types import cast, float_opmath, result_type

prims = torch.ops.prims
_special = jax.scipy.special


def _unary(fn):
    def lowering(x):
        return fn(cast(x, float_opmath(x.dtype)))
    return lowering


def _in_float64(fn, x):
    """fn of float32 x evaluated in float64 and rounded: where XLA's float32 version loses
    digits PyTorch's (libm's) keeps."""
    if x.dtype == np.float32:
        return fn(x.astype(np.float64)).astype(np.float32)
    return fn(x)


def _const(value, like):
    return jnp.full_like(like, value)


def _horner(coeffs, z):
    """sum(c * z**(len - 1 - i)), from 0 as PyTorch's loops (so 0 * inf stays NaN)."""
    out = jnp.zeros_like(z)
    for c in coeffs:
        out = out * z + c
    return out


def _chbevl(y, coeffs):
    """Cephes' Chebyshev series sum at y (= 2 * the series' argument), as PyTorch runs it."""
    p = q = jnp.zeros_like(y)
    a = _const(coeffs[0], y)
    for c in coeffs[1:]:
        p, q = q, a
        a = y * q - p + c
    return 0.5 * (a - p)


# ---- coefficients (Cephes) ---------------------------------------------------------------

_AIRY_AN = (
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
    1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
    1.40264691163389668864e+01, 9.99999999999999995305e-01,)
_AIRY_AD = (
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
    1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
    1.40959135607834029598e+01, 1.00000000000000000470e+00,)
_AIRY_AFN = (
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08,)
_AIRY_AFD = (
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
    9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07,)
_AIRY_AGN = (
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10,)
_AIRY_AGD = (
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
    5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
    4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
    4.91834570062930015649e-09,)
_J0_PP = (
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
    5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01,)
_J0_PQ = (
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
    5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00,)
_J0_QP = (
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00,)
_J0_QQ = (
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
    7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02,)
_J0_RP = (
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
    9.70862251047306323952e+15,)
_J0_RQ = (
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
    1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18,)
_J1_PP = (
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
    5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00,)
_J1_PQ = (
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
    5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01,)
_J1_QP = (
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
    3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01,)
_J1_QQ = (
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
    9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02,)
_J1_RP = (
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
    3.68295732863852883286e+15,)
_J1_RQ = (
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
    2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18,)
_Y0_YP = (
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
    -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16,)
_Y0_YQ = (
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
    8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17,)
_Y1_YP = (
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
    -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17,)
_Y1_YQ = (
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
    1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18,)
_K0_A = (
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01,)
_K0_B = (
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
    2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e+00,)
_K1_A = (
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00,)
_K1_B = (
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
    1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
    3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
    2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
    1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00,)


# ---- functions jax has -----------------------------------------------------------------------

def _erfcx(x):
    """jax's float32 erfcx is exp(x^2) erfc(x) below 9.4, where erfc underflows and exp
    amplifies the rounding of x^2: float32 is computed in float64. Below 0, PyTorch's
    2 exp(x^2) - erfcx(-x) has x^2 rounded to float32 (so does this)."""
    if x.dtype != np.float32:
        return _special.erfcx(x)
    wide = x.astype(np.float64)
    negative = 2 * jnp.exp((x * x).astype(np.float64)) - _special.erfcx(-wide)
    return jnp.where(x < 0, negative, _special.erfcx(wide)).astype(np.float32)


for _ops, _fn in [
        ((aten.special_i0e.default, prims.bessel_i0e.default), _special.i0e),
        ((aten.special_i1.default, aten.special_modified_bessel_i1.default,
          prims.bessel_i1.default), _special.i1),
        ((aten.special_i1e.default, prims.bessel_i1e.default), _special.i1e),
        ((aten.special_modified_bessel_i0.default,), _special.i0),
        ((aten.special_ndtri.default, prims.ndtri.default), _special.ndtri),
        ((aten.special_erfcx.default, prims.erfcx.default), _erfcx)]:
    lower(*_ops)(_unary(_fn))


@lower(aten.special_log_ndtr.default)
def log_ndtr(x):
    """PyTorch's formula (through erfcx below -1, where log(ndtr) would underflow)."""
    x = cast(x, float_opmath(x.dtype))
    t = x * (1 / math.sqrt(2))
    return jnp.where(x < -1, jnp.log(_erfcx(-t) / 2) - t * t,
                     jnp.log1p(-jax.lax.erfc(t) / 2))


@lower(aten.special_zeta, prims.zeta.default)
def zeta(x, q):
    """Hurwitz zeta, computed in float64 for float32 (PyTorch accumulates in double), with
    PyTorch's values off the domain: inf at x == 1 and at non-positive integer q, NaN for
    x < 1 and for non-positive q with non-integer x."""
    dtype = float_opmath(result_type(x, q))
    wide = np.dtype("float64") if dtype == np.float32 else dtype
    x, q = jnp.broadcast_arrays(cast(x, wide), cast(q, wide))
    inf, nan = _const(math.inf, x), _const(math.nan, x)
    out = _special.zeta(x, q)
    out = jnp.where((q <= 0) & (x != jnp.floor(x)), nan, out)
    out = jnp.where((q <= 0) & (q == jnp.floor(q)), inf, out)
    out = jnp.where(x < 1, nan, out)
    return jnp.where(x == 1, inf, out).astype(dtype)


def _incomplete_gamma(fn, at_a_zero, at_x_zero):
    """The regularized incomplete gamma `fn` (float32 computed in float64), with PyTorch's
    boundary values (SciPy's): NaN for a < 0 or x < 0, `at_a_zero` at a == 0 < x,
    `at_x_zero` at x == 0 (even for a NaN a), for an infinite a the value at x == 0 (NaN
    if x is infinite too), for an infinite x that at a == 0."""
    def lowering(a, x):
        dtype = float_opmath(result_type(a, x))
        wide = np.dtype("float64") if dtype == np.float32 else dtype
        a, x = jnp.broadcast_arrays(cast(a, wide), cast(x, wide))
        nan = _const(math.nan, a)
        out = fn(a, x)
        out = jnp.where(jnp.isinf(x), at_a_zero, out)
        out = jnp.where(jnp.isinf(a), jnp.where(jnp.isinf(x), nan, at_x_zero), out)
        out = jnp.where(x == 0, at_x_zero, out)
        out = jnp.where(a == 0, jnp.where(x > 0, at_a_zero, nan), out)
        return jnp.where((x < 0) | (a < 0), nan, out).astype(dtype)
    return lowering


lower(aten.igamma.default, prims.igamma.default)(_incomplete_gamma(jax.lax.igamma, 1.0, 0.0))
lower(aten.igammac.default, prims.igammac.default)(_incomplete_gamma(jax.lax.igammac, 0.0, 1.0))


# ---- Bessel functions of the first and second kind ---------------------------------------

_PIO4 = 0.785398163397448309615660845819875721
_3PIO4 = 2.356194490192344928846982537459627163
_SQ2OPI = 0.797884560802865355879892119868763737  # sqrt(2 / pi)
_TWOOPI = 0.636619772367581343075535053490057448  # 2 / pi


def _j0(x):
    x = jnp.abs(x)
    xx = x * x
    small = (xx - 5.78318596294678452118) * (xx - 30.4712623436620863991) \
        * _horner(_J0_RP, xx) / _horner(_J0_RQ, xx)
    small = jnp.where(x < 0.00001, 1 - xx / 4, small)
    large = _asymptotic(x, 25 / xx, _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, _PIO4, False)
    return jnp.where(x <= 5, small, large)


def _asymptotic(x, z, pp, pq, qp, qq, shift, second_kind):
    """The large-x form of J0/J1 (Y0/Y1 with `second_kind`): rational functions of
    z = 25 / x^2 (computed as PyTorch does) weighting cos and sin of x - shift."""
    p = _horner(pp, z) / _horner(pq, z)
    q = 5 / x * (_horner(qp, z) / _horner(qq, z))
    c, s = jnp.cos(x - shift), jnp.sin(x - shift)
    out = p * s + q * c if second_kind else p * c - q * s
    return out * _SQ2OPI / jnp.sqrt(x)


def _j1_positive(x):
    xx = x * x
    small = _horner(_J1_RP, xx) / _horner(_J1_RQ, xx) * x * (xx - 14.6819706421238932572) \
        * (xx - 49.2184563216946036703)
    large = _asymptotic(x, 5 / x * (5 / x), _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, _3PIO4, False)
    return jnp.where(x <= 5, small, large)


def _j1(x):
    out = _j1_positive(jnp.abs(x))
    return jnp.where(x < 0, -out, out)


def _y0(x):
    xx = x * x
    small = _horner(_Y0_YP, xx) / _horner(_Y0_YQ, xx) + _TWOOPI * jnp.log(x) * _j0(x)
    small = jnp.where(x < 0, _const(math.nan, x), small)
    small = jnp.where(x == 0, _const(-math.inf, x), small)
    large = _asymptotic(x, 25 / xx, _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, _PIO4, True)
    return jnp.where(x <= 5, small, large)


def _y1(x):
    xx = x * x
    small = x * (_horner(_Y1_YP, xx) / _horner(_Y1_YQ, xx)) \
        + _TWOOPI * (_j1_positive(x) * jnp.log(x) - 1 / x)
    small = jnp.where(x < 0, _const(math.nan, x), small)
    small = jnp.where(x == 0, _const(-math.inf, x), small)
    large = _asymptotic(x, 5 / x * (5 / x), _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, _3PIO4, True)
    return jnp.where(x <= 5, small, large)


def _spherical_j0(x):
    xx = x * x
    series = 1 + xx * (-1 / 6 + xx * (1 / 120 + xx * (-1 / 5040 + xx * (
        1 / 362880 + xx * (-1 / 39916800 + xx * (1 / 6227020800))))))
    out = jnp.where(jnp.abs(x) < 0.5, series, jnp.sin(x) / x)
    return jnp.where(jnp.isinf(x), jnp.zeros_like(x), out)


# ---- modified Bessel functions of the second kind -----------------------------------------

def _k_small(x, order):
    """K0 or K1 for 0 < x <= 2: a Chebyshev series and log(x / 2) I0 (I1)."""
    a = _chbevl(x * x - 2, _K0_A if order == 0 else _K1_A)
    if order == 0:
        return a - jnp.log(0.5 * x) * _special.i0(x)
    return jnp.log(0.5 * x) * _special.i1(x) + a / x


def _k(order, scaled):
    """K0 / K1, or exp(x) K0 / exp(x) K1 (`scaled`); inf at 0, NaN below."""
    def fn(x):
        small = _k_small(x, order)
        large = _chbevl(8 / x - 2, _K0_B if order == 0 else _K1_B)
        if scaled:
            small, large = small * jnp.exp(x), large / jnp.sqrt(x)
        else:
            large = jnp.exp(-x) * large / jnp.sqrt(x)
        out = jnp.where(x <= 2, small, large)
        out = jnp.where(x < 0, _const(math.nan, x), out)
        return jnp.where(x == 0, _const(math.inf, x), out)
    return fn


# ---- Airy function Ai ---------------------------------------------------------------------

_AIRY_C1 = 0.355028053887817239260   # Ai(0)
_AIRY_C2 = 0.258819403792806798405   # -Ai'(0)
_SQPII = 5.64189583547756286948e-01  # 1 / sqrt(pi)


def _airy_ai(x):
    # x < -2.09: oscillating asymptotic form
    neg = -x
    zeta_neg = -2 * x * jnp.sqrt(neg) / 3
    z = 1 / zeta_neg
    zz = z * z
    f = 1 + zz * _horner(_AIRY_AFN, zz) / _horner(_AIRY_AFD, zz)
    g = z * _horner(_AIRY_AGN, zz) / _horner(_AIRY_AGD, zz)
    t = zeta_neg + 0.25 * math.pi
    oscillating = _SQPII / jnp.sqrt(jnp.sqrt(neg)) * (jnp.sin(t) * f - jnp.cos(t) * g)
    # x >= 2.09: decaying asymptotic form
    zeta = 2 * x * jnp.sqrt(x) / 3
    ratio = _horner(_AIRY_AN, 1 / zeta) / _horner(_AIRY_AD, 1 / zeta)
    decaying = _SQPII * ratio / (2 * jnp.sqrt(jnp.sqrt(x)) * jnp.exp(zeta))
    # in between: the Maclaurin series, summed until a term is below epsilon
    inside = (x >= -2.09) & (x < 2.09)
    xs = jnp.where(inside, x, jnp.zeros_like(x))
    eps = jnp.finfo(x.dtype).eps

    def step(state):
        f, g, k, m, n, _ = state
        m = m * z3
        k = k + 1
        m = m / k
        n = n * z3
        k = k + 1
        n = n / k
        m = m / k
        f = f + m
        k = k + 1
        n = n / k
        return f, g + n, k, m, n, jnp.abs(m / f)

    def body(state):
        new = step(state)
        active = state[-1] > eps
        return tuple(jnp.where(active, a, b) for a, b in zip(new, state))

    z3 = xs * xs * xs
    one = jnp.ones_like(xs)
    init = (one, xs, one, one, xs, one)
    f, g, *_ = jax.lax.while_loop(lambda s: jnp.any(s[-1] > eps), body, init)
    series = _AIRY_C1 * f - _AIRY_C2 * g
    out = jnp.where(x < -2.09, oscillating, jnp.where(inside, series, decaying))
    out = jnp.where(x > 103.892, jnp.zeros_like(x), out)
    return jnp.where(jnp.isinf(x), _const(math.nan, x), out)


for _ops, _fn in [
        ((aten.special_bessel_j0.default, prims.bessel_j0.default), _j0),
        ((aten.special_bessel_j1.default, prims.bessel_j1.default), _j1),
        ((aten.special_bessel_y0.default,), _y0),
        ((aten.special_bessel_y1.default,), _y1),
        ((aten.special_modified_bessel_k0.default,), _k(0, False)),
        ((aten.special_modified_bessel_k1.default,), _k(1, False)),
        ((aten.special_scaled_modified_bessel_k0.default,), _k(0, True)),
        ((aten.special_scaled_modified_bessel_k1.default,), _k(1, True)),
        ((aten.special_spherical_bessel_j0.default, prims.spherical_bessel_j0.default),
         _spherical_j0),
        ((aten.special_airy_ai.default,), _airy_ai)]:
    lower(*_ops)(_unary(_fn))


# ---- orthogonal polynomials: op(x, n), n truncated to an integer ---------------------------

def _degree(n):
    """n as PyTorch's kernels cast it to int64; NaN, inf and out-of-range values give
    INT64_MIN (x86's conversion result), i.e. a negative degree."""
    if jnp.issubdtype(n.dtype, jnp.integer):
        return n.astype(np.int64)
    ok = jnp.isfinite(n) & (jnp.abs(n) < 2.0 ** 63)
    return jnp.where(ok, n, -1).astype(np.int64)


def _recurrence(step, p, q, n, looping, nan_stops):
    """q after applying `step(k, p, q) -> next` for k = 2 .. n (the polynomials of degree
    0 and 1 being p and q), for the elements where `looping`; with `nan_stops`, an element
    stops at its first NaN, as PyTorch's loops do."""
    last = jnp.where(looping, n, 1)

    def active(k, q):
        going = k <= last
        return going & ~jnp.isnan(q) if nan_stops else going

    def body(state):
        k, p, q = state
        go = active(k, q)
        r = step(k, p, q)
        return k + 1, jnp.where(go, q, p), jnp.where(go, r, q)

    init = (jnp.asarray(2, np.int64), p, q)
    _, _, q = jax.lax.while_loop(lambda s: jnp.any(active(s[0], s[2])), body, init)
    return q


def _polynomial(fn):
    """A binary (x, n) lowering: both promoted to PyTorch's float result type, then fn."""
    def lowering(x, n):
        dtype = float_opmath(result_type(x, n))
        x, n = jnp.broadcast_arrays(cast(x, dtype), cast(n, dtype))
        return fn(x, _degree(n))
    return lowering


def _select(cases, otherwise):
    """`otherwise` where no (condition, value) of `cases` holds; the first that holds wins."""
    out = otherwise
    for cond, value in reversed(cases):
        out = jnp.where(cond, value, out)
    return out


def _chebyshev(kind, shifted):
    """Chebyshev polynomials T, U, V, W of y = x (or 2x - 1, `shifted`): the recurrence
    r = 2y q - p, or for degree above `closed` (6 or 8 as PyTorch) and |y| < 1 the
    trigonometric closed form in acos(y). At y = +-1 (x = 1 or 0 when shifted) exact
    values."""
    closed = {"t": 6, "u": 6 if shifted else 8, "v": 6 if shifted else 8,
              "w": 4 if shifted else 8}[kind]

    def fn(x, n):
        y = x + x - 1 if shifted else x
        nf = n.astype(x.dtype)
        one = jnp.ones_like(x)
        first = {"t": y, "u": y + y, "v": y + y - 1, "w": y + y + 1}[kind]
        at_one = {"t": one, "u": nf + 1, "v": one, "w": nf + nf + 1}[kind]
        odd = n % 2 == 1
        at_minus_one = {"t": jnp.where(odd, -one, one), "u": jnp.where(odd, -(nf + 1), nf + 1),
                        "v": jnp.where(odd, -(nf + nf + 1), nf + nf + 1),
                        "w": jnp.where(odd, -one, one)}[kind]
        theta = _in_float64(jnp.arccos, y)
        if kind == "t":
            trig = jnp.cos(nf * theta)
        elif kind == "u":
            trig = jnp.where(jnp.sin(theta) != 0, jnp.sin((nf + 1) * theta) / jnp.sin(theta),
                             (nf + 1) * jnp.cos((nf + 1) * theta) / y)
        elif kind == "v":
            trig = jnp.where(jnp.sin(theta / 2) != 1,
                             jnp.cos((nf + 0.5) * theta) / jnp.cos(theta / 2), at_minus_one)
        else:
            trig = jnp.where(jnp.cos(theta / 2) != 1,
                             jnp.sin((nf + 0.5) * theta) / jnp.sin(theta / 2), at_one)
        inside = (n > closed) & (jnp.abs(y) < 1)
        edge_one = (x == 1) if shifted else (jnp.abs(x) == 1) & (x > 0)
        edge_minus_one = (x == 0) if shifted else (jnp.abs(x) == 1) & (x < 0)
        looping = (n >= 2) & ~edge_one & ~edge_minus_one & ~inside
        two_y = y + y
        rec = _recurrence(lambda k, p, q: two_y * q - p, one, first, n, looping, True)
        return _select([(n < 0, jnp.zeros_like(x)), (edge_one, at_one),
                              (edge_minus_one, at_minus_one), (inside, trig),
                              (n == 0, one), (n == 1, first)], rec)
    return fn


def _hermite(physicists):
    """H (`physicists`: r = 2x q - 2k p) or He (r = x q - k p); NaN above degree 128 (512
    for float64), PyTorch's limit."""
    def fn(x, n):
        one = jnp.ones_like(x)
        first = x + x if physicists else x
        limit = 128 if x.dtype == np.float32 else 512
        looping = (n >= 2) & (n <= limit)
        if physicists:
            step = lambda k, p, q: (x + x) * q - (2 * (k - 1)).astype(x.dtype) * p  # noqa: E731
        else:
            step = lambda k, p, q: x * q - (k - 1).astype(x.dtype) * p  # noqa: E731
        rec = _recurrence(step, one, first, n, looping, False)
        return _select([(n < 0, jnp.zeros_like(x)), (n == 0, one), (n == 1, first),
                              (n > limit, _const(math.nan, x))], rec)
    return fn


def _laguerre(x, n):
    """L_n: r = ((2k + (1 - x)) q - k p) / (k + 1), 1 at x == 0."""
    one = jnp.ones_like(x)
    first = 1 - x

    def step(k, p, q):
        k = (k - 1).astype(x.dtype)
        return ((k + k + (1 - x)) * q - k * p) / (k + 1)

    rec = _recurrence(step, one, first, n, (n >= 2) & (x != 0), True)
    return _select([(n < 0, jnp.zeros_like(x)), (jnp.abs(x) == 0, one), (n == 0, one),
                          (n == 1, first)], rec)


def _legendre(x, n):
    """P_n: r = ((2k + 1) x q - k p) / (k + 1), +-1 at x == +-1."""
    one = jnp.ones_like(x)

    def step(k, p, q):
        k = (k - 1).astype(x.dtype)
        return ((k + k + 1) * x * q - k * p) / (k + 1)

    edge = jnp.abs(x) == 1
    at_edge = jnp.where((x > 0) | (n % 2 == 0), one, -one)
    rec = _recurrence(step, one, x, n, (n >= 2) & ~edge, True)
    return _select([(n < 0, jnp.zeros_like(x)), (edge, at_edge), (n == 0, one),
                          (n == 1, x)], rec)


for _name, _fn in [
        ("chebyshev_polynomial_t", _chebyshev("t", False)),
        ("chebyshev_polynomial_u", _chebyshev("u", False)),
        ("chebyshev_polynomial_v", _chebyshev("v", False)),
        ("chebyshev_polynomial_w", _chebyshev("w", False)),
        ("shifted_chebyshev_polynomial_t", _chebyshev("t", True)),
        ("shifted_chebyshev_polynomial_u", _chebyshev("u", True)),
        ("shifted_chebyshev_polynomial_v", _chebyshev("v", True)),
        ("shifted_chebyshev_polynomial_w", _chebyshev("w", True)),
        ("hermite_polynomial_h", _hermite(True)),
        ("hermite_polynomial_he", _hermite(False)),
        ("laguerre_polynomial_l", _laguerre),
        ("legendre_polynomial_p", _legendre)]:
    lower(getattr(aten, "special_" + _name))(_polynomial(_fn))
