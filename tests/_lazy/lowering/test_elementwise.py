"""Elementwise lowerings against PyTorch's CPU kernels: values, dtypes, NaN handling and
promotion for float, int and bool inputs, and gradients of the math ops."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
from tests._lazy.lowering._helpers import rand, rint
from tests.conftest import assert_same, check_lowered, compiles

aten = torch.ops.aten
nan, inf = math.nan, math.inf


def nonzero_int(*shape, seed=1):
    x = rint(*shape, seed=seed)
    return torch.where(x == 0, 3, x)


def rbool(*shape, seed=0):
    return rint(*shape, seed=seed, low=0, high=2) == 1


# Special values, paired so that every combination of NaN, infinities and signed zeros meets.
SPECIAL = torch.tensor([nan, inf, -inf, 0.0, -0.0, 1.5, -2.5, 3.0, 1.0, -1.0])
SA = SPECIAL.repeat_interleave(len(SPECIAL))
SB = SPECIAL.repeat(len(SPECIAL))


# ---- binary arithmetic -----------------------------------------------------------------------

FLOAT_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "add_alpha": lambda x, y: torch.add(x, y, alpha=2), "sub_alpha": lambda x, y: torch.sub(x, y, alpha=0.5),
    "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "floor_divide": torch.floor_divide, "true_divide": torch.true_divide,
    "remainder": torch.remainder, "fmod": torch.fmod, "rsub": lambda x, y: torch.rsub(x, y, alpha=3),
    "copysign": torch.copysign, "hypot": torch.hypot, "atan2": torch.atan2,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "xlogy": torch.xlogy, "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2,
    "nextafter": torch.nextafter, "heaviside": torch.heaviside,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
}


@pytest.mark.parametrize("name", sorted(FLOAT_BINARY))
def test_float_binary(name):
    """Broadcasting, and every pair of NaN, infinities and signed zeros: NaN propagation of
    maximum/minimum and not of fmax/fmin, floor division by zero, remainder signs..."""
    fn = FLOAT_BINARY[name]
    check_lowered(lambda a, b, c, d: (fn(a, b), fn(c, d)), rand(3, 4), rand(4, seed=1) + 0.1, SA, SB)


def test_floor_division_uses_exact_remainder():
    # 1 // 0.1 is 9 in PyTorch (and Python), not floor(1 / 0.1) = 10.
    x, y = torch.tensor([1.0, -1.0, 0.3, 7.0, -7.0]), torch.tensor([0.1, 0.1, 0.1, -2.0, 2.0])
    out = check_lowered(torch.floor_divide, x, y)
    assert out.cpu()[0] == 9
    check_lowered(torch.remainder, x, y)


INT_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "add_alpha": lambda x, y: torch.add(x, y, alpha=3),
    "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "div_trunc": lambda x, y: torch.div(x, y, rounding_mode="trunc"),
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "rsub": torch.rsub, "copysign": torch.copysign, "atan2": torch.atan2, "xlogy": torch.xlogy,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "heaviside": torch.heaviside, "pow": lambda x, y: torch.pow(x, y.abs() % 5),
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
}


BOOL_BINARY = {"add", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "ge", "logical_and",
               "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "xlogy"}


@pytest.mark.parametrize("name", sorted(INT_BINARY))
def test_int_and_bool_binary(name):
    """Integer kernels: exact division modes (negative operands), int -> float for div,
    atan2, copysign and xlogy; bool inputs where PyTorch takes them."""
    fn = INT_BINARY[name]
    if name in BOOL_BINARY:
        check_lowered(lambda a, b, c, d: (fn(a, b), fn(c, d)), rint(3, 4), nonzero_int(4), rbool(3, 4), rbool(4, seed=5))
    else:
        check_lowered(fn, rint(3, 4), nonzero_int(4))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
def test_integer_overflow_wraps(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.max, info.min, info.max // 2 + 1, 3], dtype=dtype)
    y = torch.tensor([1, -1 if info.min < 0 else 1, 3, 2], dtype=dtype)
    check_lowered(lambda a, b: (a + b, a * b, a - b, a * 4, a + 1), x, y)
    check_lowered(lambda a: (torch.pow(a, 3), a.square(), a.abs() if info.min < 0 else a, -a if info.min < 0 else a), x)


def test_int_pow_negative_exponents():
    """1 for base 1, +-1 for base -1, 0 for other bases (no error for tensor exponents)."""
    check_lowered(torch.pow, torch.tensor([2, -1, -1, 1, 0, 3, -2]), torch.tensor([-1, -3, -2, -5, 2, 2, 3]))


def test_pow_overloads():
    x = rand(3, 4, low=0.1, high=3.0)
    check_lowered(torch.pow, x, rand(3, 4, seed=2))
    check_lowered(lambda a: (a ** 2, a ** 0.5, a ** -1.5, 2 ** a, 0.5 ** a, a.square()), x)
    check_lowered(lambda a: (a ** 2, a ** 0.5, 2 ** a, 2.5 ** a, a.square()), rint(3, 4))
    check_lowered(lambda a, b: a ** b, torch.tensor([-2.0, -8.0, 0.0, nan, 1.0]), torch.tensor([3.0, 1 / 3, -1.0, 0.0, nan]))


SCALAR_OPS = {
    "add": lambda x: (x + 2, x + 2.5, 3 + x, torch.add(x, 2, alpha=3)),
    "sub": lambda x: (x - 2, x - 0.5, 1 - x, torch.rsub(x, 2.5), torch.sub(x, 1, alpha=2)),
    "mul": lambda x: (x * 3, x * 0.5, x * True),
    "div": lambda x: (x / 2, x / 0.5, 7 / (x.abs() + 1), torch.div(x, 2, rounding_mode="floor"),
                      torch.div(x, -2, rounding_mode="trunc"), torch.div(x, 2.5, rounding_mode="floor")),
    "floor_divide": lambda x: (x // 2, x // -2.5, torch.floor_divide(x, 3)),
    "remainder": lambda x: (x % 3, x % -2.5, torch.remainder(7, x.abs() + 1), torch.remainder(-7.5, x.abs() + 1)),
    "fmod": lambda x: (torch.fmod(x, 3), torch.fmod(x, -2.5)),
    "pow": lambda x: (x ** 3, x.abs() ** 0.5, 3 ** x.abs()),
    "copysign": lambda x: (torch.copysign(x, -1.0), torch.copysign(x, 2)),
    "xlogy": lambda x: (torch.xlogy(x, 2.0), torch.xlogy(2, x.abs() + 1)),
    "compare": lambda x: (x == 1, x != 1.5, x < 0, x <= 0.5, x > -1, x >= 2),
    "maximum": lambda x: (torch.clamp_min(x, 0.5), torch.clamp_max(x, 1)),
}


@pytest.mark.parametrize("name", sorted(SCALAR_OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scalar_overloads(name, dtype):
    """Python scalars take part in promotion as wrapped numbers (int tensor + 2.5 is
    float32, float tensor + 2 stays float32)."""
    x = rand(3, 4) if dtype == torch.float32 else rint(3, 4)
    check_lowered(SCALAR_OPS[name], x)


def test_scalar_arguments_are_parameters(dev):
    """Scalar-typed arguments reach the lowerings as program parameters: new values of
    them reuse the compiled program."""
    x = rand(5).to(dev)

    def run(s):
        y = torch.add(x, x, alpha=s).clamp(-s, s)
        return F.leaky_relu(F.elu(y, alpha=s), s), F.hardtanh(y, -s, s), torch.lerp(x, y, s)
    first = run(0.5)  # noqa: F841  (held, so that mark_step computes it)
    xm.mark_step()
    before = compiles()
    assert before > 0
    for s in (3.0, 0.25):
        got = run(s)
        xm.mark_step()
        x_cpu = x.cpu()
        y = torch.add(x_cpu, x_cpu, alpha=s).clamp(-s, s)
        expected = F.leaky_relu(F.elu(y, alpha=s), s), F.hardtanh(y, -s, s), torch.lerp(x_cpu, y, s)
        assert_same(got, expected)
    assert compiles() == before


def test_bool_arithmetic_with_scalars():
    check_lowered(lambda b: (b + 1, b * 2.5, b / 2, b == True, b & True, b | False), rbool(6))  # noqa: E712


def test_lerp_addcmul_addcdiv():
    x, y, w = rand(3, 4), rand(3, 4, seed=1), rand(4, seed=2, low=-0.5, high=1.5)
    check_lowered(lambda a, b, c: (torch.lerp(a, b, 0.3), torch.lerp(a, b, 0.8), torch.lerp(a, b, c)), x, y, w)
    check_lowered(lambda a, b, c: (torch.addcmul(a, b, c), torch.addcmul(a, b, c, value=-0.5),
                                   torch.addcdiv(a, b, c), torch.addcdiv(a, b, c, value=2)), x, y, w)
    check_lowered(lambda a, b, c: torch.addcmul(a, b, c, value=3), rint(3, 4), rint(3, 4, seed=1), rint(4, seed=2))


def test_lerp_is_exact_at_the_ends():
    x, y = torch.tensor([1e8, -3.0, 0.1]), torch.tensor([1.0, 1e-8, 7.0])
    out = check_lowered(lambda a, b: (torch.lerp(a, b, 1.0), torch.lerp(a, b, 0.0)), x, y)
    assert torch.equal(out[0].cpu(), y) and torch.equal(out[1].cpu(), x)


# ---- clamp, where, rounding, classification --------------------------------------------------

def test_clamp_scalar_bounds():
    x = torch.cat([rand(8), torch.tensor([nan, inf, -inf])])
    check_lowered(lambda a: (torch.clamp(a, -0.5, 0.5), torch.clamp(a, min=-0.5), torch.clamp(a, max=1),
                             torch.clamp(a, 1.0, -1.0), torch.clip(a, -2, 2), torch.clamp_min(a, 0),
                             torch.clamp_max(a, 0.25)), x)


def test_clamp_tensor_bounds_with_nan():
    x = torch.tensor([0.5, nan, 2.0, -2.0, 0.0, 1.0])
    lo = torch.tensor([0.0, 0.0, nan, -1.0, 1.0, -1.0])
    hi = torch.tensor([1.0, 1.0, 1.0, nan, 0.5, 2.0])
    check_lowered(lambda a, b, c: (torch.clamp(a, b, c), torch.clamp(a, min=b), torch.clamp(a, max=c),
                                   torch.clamp_min(a, b), torch.clamp_max(a, c), torch.clip(a, b, c)), x, lo, hi)


def test_clamp_int_tensor():
    x = rint(3, 4)
    check_lowered(lambda a: (torch.clamp(a, -2, 3), torch.clamp(a, 0.5), torch.clamp(a, max=2.5)), x)
    check_lowered(lambda a, b: torch.clamp(a, b, b + 4), x, rint(4, seed=3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_where_overloads(dtype):
    c = rbool(3, 4)
    x = rand(3, 4) if dtype == torch.float32 else rint(3, 4) if dtype == torch.int64 else rbool(3, 4, seed=2)
    y = rand(4, seed=2) if dtype == torch.float32 else rint(4, seed=3) if dtype == torch.int64 else rbool(4, seed=3)
    check_lowered(lambda c, a, b: (torch.where(c, a, b), torch.where(c, a, 2), torch.where(c, 0.5, a),
                                   torch.where(c, 1, 0), torch.where(c, 1.5, 0), a.masked_fill(c, 7)), c, x, y)


def test_where_mixed_dtypes_promote():
    check_lowered(torch.where, rbool(4), rint(4), rand(4))


def test_where_scalar_overloads_directly():
    c, x = rbool(3, 4), rand(3, 4)
    check_lowered(lambda c, a: (aten.where.ScalarSelf(c, 2.5, a), aten.where.ScalarOther(c, a, -1),
                                aten.where.Scalar(c, 1.0, 2.0), aten.where.Scalar(c, 1, 2)), c, x)


def test_rounding():
    x = torch.cat([rand(10) * 10, torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, nan, inf, -0.0])])
    check_lowered(lambda a: (torch.trunc(a), torch.floor(a), torch.ceil(a), torch.round(a), torch.frac(a)), x)
    check_lowered(lambda a: (torch.round(a, decimals=2), torch.round(a, decimals=-1), torch.round(a, decimals=0)), x * 37.123)
    check_lowered(lambda a: (torch.trunc(a), torch.floor(a), torch.ceil(a), torch.round(a)), rint(6))


def test_classification_and_nan_to_num():
    x = torch.cat([rand(4), SPECIAL])
    check_lowered(lambda a: (a.isnan(), a.isinf(), a.isfinite(), a.isposinf(), a.isneginf(), a.signbit(),
                             torch.nan_to_num(a), torch.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0),
                             torch.nan_to_num(a, posinf=5.0)), x)
    check_lowered(lambda a: (a.isnan(), a.isinf(), a.isfinite(), a.isposinf(), a.isneginf(), a.signbit(),
                             torch.nan_to_num(a)), rint(6))
    check_lowered(lambda a: (a.isnan(), a.isfinite(), a.signbit()), rbool(6))


def test_sign_abs_neg():
    x = torch.cat([rand(4), SPECIAL])
    check_lowered(lambda a: (torch.sign(a), torch.sgn(a), torch.abs(a), torch.neg(a), torch.positive(a)), x)
    check_lowered(lambda a: (torch.sign(a), torch.sgn(a), torch.abs(a), torch.neg(a)), rint(6))
    check_lowered(lambda a: (torch.sign(a), torch.sgn(a)), rbool(6))


# ---- logic and bits --------------------------------------------------------------------------

def test_logical_ops_mixed_dtypes():
    x = torch.tensor([0.0, nan, -0.0, 2.0, 1.0, 0.0])
    y = torch.tensor([0, 1, 5, 0, -3, 0])
    check_lowered(lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, b),
                                torch.logical_not(a), torch.logical_not(b), torch.logical_not(b > 0)), x, y)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
def test_bitwise_and_shifts(dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([info.min, info.max, -5 if info.min < 0 else 5, 6, 1, 0, 127, 3], dtype=dtype)
    s = torch.tensor([1, 2, 3, 0, info.bits - 1, 5, info.bits, info.bits + 3], dtype=dtype)
    check_lowered(lambda a, b: (a & b, a | b, a ^ b, ~a, a << b, a >> b, torch.bitwise_left_shift(a, b),
                                torch.bitwise_right_shift(a, b)), x, s)
    check_lowered(lambda a: (a & 3, a | 4, a ^ 5, a << 2, a >> 1, torch.bitwise_and(6, a),
                             torch.bitwise_left_shift(3, a.abs() % 4 if info.min < 0 else a % 4),
                             torch.bitwise_right_shift(a, 1)), x)


def test_negative_shift_amounts():
    x, s = torch.tensor([5, -5, 7]), torch.tensor([-1, -2, -64])
    check_lowered(lambda a, b: (a << b, a >> b), x, s)


def test_bool_bitwise_not():
    check_lowered(lambda a: (~a, torch.bitwise_not(a), a ^ True), rbool(6))


# ---- unary math ------------------------------------------------------------------------------

UNARY = {  # name: (fn, low, high) of a domain where it is defined
    "exp": (torch.exp, -5, 5), "exp2": (torch.exp2, -5, 5), "expm1": (torch.expm1, -3, 3),
    "log": (torch.log, 0.01, 10), "log2": (torch.log2, 0.01, 10), "log10": (torch.log10, 0.01, 10),
    "log1p": (torch.log1p, -0.9, 10), "sqrt": (torch.sqrt, 0, 10), "rsqrt": (torch.rsqrt, 0.01, 10),
    "reciprocal": (torch.reciprocal, 0.1, 10), "sin": (torch.sin, -4, 4), "cos": (torch.cos, -4, 4),
    "tan": (torch.tan, -1.5, 1.5), "asin": (torch.asin, -1, 1), "acos": (torch.acos, -1, 1),
    "atan": (torch.atan, -5, 5), "sinh": (torch.sinh, -3, 3), "cosh": (torch.cosh, -3, 3),
    "tanh": (torch.tanh, -5, 5), "asinh": (torch.asinh, -5, 5), "acosh": (torch.acosh, 1, 10),
    "atanh": (torch.atanh, -0.99, 0.99), "erf": (torch.erf, -3, 3), "erfc": (torch.erfc, -3, 3),
    "erfinv": (torch.erfinv, -0.99, 0.99), "lgamma": (torch.lgamma, 0.1, 10),
    "lgamma_neg": (torch.lgamma, -3.9, -0.1), "digamma": (torch.digamma, 0.1, 10),
    "digamma_neg": (torch.digamma, -3.9, -0.1),
    "polygamma1": (lambda x: torch.polygamma(1, x), 0.1, 10), "polygamma2": (lambda x: torch.polygamma(2, x), 0.5, 10),
    "polygamma0": (lambda x: torch.polygamma(0, x), 0.1, 10), "i0": (torch.i0, -5, 5),
    "sigmoid": (torch.sigmoid, -10, 10), "logit": (torch.logit, 0.01, 0.99),
    "logit_eps": (lambda x: torch.logit(x, eps=0.2), 0, 1), "sinc": (torch.sinc, -3, 3),
    "deg2rad": (torch.deg2rad, -360, 360), "rad2deg": (torch.rad2deg, -7, 7), "angle": (torch.angle, -3, 3),
    "square": (torch.square, -3, 3), "frac": (torch.frac, -3, 3),
}
UNARY_RTOL = {"lgamma_neg": 1e-4, "digamma_neg": 1e-4, "polygamma1": 1e-5, "polygamma2": 1e-5,
              "tan": 1e-5, "digamma": 1e-5, "sinh": 1e-5, "cosh": 1e-5, "exp": 1e-5}


UNARY_INT = {"exp", "log", "sqrt", "sin", "tanh", "erf", "sigmoid", "exp2", "log2", "asinh", "lgamma",
             "deg2rad", "angle", "reciprocal", "sinc", "i0", "rsqrt", "erfinv", "digamma", "atan", "square"}
UNARY_BOOL = {"exp", "sqrt", "sigmoid", "erf", "cos", "angle"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    """Float inputs over the op's domain; int and bool inputs compute in float32."""
    fn, low, high = UNARY[name]
    args = [rand(3, 5, low=low, high=high)]
    if name in UNARY_INT:
        args.append(rint(3, 4, low=max(int(low), -2), high=min(int(high), 4) + 1))
    if name in UNARY_BOOL:
        args.append(rbool(6))
    check_lowered(lambda *xs: [fn(x) for x in xs], *args, rtol=UNARY_RTOL.get(name, 1e-5))


