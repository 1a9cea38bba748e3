"""LDLᵀ factorization with Bunch-Kaufman pivoting, and solves with it, as LAPACK's
sytrf/hetrf and sytrs/hetrs (lower triangle) compute them, in portable ops.

The factorization is LAPACK's unblocked dsytf2/zhetf2 (its blocked dsytrf chooses the same
pivots), one 1×1 or 2×2 pivot per step of a loop: same pivot choices, interchanges and
packed output (L below the diagonal, the blocks of D on it and below it; 1-based pivots,
negative for a 2×2 block), so `LD` and `pivots` agree with PyTorch's. The working matrix is the full symmetric (Hermitian) trailing
Schur complement, interchanged as a whole; finished columns of L are kept apart and never
interchanged, as in LAPACK's storage. Magnitudes are LAPACK's |re| + |im| for complex.
Batches run through `jax.vmap`.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import aten, lower

_ALPHA = (1 + np.sqrt(17.0)) / 8  # Bunch-Kaufman's threshold


def _is_complex(a):
    return jnp.issubdtype(a.dtype, jnp.complexfloating)


def _mag(v):
    return jnp.abs(jnp.real(v)) + jnp.abs(jnp.imag(v)) if jnp.iscomplexobj(v) else jnp.abs(v)


def _factor(a, hermitian):
    n = a.shape[-1]
    herm = hermitian and _is_complex(a)
    conj = jnp.conj if herm else (lambda v: v)
    idx = jnp.arange(n)
    s = jnp.tril(a) + conj(jnp.tril(a, -1)).T
    if herm:
        s = jnp.where(jnp.eye(n, dtype=bool), jnp.real(s).astype(a.dtype), s)
    dmag = (lambda v: jnp.abs(jnp.real(v))) if herm else _mag

    def body(state):
        k, s, ld, piv, info = state
        col = lax.dynamic_index_in_dim(s, k, 1, keepdims=False)
        absakk = dmag(col[k])
        colmags = jnp.where(idx > k, _mag(col), -1)
        imax = jnp.argmax(colmags)
        colmax = jnp.maximum(colmags[imax], 0)
        zero = (jnp.maximum(absakk, colmax) == 0) | jnp.isnan(absakk)
        row = lax.dynamic_index_in_dim(s, imax, 0, keepdims=False)
        rowmax = jnp.max(jnp.where((idx >= k) & (idx != imax), _mag(row), 0))
        no_swap = zero | (absakk >= _ALPHA * colmax) | (absakk >= _ALPHA * colmax * (colmax / rowmax))
        step = jnp.where(no_swap | (dmag(row[imax]) >= _ALPHA * rowmax), np.int32(1), np.int32(2))
        kp = jnp.where(no_swap, k, imax.astype(np.int32))
        kk = k + step - 1
        perm = jnp.where(idx == kk, kp, jnp.where(idx == kp, kk, idx))
        s = s[perm][:, perm]

        # a 1×1 pivot: L's column k = x / d, S -= x xᴴ / d below and right of k
        x = jnp.where(idx > k, s[:, k], 0)
        d = s[k, k]
        l1 = jnp.where(zero, x, x / jnp.where(zero, 1, d))
        one = s - jnp.outer(l1, conj(x))
        one_col = jnp.where(idx == k, d, l1)
        # a 2×2 pivot on k, k + 1: [L_k L_k+1] = X D⁻¹, S -= X D⁻¹ Xᴴ below and right of k + 1
        k1 = jnp.minimum(k + 1, n - 1)
        x1, x2 = (jnp.where(idx > k1, s[:, c], 0) for c in (k, k1))
        d11, d21, d22 = s[k, k], s[k1, k], s[k1, k1]
        d12 = conj(d21)
        det = d11 * d22 - d21 * d12
        det = jnp.where(det == 0, 1, det)
        m1, m2 = (x1 * d22 - x2 * d21) / det, (x2 * d11 - x1 * d12) / det
        two = s - jnp.outer(m1, conj(x1)) - jnp.outer(m2, conj(x2))
        two_col_k = jnp.where(idx == k, d11, jnp.where(idx == k1, d21, m1))
        two_col_k1 = jnp.where(idx == k1, d22, m2)

        single = step == 1
        s = jnp.where(single, one, two)
        cols = idx[None, :]
        ld = jnp.where(single, jnp.where(cols == k, one_col[:, None], ld),
                       jnp.where(cols == k, two_col_k[:, None],
                                 jnp.where(cols == k1, two_col_k1[:, None], ld)))
        ld = jnp.where(idx[:, None] >= cols, ld, 0)
        pivot = jnp.where(single, kp + 1, -(kp + 1)).astype(np.int32)
        piv = jnp.where((idx == k) | (~single & (idx == k1)), pivot, piv)
        info = jnp.where(zero & (info == 0), k + 1, info).astype(np.int32)
        return k + step, s, ld, piv, info

    state = (np.int32(0), s, jnp.zeros_like(a), jnp.zeros((n,), np.int32), jnp.asarray(0, np.int32))
    _, _, ld, piv, info = lax.while_loop(lambda st: st[0] < n, body, state)
    return ld, piv, info


def _batched(fn, *arrays):
    """fn over the flattened batch of `arrays` (each with its own number of core dims)."""
    batch = arrays[0][0].shape[:arrays[0][0].ndim - arrays[0][1]]
    flat = [x.reshape((-1,) + x.shape[x.ndim - core:]) for x, core in arrays]
    outs = jax.vmap(fn)(*flat)
    return tuple(o.reshape(batch + o.shape[1:]) for o in outs)


@lower(aten.linalg_ldl_factor_ex.default)
def ldl_factor_ex(a, hermitian=False, check_errors=False):
    if a.shape[-1] == 0 or a.size == 0:
        return a, jnp.zeros(a.shape[:-1], np.int32), jnp.zeros(a.shape[:-2], np.int32)
    return _batched(lambda m: _factor(m, hermitian), (a, 2))


def _solve(ld, piv, b, hermitian):
    """sytrs/hetrs, lower: X with (P L D Lᵀ Pᵀ) X = B, the interchanges and blocks read off
    `piv` one step at a time."""
    n = ld.shape[-1]
    herm = hermitian and _is_complex(ld)
    conj = jnp.conj if herm else (lambda v: v)
    idx = jnp.arange(n)

    def swap(b, i, j):
        perm = jnp.where(idx == i, j, jnp.where(idx == j, i, idx))
        return b[perm]

    def forward(state):  # L D Y = Pᵀ B, k rising
        k, b = state
        single = piv[k] > 0
        k1 = jnp.minimum(k + 1, n - 1)
        kp = jnp.where(single, piv[k], -piv[k]) - 1
        b = swap(b, jnp.where(single, k, k1), kp)
        below = jnp.where(single, idx > k, idx > k1)[:, None]
        b = b - jnp.where(below, jnp.outer(ld[:, k], b[k]), 0)
        b = b - jnp.where(below & ~single, jnp.outer(ld[:, k1], b[k1]), 0)
        d = jnp.real(ld[k, k]).astype(ld.dtype) if herm else ld[k, k]
        one = b.at[k].set(b[k] / d)
        akm1k = ld[k1, k]
        akm1, ak = ld[k, k] / conj(akm1k), ld[k1, k1] / akm1k
        denom = akm1 * ak - 1
        bkm1, bk = b[k] / conj(akm1k), b[k1] / akm1k
        two = b.at[k].set((ak * bkm1 - bk) / denom).at[k1].set((akm1 * bk - bkm1) / denom)
        return k + jnp.where(single, np.int32(1), np.int32(2)), jnp.where(single, one, two)

    def backward(state):  # Lᴴ (P X) = Y, k falling
        k, b = state
        single = piv[k] > 0
        km1 = jnp.maximum(k - 1, 0)
        below = (idx > k)[:, None]
        b = b.at[k].add(-jnp.sum(jnp.where(below, conj(ld[:, k])[:, None] * b, 0), 0))
        b = jnp.where(single, b, b.at[km1].add(-jnp.sum(jnp.where(below, conj(ld[:, km1])[:, None] * b, 0), 0)))
        kp = jnp.where(single, piv[k], -piv[k]) - 1
        return k - jnp.where(single, np.int32(1), np.int32(2)), swap(b, k, kp)

    _, b = lax.while_loop(lambda st: st[0] < n, forward, (np.int32(0), b))
    _, b = lax.while_loop(lambda st: st[0] >= 0, backward, (np.int32(n - 1), b))
    return (b,)


@lower(aten.linalg_ldl_solve.default)
def ldl_solve(ld, pivots, b, hermitian=False):
    batch = jnp.broadcast_shapes(ld.shape[:-2], pivots.shape[:-1], b.shape[:-2])
    ld = jnp.broadcast_to(ld, batch + ld.shape[-2:])
    pivots = jnp.broadcast_to(pivots, batch + pivots.shape[-1:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:]).astype(ld.dtype)
    if ld.shape[-1] == 0 or b.size == 0:
        return b
    return _batched(lambda m, p, r: _solve(m, p, r, hermitian), (ld, 2), (pivots, 1), (b, 2))[0]
