"""Householder reflectors in portable ops: QR factors as LAPACK's geqrf packs them, and Q
(the product of the reflectors) applied to a matrix, as ormqr.

jax lowers its own geqrf and ormqr to LAPACK/cuSOLVER custom calls, which a StableHLO
module cannot hold (they have no compatibility guarantee) and TPUs lack. Here both are
loops and matrix products that XLA compiles on every platform: geqrf reflects one column
at a time (LAPACK's dgeqr2, same sign conventions, so the factors agree with PyTorch's);
ormqr applies all reflectors at once in LAPACK's compact WY form (dlarft/dlarfb):
H_1 H_2 ... H_k = I - V T Vᴴ, with V the unit lower trapezoidal reflectors and T upper
triangular.
"""
import jax.numpy as jnp
import torch
from jax import lax

from . import aten, lower
from .meta_stand_ins import meta_stand_in


def _mH(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _mm(x, y):
    return jnp.matmul(x, y, precision=lax.Precision.HIGHEST)


def _reflectors(a, k):
    """V: the first k columns of `a` below the diagonal, with a unit diagonal."""
    rows = a.shape[-2]
    v = jnp.tril(a[..., :, :k], -1)
    return v + jnp.eye(rows, k, dtype=a.dtype)


def _wy_factor(v, tau):
    """T (upper triangular, k × k) with H_1 ... H_k = I - V T Vᴴ (dlarft, forward,
    columnwise): T[i, i] = tau_i, T[:i, i] = -tau_i T[:i, :i] (Vᴴ V)[:i, i]."""
    k = tau.shape[-1]
    s = _mm(_mH(v), v)
    positions = jnp.arange(k)

    def column(i, t):
        onehot = (positions == i).astype(v.dtype)
        s_i = jnp.where(positions < i, lax.dynamic_index_in_dim(s, i, -1, keepdims=False), 0)
        tau_i = lax.dynamic_index_in_dim(tau, i, -1)
        col = -tau_i * _mm(t, s_i[..., None])[..., 0] + tau_i * onehot
        return t + col[..., :, None] * onehot

    t0 = jnp.zeros(tau.shape[:-1] + (k, k), v.dtype)
    return lax.fori_loop(0, k, column, t0)


@lower(aten.ormqr.default)
def ormqr(a, tau, other, left=True, transpose=False):
    """Q (from reflectors `a`, `tau`) applied to `other`: Q C, Qᴴ C, C Q or C Qᴴ
    (`transpose` is the conjugate transpose, as PyTorch's)."""
    k = tau.shape[-1]
    if k == 0:
        return other
    v = _reflectors(a, k)
    t = _wy_factor(v, tau)
    if transpose:
        t = _mH(t)
    if left:   # Q C = C - V (T (Vᴴ C))
        return other - _mm(v, _mm(t, _mm(_mH(v), other)))
    # C Q = C - ((C V) T) Vᴴ
    return other - _mm(_mm(_mm(other, v), t), _mH(v))


def _larfg(alpha, xnorm):
    """LAPACK's dlarfg/zlarfg: (beta, tau, scale) of the reflector that maps [alpha, x]
    to [beta, 0] (v = x * scale); tau = 0 (no reflection) where x is 0 and alpha real."""
    real = jnp.real(alpha)
    norm = jnp.sqrt(jnp.abs(alpha) ** 2 + xnorm ** 2)
    beta = -jnp.where(real >= 0, norm, -norm)
    identity = (xnorm == 0) & (jnp.imag(alpha) == 0)
    safe_beta = jnp.where(identity, 1, beta)
    tau = jnp.where(identity, 0, (beta - alpha) / safe_beta)
    scale = jnp.where(identity, 0, 1 / jnp.where(identity, 1, alpha - beta))
    return jnp.where(identity, alpha, beta).astype(alpha.dtype), tau.astype(alpha.dtype), \
        scale.astype(alpha.dtype)


@lower(aten.geqrf.default)
def geqrf(a):
    """(packed QR, tau): R on and above the diagonal, the reflectors below it (dgeqr2)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    rows, cols = jnp.arange(m), jnp.arange(n)

    def step(j, state):
        a, tau = state
        x = lax.dynamic_index_in_dim(a, j, -1, keepdims=False)  # column j
        alpha = lax.dynamic_index_in_dim(x, j, -1, keepdims=False)
        below = jnp.where(rows > j, x, 0)
        xnorm = jnp.sqrt(jnp.sum(jnp.abs(below) ** 2, -1))
        beta, tau_j, scale = _larfg(alpha, xnorm)
        v = below * scale[..., None] + (rows == j).astype(a.dtype)
        # H_jᴴ = I - conj(tau_j) v vᴴ applied to the columns right of j
        w = jnp.sum(jnp.conj(v)[..., :, None] * a, -2) * (cols > j)
        a = a - jnp.conj(tau_j)[..., None, None] * v[..., :, None] * w[..., None, :]
        packed = jnp.where(rows[:, None] == j, beta[..., None, None],
                           jnp.where(rows[:, None] > j, v[..., :, None], a))
        a = jnp.where(cols == j, packed, a)
        tau = jnp.where(jnp.arange(k) == j, tau_j[..., None], tau)
        return a, tau

    tau0 = jnp.zeros(a.shape[:-2] + (k,), a.dtype)
    if k == 0:
        return a, tau0
    return lax.fori_loop(0, k, step, (a, tau0))


@meta_stand_in(aten.geqrf.default)
def _geqrf_meta(a):
    """geqrf's outputs (PyTorch has no meta kernel); its errors from the CPU kernel on a
    matrix of the same rank and dtype with sizes at most 1."""
    aten.geqrf.default(torch.zeros([min(s, 1) for s in a.shape], dtype=a.dtype))
    m, n = a.shape[-2:]
    return torch.empty_like(a), torch.empty(a.shape[:-2] + (min(m, n),), dtype=a.dtype, device="meta")