def test_polygamma_below_one_half():
    """Negative and small inputs (jax's polygamma is only right for x > 0), and the
    gradient of digamma, which is polygamma(1, x)."""
    x = torch.tensor([-8.4784, -5.5, -3.7, -2.25, -0.5, -0.3, 0.0, 0.2, 0.45, 0.7, 3.2])
    check_lowered(lambda a: [torch.polygamma(n, a) for n in range(5)], x, rtol=1e-4)
    check_lowered(torch.digamma, x.clone().requires_grad_(), grads=True, rtol=1e-4)


def test_unary_special_values():
    x = SPECIAL
    check_lowered(lambda a: (a.exp(), a.log(), a.sqrt(), a.rsqrt(), a.reciprocal(), a.sigmoid(), a.tanh(),
                             a.erf(), a.erfc(), a.erfinv(), a.lgamma(), a.digamma(), a.angle(), a.sinc(),
                             a.log1p(), a.expm1(), a.atan(), torch.logit(a)), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision(dtype):
    x = rand(3, 4).to(dtype)
    check_lowered(lambda a: (a.exp(), a.sigmoid(), a + a, a * 0.5, F.gelu(a), F.silu(a), a.erf(),
                             torch.div(a, 0.3, rounding_mode="floor"), a.clamp(-1, 1)), x, rtol=1e-2, atol=1e-2)


def test_bfloat16_bitwise():
    """Where PyTorch's kernels read a Scalar at float32 precision (mul, div, addcmul, lerp,
    leaky_relu), round it to the dtype (add's alpha), or round every step (xlogy, logit),
    the device gives the same bits (not x / scalar: XLA multiplies by the reciprocal);
    nextafter steps in bfloat16 itself."""
    x = (rand(200) * 3).to(torch.bfloat16)
    y = x.flip(0)
    check_lowered(lambda a, b: (a * 0.1, a / b, 0.7 * a, torch.div(a, 0.1, rounding_mode="floor"),
                                torch.add(a, b, alpha=0.1), torch.sub(a, b, alpha=0.3), a + 0.1, a - b,
                                torch.addcmul(a, a, b, value=0.1), torch.addcdiv(a, a, b.abs() + 1, value=0.3),
                                torch.lerp(a, b, 0.1), F.leaky_relu(a, 0.1), torch.xlogy(a, 2.1),
                                torch.logit(a.sigmoid()), torch.round(a, decimals=1), torch.clamp(a, -0.1, 0.1),
                                torch.nextafter(a, b)),
                        x, y, rtol=0, atol=0)


def test_complex():
    """Conjugation (functionalized into _conj_copy), sgn, abs and angle of complex tensors."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(6, dtype=torch.cfloat, generator=g)
    check_lowered(lambda t: (t.conj() * 1, torch.conj_physical(t), t.conj().imag * 2, (-t.conj()).imag.resolve_neg(),
                             torch.sgn(t), t.abs(), t.angle(), t * t + 1j, torch.exp(t)), z)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_python_scalars_keep_double_precision(dtype):
    """A Python float meeting a float64 (complex128) tensor is computed in float64, not at
    the default dtype's precision (0.1 is not a float32 number)."""
    x = rand(5).to(dtype)
    check_lowered(lambda t: (t * 0.1, t / 0.3, t + 0.1, t - 0.7, torch.add(t, t, alpha=0.1),
                       0.3 * t, t * (0.1 + 0.2j)), x, rtol=1e-14, atol=1e-15)


def test_complex_logaddexp_keeps_the_cpus_branch():
    """The imaginary part follows the operand with the larger real part (PyTorch's form), not
    the principal branch; NaNs infect, equal -inf real parts give the smaller operand."""
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(8, dtype=torch.cdouble, generator=g) * 3 for _ in range(2))
    special = torch.tensor([complex(-math.inf, 2), complex(1, math.nan), complex(3, 2)],
                           dtype=torch.cdouble)
    other = torch.tensor([complex(-math.inf, 1), complex(0, 1), complex(1, 3.5)],
                         dtype=torch.cdouble)
    check_lowered(lambda a, b, c, d: (torch.logaddexp(a, b), torch.logaddexp(c, d),
                                      torch.logaddexp(a.to(torch.cfloat), b.real)), x, y, special, other)


