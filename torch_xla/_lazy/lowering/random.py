"""Random ops, drawn from the device's seeded stream (`key=` is given by the engine)."""

import jax
import jax.numpy as jnp
import numpy as np

from ..base import jax_compat
from ..runtime import pjrt
from . import aten, lower
from ._types import float_of


def _unroll_threefry_on_cpu():
    """Has jax lower its threefry hash on the CPU as it does on every other platform: the 20
    rounds unrolled, instead of a while loop of 5 steps. The values are the same; XLA's CPU
    backend compiles a small random op's program 3-5 x faster so (uniform of 4x10: 36 against
    190 ms) and runs a large one ~5 x faster (16M uniform: 26 against 139 ms). Process-wide,
    as jax's lowering rules are; kept as jax's default where jax lacks the unrolled rule."""
    from jax.extend.random import threefry2x32_p
    from jax.interpreters import mlir
    unrolled = jax_compat.threefry_unrolled_lowering()
    if unrolled is None:
        return False
    mlir.register_lowering(threefry2x32_p, mlir.lower_fun(unrolled, multiple_results=True),
                           platform="cpu")
    return True


THREEFRY_UNROLLED = _unroll_threefry_on_cpu()


def _uniform(key, shape, dtype, lo=0.0, hi=1.0):
    """Uniform values in [lo, hi); a complex dtype draws its real and imaginary parts so, as
    PyTorch's uniform_ does through view_as_real."""
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        parts = jax.random.uniform(key, (2,) + tuple(shape), jnp.finfo(dtype).dtype, lo, hi)
        return jax.lax.complex(parts[0], parts[1])
    return jax.random.uniform(key, tuple(shape), dtype, minval=lo, maxval=hi)


def _integers(key, shape, low, high):
    """Integers uniform in [low, high) as int64, as PyTorch's CPU draws them: random bits
    modulo the span, plus low (a span of int64's whole range takes the bits as they are).
    One hash of the key: jax.random.randint's split and two draws make a program XLA
    compiles ~10 x slower (0.39 against 0.03 s for 4 integers)."""
    bits = jax.random.bits(key, tuple(shape), np.uint64)
    last = high - 1  # high - low may not fit int64; the span less one does, wrapped
    if isinstance(low, int) and isinstance(last, int):
        span = np.uint64((last - low + 1) % 2 ** 64)
    else:
        span = jnp.asarray(last - low, np.int64).astype(np.uint64) + np.uint64(1)
    whole = span == 0
    drawn = jnp.where(whole, bits, bits % jnp.where(whole, np.uint64(1), span))
    return drawn.astype(np.int64) + low


@lower(aten.normal_functional.default, rng=True)
def normal_functional(x, mean=0.0, std=1.0, generator=None, *, key):
    return mean + std * jax.random.normal(key, x.shape, float_of(x.dtype))


@lower(aten.normal.Tensor_float, aten.normal.float_Tensor, aten.normal.Tensor_Tensor, rng=True)
def normal(mean, std=1.0, generator=None, *, key):
    shape = jnp.broadcast_shapes(jnp.shape(mean), jnp.shape(std))
    dtype = mean.dtype if hasattr(mean, "shape") else std.dtype
    return mean + std * jax.random.normal(key, shape, float_of(dtype))


@lower(aten.randn.default, rng=True)
def randn(size, generator=None, dtype=None, layout=None, device=None, pin_memory=None, *, key):
    return jax.random.normal(key, tuple(size), pjrt.to_jax_dtype(dtype) if dtype else np.float32)


@lower(aten.rand.default, rng=True)
def rand(size, generator=None, dtype=None, layout=None, device=None, pin_memory=None, *, key):
    return _uniform(key, size, pjrt.to_jax_dtype(dtype) if dtype else np.float32)


@lower(aten.uniform.default, rng=True)
def uniform(x, from_=0.0, to=1.0, generator=None, *, key, **kw):
    lo, hi = kw.get("from", from_), to
    return _uniform(key, x.shape, float_of(x.dtype), lo, hi)


@lower(aten.bernoulli.default, aten.bernoulli.Tensor, rng=True)
def bernoulli(x, p=None, generator=None, *, key):
    p = x if p is None else p
    return jax.random.uniform(key, x.shape, np.float32) < p


@lower(aten.bernoulli.p, rng=True)
def bernoulli_p(x, p, generator=None, *, key):
    return jax.random.uniform(key, x.shape, np.float32) < p


@lower(aten.native_dropout.default, rng=True)
def native_dropout(x, p, train, *, key):
    """`train` None trains, as PyTorch's kernels read it; the output is `x * mask * scale`,
    as theirs computes it."""
    if train is False or p == 0:
        return x, jnp.ones(x.shape, bool)
    keep = jax.random.uniform(key, x.shape, np.float32) >= p
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    return x * keep.astype(x.dtype) * jnp.asarray(scale, x.dtype), keep