def test_float64_stays_float64():
    check_lowered(lambda a: (a.exp(), a * 2.5, F.gelu(a), a.atan2(a + 1), a.erfinv()), rand(4, low=-0.9, high=0.9).double())


def test_math_grads():
    """Backward formulas of binary and unary math ops stay on the device too."""
    def fn(x, y):
        return (torch.atan2(x, y) + torch.hypot(x, y) + torch.xlogy(x, y.abs() + 1)
                + torch.maximum(x, y) + x.clamp(-1, 1) + torch.lerp(x, y, 0.3) + x.abs() ** y
                + torch.logaddexp(x, y) + torch.sign(x) * x + x.erfinv().nan_to_num() + torch.sinc(x)
                + torch.lgamma(y.abs() + 1) + (x / (y.abs() + 1)) + x.frac() + x.round())
    check_lowered(fn, rand(3, 4, low=-0.9, high=0.9).requires_grad_(), rand(3, 4, seed=1).requires_grad_(),
                  grads=True, rtol=1e-5)


# ---- overloads that only decompositions emit -------------------------------------------------

def test_scalar_overloads_called_directly():
    """Python code turns `x + 2` into add.Tensor; decompositions call the Scalar forms."""
    x, i = rand(3, 4), rint(3, 4)
    check_lowered(lambda x: (aten.add.Scalar(x, 2), aten.add.Scalar(x, 2, 3), aten.sub.Scalar(x, 1.5),
                             aten.mul.Scalar(x, 3), aten.div.Scalar(x, 4),
                             aten.div.Scalar_mode(x, 0.3, rounding_mode="floor"),
                             aten.remainder.Scalar(x, 0.7), aten.fmod.Scalar(x, -0.7), aten.eq.Scalar(x, 0),
                             aten.pow.Tensor_Scalar(x, 3), aten.pow.Scalar(2, x), aten.clamp_min.default(x, 0),
                             aten.copysign.Scalar(x, -1), aten.rsub.Scalar(x, 1, 2), aten.xlogy.Scalar_Other(x, 3)), x)
    check_lowered(lambda i: (aten.add.Scalar(i, 2), aten.mul.Scalar(i, 0.5), aten.div.Scalar(i, 4),
                             aten.div.Scalar_mode(i, 4, rounding_mode="trunc"), aten.floor_divide.Scalar(i, -4),
                             aten.remainder.Scalar(i, 4), aten.bitwise_and.Scalar(i, 6), aten.bitwise_or.Scalar(i, 6),
                             aten.bitwise_xor.Scalar(i, 6), aten.__lshift__.Scalar(i, 2), aten.__rshift__.Scalar(i, 1),
                             aten.bitwise_left_shift.Tensor_Scalar(i, 3), aten.bitwise_right_shift.Tensor_Scalar(i, 1),
                             aten.bitwise_and.Scalar_Tensor(3, i), aten.remainder.Scalar_Tensor(7, i.abs() + 1),
                             aten.clamp_max.default(i, 2)), i)


PRIM_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmax", "fmin", "fmod", "remainder",
               "atan2", "hypot", "nextafter", "eq", "ne", "lt", "le", "gt", "ge"]
PRIM_UNARY = ["abs", "neg", "sign", "trunc", "floor", "ceil", "round", "isfinite", "exp", "exp2",
              "expm1", "log1p", "sin", "cos", "tan", "atan", "sinh", "cosh", "tanh", "asinh", "erf", "erfc",
              "erf_inv", "bessel_i0", "lgamma", "digamma"]


def test_prims():
    """Elementwise prims (where decompositions end) have lowerings too."""
    p = torch.ops.prims
    x, y = rand(3, 4, low=-0.9, high=0.9), rand(3, 4, seed=1, low=0.1, high=2)
    check_lowered(lambda x, y: [getattr(p, n)(x, y) for n in PRIM_BINARY] + [getattr(p, n)(x) for n in PRIM_UNARY]
                        + [p.where(x > 0, x, y), p.log(y), p.sqrt(y), p.rsqrt(y), p.reciprocal(y)], x, y, rtol=1e-5)
    i, j = rint(3, 4), nonzero_int(3, 4)
    check_lowered(lambda i, j: [p.div(i, j), p.remainder(i, j), p.fmod(i, j), p.bitwise_and(i, j), p.bitwise_or(i, j),
                                p.bitwise_xor(i, j), p.bitwise_not(i), p.shift_left(i, j.abs() % 4),
                                p.shift_right_arithmetic(i, j.abs() % 4)], i, j)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_frexp_from_the_bits(dtype):
    """Subnormals too (XLA's float arithmetic may flush them); 0, inf and NaN keep exponent 0."""
    inf = float("inf")
    x = torch.tensor([0., -0., 1., -3.5, inf, -inf, float("nan"), 1e-40, 1e-45, 3e38, .75, -1e-39,
                      2.0 ** -126, 6e-8, 1e-5, 65504., -123.25]).to(dtype)
    check_lowered(torch.frexp, x, rtol=0, atol=0)