@lower(aten.native_dropout_backward.default)
def native_dropout_backward(grad, mask, scale):
    return grad * mask.astype(grad.dtype) * jnp.asarray(scale, grad.dtype)


@lower(aten.exponential.default, rng=True)
def exponential(x, lambd=1.0, generator=None, *, key):
    return jax.random.exponential(key, x.shape, float_of(x.dtype)) / lambd


def _top(dtype) -> int:
    """The largest value random_ draws without an upper bound, as on the CPU: a float
    dtype's every integer up to 2**mantissa digits, an integer dtype's maximum."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return 1
    if jnp.issubdtype(dtype, jnp.integer):
        return int(jnp.iinfo(dtype).max)
    return 2 ** (jnp.finfo(dtype).nmant + 1)


@lower(aten.random.default, rng=True)
def random_(x, generator=None, *, key):
    return _integers(key, x.shape, 0, _top(x.dtype) + 1).astype(x.dtype)


@lower(getattr(aten.random, "from"), rng=True)
def random_from(x, low, high=None, generator=None, *, key):
    high = high if high is not None else _top(x.dtype) + 1
    return _integers(key, x.shape, low, high).astype(x.dtype)


@lower(aten.random.to, rng=True)
def random_to(x, high, generator=None, *, key):
    return _integers(key, x.shape, 0, high).astype(x.dtype)


@lower(aten.randint.default, aten.randint.low, rng=True)
def randint(*args, generator=None, dtype=None, layout=None, device=None, pin_memory=None, key):
    if len(args) == 2:
        low, (high, size) = 0, args
    else:
        low, high, size = args
    return _integers(key, size, low, high)


@lower(aten.randperm.default, rng=True)
def randperm(n, generator=None, dtype=None, layout=None, device=None, pin_memory=None, *, key):
    """0..n-1 ordered by 64-bit random keys: one hash and one sort while n < 2**21 (a round
    more per 2**21 as n grows: ties stay unlikely), where jax.random.permutation splits its
    key and sorts by 32-bit keys."""
    order = jnp.arange(n, dtype=np.int64)
    rounds = max(1, -(-3 * max(n - 1, 1).bit_length() // 64))
    for r in range(rounds):
        bits = jax.random.bits(jax.random.fold_in(key, r) if r else key, (n,), np.uint64)
        order = jax.lax.sort((bits, order), num_keys=1, is_stable=True)[1]
    return order.astype(pjrt.to_jax_dtype(dtype) if dtype else np.int64)


def _like_dtype(x, dtype):
    return pjrt.to_jax_dtype(dtype) if dtype is not None else x.dtype


@lower(aten.rand_like, rng=True)
def rand_like(x, generator=None, dtype=None, *, key, **_):
    dtype = _like_dtype(x, dtype)
    return _uniform(key, x.shape, float_of(dtype)).astype(dtype)


@lower(aten.randn_like, rng=True)
def randn_like(x, generator=None, dtype=None, *, key, **_):
    dtype = _like_dtype(x, dtype)
    return jax.random.normal(key, x.shape, float_of(dtype)).astype(dtype)


@lower(aten.randint_like, rng=True)
def randint_like(x, *bounds, generator=None, dtype=None, key, **_):
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    return _integers(key, x.shape, low, high).astype(_like_dtype(x, dtype))


@lower(aten.randperm.generator, rng=True)
def randperm_generator(n, generator=None, dtype=None, *, key, **_):
    return randperm(n, dtype=dtype, key=key)


@lower(aten.multinomial.default, rng=True)
def multinomial(probs, num_samples, replacement=False, generator=None, *, key):
    logits = jnp.log(probs.astype(np.float64))
    if replacement:
        draws = jax.random.categorical(key, logits, axis=-1, shape=(num_samples,) + logits.shape[:-1])
        return jnp.moveaxis(draws, 0, -1).astype(np.int64)
    # Without replacement: the k largest of log p + Gumbel noise are a weighted sample.
    noisy = logits + jax.random.gumbel(key, logits.shape, np.float64)
    return jax.lax.top_k(noisy, num_samples)[1].astype(np.int64)


@lower(aten.poisson.default, rng=True)
def poisson(rates, generator=None, *, key):
    return jax.random.poisson(key, rates, rates.shape, np.int64).astype(rates.dtype)


@lower(aten.geometric.default, rng=True)
def geometric(x, p, generator=None, *, key):
    return jax.random.geometric(key, p, x.shape, np.int64).astype(x.dtype)
