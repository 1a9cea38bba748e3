"""Matrix products, pairwise distances and linear algebra.

Products: float16/bfloat16 accumulate in float32 and return their own dtype (as PyTorch);
float32 uses the precision of `precision.setting()` (torch_xla's mat mul precision once set,
else `torch.get_float32_matmul_precision()`: "highest", PyTorch's default, is exact float32 —
XLA on GPU/TPU would otherwise use TF32/bfloat16 passes). It is read when a program is traced.

Factorizations follow LAPACK's conventions, which PyTorch exposes: LU results are packed
with 1-based int32 pivots, and (like PyTorch) det/slogdet/solve factor Aᵀ for real inputs,
so their LU outputs and the backward passes that reuse them agree with PyTorch's. `info`
outputs are LAPACK's (0, or the 1-based order of the failing minor/pivot). (linalg_lstsq
has no meta kernel in PyTorch, so no lowering: the engine takes output shapes from meta
kernels. geqrf and ormqr are in `householder`.)
"""
import math

import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax

from ..base import torch_compat
from . import aten, lower
from ._types import cast, opmath
from .precision import matmul_precision


def _einsum(spec, x, y):
    """A product in the accumulation dtype (the engine casts back to the input dtype)."""
    return jnp.einsum(spec, x, y, precision=matmul_precision(), preferred_element_type=opmath(x.dtype))


@lower(aten.mm.default, aten.bmm.default, aten.matmul.default)
def matmul(x, y):
    if x.ndim == y.ndim == 2 and x.dtype == y.dtype and jnp.issubdtype(x.dtype, jnp.inexact):
        # mm: lax's product directly (jnp's is jitted: a nested trace in a program's)
        return lax.dot_general(x, y, (((1,), (0,)), ((), ())), precision=matmul_precision(),
                               preferred_element_type=opmath(x.dtype))
    return jnp.matmul(x, y, precision=matmul_precision(), preferred_element_type=opmath(x.dtype))


@lower(aten.mv.default)
def mv(x, v):
    return _einsum("ij,j->i", x, v)


@lower(aten.dot.default)
def dot(x, y):
    return _einsum("i,i->", x, y)


@lower(aten.vdot.default)
def vdot(x, y):
    return _einsum("i,i->", jnp.conj(x), y)


def _is_one(factor):
    """Whether `factor` is the Python number 1 (a default: not a program parameter)."""
    return isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor == 1


def _add_product(spec):
    """beta * self + alpha * product; beta == 0 ignores self (its NaNs too), as PyTorch.
    A factor left at its default 1 adds no ops (`F.linear`'s addmm)."""
    def lowering(bias, x, y, beta=1, alpha=1):
        out = _einsum(spec, x, y)
        if _is_one(beta):
            scaled = bias.astype(out.dtype)
        else:
            beta = cast(beta, out.dtype)
            scaled = jnp.where(beta == 0, jnp.zeros((), out.dtype), beta * bias.astype(out.dtype))
        return scaled + (out if _is_one(alpha) else cast(alpha, out.dtype) * out)
    return lowering


lower(aten.addmm.default)(_add_product("ij,jk->ik"))
lower(aten.addmv.default)(_add_product("ij,j->i"))
lower(aten.baddbmm.default)(_add_product("bij,bjk->bik"))
lower(aten.addbmm.default)(_add_product("bij,bjk->ik"))


@lower(aten.linalg_cross.default)
def cross(x, y, dim=-1):
    x, y = jnp.broadcast_arrays(x, y)
    return jnp.cross(x, y, axis=dim)


@lower(aten.trace.default)
def trace(x):
    dtype = jnp.int64 if not jnp.issubdtype(x.dtype, jnp.inexact) else x.dtype
    return jnp.trace(x, dtype=dtype)


# ---- helpers ------------------------------------------------------------------------------

def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _mH(x):
    return jnp.conj(_mT(x))


def _broadcast_batch(a, b):
    """a and b (both matrices) with their batch dims broadcast together."""
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])


def _tri_solve(a, b, lower_, left=True, transpose=False, unit=False):
    """op(a) x = b (left) or x op(a) = b, where op is the adjoint when `transpose`."""
    a, b = _broadcast_batch(a, b)
    return lax.linalg.triangular_solve(a, b, left_side=left, lower=lower_, transpose_a=transpose,
                                       conjugate_a=transpose, unit_diagonal=unit)


def _zero_pivot_info(lu):
    """LAPACK getrf's info: 1 + the index of U's first zero diagonal entry, else 0."""
    zero = jnp.diagonal(lu, axis1=-2, axis2=-1) == 0
    if zero.shape[-1] == 0:  # 0x0 matrices: nothing can be singular
        return jnp.zeros(zero.shape[:-1], jnp.int32)
    return jnp.where(jnp.any(zero, -1), jnp.argmax(zero, -1) + 1, 0).astype(jnp.int32)


def _lu(a):
    """(packed LU, 1-based int32 pivots, permutation) with a[..., perm, :] = L U."""
    lu, piv, perm = lax.linalg.lu(a)
    return lu, (piv + 1).astype(jnp.int32), perm


def _perm(pivots, n):
    return lax.linalg.lu_pivots_to_permutation(pivots.astype(jnp.int32) - 1, n)


def _lu_solve_left(lu, perm, b, adjoint):
    """A x = b (or Aᴴ x = b) for A[perm] = L U."""
    lu, b = _broadcast_batch(lu, b)
    perm = jnp.broadcast_to(perm, b.shape[:-2] + perm.shape[-1:])
    if not adjoint:
        b = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        y = _tri_solve(lu, b, lower_=True, unit=True)
        return _tri_solve(lu, y, lower_=False)
    z = _tri_solve(lu, b, lower_=False, transpose=True)
    z = _tri_solve(lu, z, lower_=True, transpose=True, unit=True)
    inverse = jnp.argsort(perm, axis=-1)
    return jnp.take_along_axis(z, inverse[..., :, None], axis=-2)


def _lu_solve(lu, perm, b, left, adjoint):
    if left:
        return _lu_solve_left(lu, perm, b, adjoint)
    return _mH(_lu_solve_left(lu, perm, _mH(b), not adjoint))


def _factor_transposed(a):
    """PyTorch factors Aᵀ rather than A for real (contiguous) inputs in det/slogdet."""
    return not jnp.iscomplexobj(a)


# ---- factorizations and solvers -----------------------------------------------------------

@lower(aten.linalg_lu_factor_ex.default)
def lu_factor_ex(a, pivot=True, check_errors=False):
    if not pivot:
        raise NotImplementedError("linalg.lu_factor: LU without pivoting is not implemented on XLA")
    lu, pivots, _ = _lu(a)
    return lu, pivots, _zero_pivot_info(lu)


def _unpack(packed, perm):
    """(P, L, U) with A = P L U from a packed LU and the row permutation of A[perm] = L U."""
    m, n = packed.shape[-2:]
    k = min(m, n)
    p = _mT(jnp.eye(m, dtype=packed.dtype)[perm])
    lower_ = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=packed.dtype)
    return p, lower_, jnp.triu(packed[..., :k, :])


@lower(aten.linalg_lu.default)
def lu(a, pivot=True):
    if not pivot:
        raise NotImplementedError("linalg.lu: LU without pivoting is not implemented on XLA")
    packed, _, perm = _lu(a)
    return _unpack(packed, perm)


@lower(aten.lu_unpack.default)
def lu_unpack(packed, pivots, unpack_data=True, unpack_pivots=True):
    p, lower_, upper = _unpack(packed, _perm(pivots, packed.shape[-2]))
    empty = jnp.zeros((0,), packed.dtype)
    return (p if unpack_pivots else empty,
            lower_ if unpack_data else empty, upper if unpack_data else empty)


@lower(aten.linalg_lu_solve.default)
def lu_solve(lu_, pivots, b, left=True, adjoint=False):
    return _lu_solve(lu_, _perm(pivots, lu_.shape[-1]), b, left, adjoint)


def _solve_factor(a):
    """(the LU PyTorch's solvers return, whether it is of Aᵀ): of A itself, or of Aᵀ for a
    real A where this torch factors that (its backward then solves with the adjoint)."""
    transposed = torch_compat.solve_factors_transpose() and not jnp.iscomplexobj(a)
    return _lu(_mT(a) if transposed else a), transposed


@lower(aten._linalg_solve_ex.default)
def solve_ex(a, b, left=True, check_errors=False):
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vector:
        b = b[..., None]
    (lu_, pivots, perm), transposed = _solve_factor(a)
    x = _lu_solve(lu_, perm, b, left, adjoint=transposed)
    return (x[..., 0] if vector else x), lu_, pivots, _zero_pivot_info(lu_)


@lower(aten.linalg_inv_ex.default)
def inv_ex(a, check_errors=False):
    (lu_, _, perm), transposed = _solve_factor(a)
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return _lu_solve_left(lu_, perm, eye, adjoint=transposed), _zero_pivot_info(lu_)


def _det_parts(a):
    lu_, pivots, _ = _lu(_mT(a) if _factor_transposed(a) else a)
    swaps = jnp.sum(pivots != jnp.arange(1, a.shape[-1] + 1, dtype=jnp.int32), -1)
    sign = jnp.where(swaps % 2 == 1, -1, 1).astype(a.dtype)
    return lu_, pivots, jnp.diagonal(lu_, axis1=-2, axis2=-1), sign


@lower(aten._linalg_det.default)
def det(a):
    lu_, pivots, diag, sign = _det_parts(a)
    return sign * jnp.prod(diag, -1), lu_, pivots


@lower(aten._linalg_slogdet.default)
def slogdet(a):
    lu_, pivots, diag, sign = _det_parts(a)
    absdiag = jnp.abs(diag)
    phase = sign * jnp.prod(diag / jnp.where(absdiag == 0, 1, absdiag).astype(diag.dtype), -1)
    phase = jnp.where(jnp.any(absdiag == 0, -1), jnp.zeros((), phase.dtype), phase)
    return phase, jnp.sum(jnp.log(absdiag), -1), lu_, pivots


@lower(aten.linalg_cholesky_ex.default)
def cholesky_ex(a, upper=False, check_errors=False):
    """Reads only the lower (upper) triangle, like LAPACK's potrf. Empty matrices factor into
    empty matrices (jax's Cholesky cannot take them)."""
    if a.size == 0:
        return jnp.zeros_like(a), jnp.zeros(a.shape[:-2], jnp.int32)
    source = _mH(a) if upper else a
    factor = lax.linalg.cholesky(source, symmetrize_input=False)
    ok = jnp.all(jnp.isfinite(factor), axis=(-2, -1))
    info = lax.cond(jnp.all(ok), lambda s: jnp.zeros(s.shape[:-2], jnp.int32),
                    _first_bad_minor, source)
    return (_mH(factor) if upper else factor), info


def _first_bad_minor(a):
    """1 + the first k whose leading (k+1)x(k+1) minor is not positive-definite (0 if none):
    an unblocked Cholesky that stops at the first non-positive pivot. Runs only on failure."""
    n = a.shape[-1]
    rows = jnp.arange(n)

    def step(k, state):
        factor, info = state
        row = factor[..., k, :]
        pivot = jnp.real(a[..., k, k]) - jnp.sum(jnp.abs(row) ** 2, -1)
        bad = ~(pivot > 0)
        info = jnp.where((info == 0) & bad, k + 1, info)
        d = jnp.sqrt(jnp.where(bad, 1, pivot)).astype(a.dtype)
        col = (a[..., :, k] - jnp.einsum("...ij,...j->...i", factor, jnp.conj(row))) / d[..., None]
        col = jnp.where(rows > k, col, jnp.where(rows == k, d[..., None], 0))
        return factor.at[..., :, k].set(col), info

    init = (jnp.zeros_like(a), jnp.zeros(a.shape[:-2], jnp.int32))
    return lax.fori_loop(0, n, step, init)[1]


@lower(*torch_compat.aten_overloads("cholesky.default"))
def cholesky(a, upper=False):
    """The deprecated torch.cholesky. A matrix that is not positive-definite gives nans
    (PyTorch raises; a lowering cannot)."""
    return cholesky_ex(a, upper)[0]


@lower(aten.cholesky_solve.default)
def cholesky_solve(b, factor, upper=False):
    low = _mH(factor) if upper else factor
    y = _tri_solve(low, b, lower_=True)
    return _tri_solve(low, y, lower_=True, transpose=True)


@lower(aten.cholesky_inverse.default)
def cholesky_inverse(factor, upper=False):
    eye = jnp.broadcast_to(jnp.eye(factor.shape[-1], dtype=factor.dtype), factor.shape)
    return cholesky_solve(eye, factor, upper)


@lower(aten.linalg_solve_triangular.default)
def solve_triangular(a, b, upper, left=True, unitriangular=False):
    return _tri_solve(a, b, lower_=not upper, left=left, unit=unitriangular)


@lower(aten.triangular_solve.default)
def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    """The legacy solver: `transpose` is a plain transpose; also returns A (broadcast)."""
    a, b = _broadcast_batch(a, b)
    x = lax.linalg.triangular_solve(a, b, left_side=True, lower=not upper, transpose_a=transpose,
                                    unit_diagonal=unitriangular)
    return x, a


@lower(aten.linalg_qr.default)
def qr(a, mode="reduced"):
    q, r = lax.linalg.qr(a, full_matrices=mode == "complete")
    if mode == "r":
        return jnp.zeros((0,), a.dtype), r
    return q, r


@lower(aten.linalg_householder_product.default)
def householder_product(a, tau):
    return lax.linalg.householder_product(a, tau)


@lower(aten._linalg_svd.default)
def svd(a, full_matrices=False, compute_uv=True, driver=None):
    if not compute_uv:
        s = lax.linalg.svd(a, full_matrices=False, compute_uv=False)
        return jnp.zeros((0,), a.dtype), s, jnp.zeros((0,), a.dtype)
    u, s, vh = lax.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


@lower(aten._linalg_eigh.default)
def eigh(a, UPLO="L", compute_v=True):
    vectors, values = lax.linalg.eigh(a, lower=UPLO == "L", symmetrize_input=False)
    return values, (vectors if compute_v else jnp.zeros((0,), a.dtype))


@lower(aten.linalg_eig.default)
def eig(a):
    """LAPACK's geev (on the host for GPU programs; XLA has no TPU kernel): eigenvectors of
    unit norm with their largest component real, as PyTorch's."""
    dtype = jnp.result_type(a.dtype, jnp.complex64)
    values, vectors = lax.linalg.eig(a, compute_left_eigenvectors=False)
    return values.astype(dtype), vectors.astype(dtype)


@lower(aten.linalg_pinv.atol_rtol_tensor)
def pinv(a, atol=None, rtol=None, hermitian=False):
    """Singular values at most max(atol, rtol * largest) count as zero; rtol defaults to
    eps * max(m, n) when atol is absent (PyTorch's rule)."""
    m, n = a.shape[-2:]
    real = jnp.finfo(a.dtype).dtype
    if rtol is None:
        default = jnp.finfo(real).eps * max(m, n)
        rtol = default if atol is None else jnp.where(atol > 0, 0.0, default)
    atol = 0.0 if atol is None else atol
    if hermitian:
        w, v = lax.linalg.eigh(a, symmetrize_input=False)[::-1]
        s = jnp.abs(w)
        u, vh = v * jnp.sign(w)[..., None, :].astype(a.dtype), _mH(v)
    else:
        u, s, vh = lax.linalg.svd(a, full_matrices=False)
    largest = jnp.max(s, -1, initial=0.0)
    cutoff = jnp.maximum(jnp.asarray(atol, real), jnp.asarray(rtol, real) * largest)
    inverse = jnp.where(s > cutoff[..., None], 1 / jnp.where(s == 0, 1, s), 0).astype(a.dtype)
    return jnp.matmul(_mH(vh) * inverse[..., None, :], _mH(u), precision=lax.Precision.HIGHEST)


@lower(aten.linalg_matrix_exp.default)
def matrix_exp(a):
    """float16/bfloat16 computed in float32 (jax's expm takes neither)."""
    a = a.astype(opmath(a.dtype))
    if a.ndim == 2:
        return jsl.expm(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    return lax.map(jsl.expm, flat).reshape(a.shape)


# ---- pairwise distances -------------------------------------------------------------------

def _euclidean_mm(x1, x2):
    """PyTorch's matrix-product form of p=2 distances (|a|² - 2ab + |b|², clamped)."""
    n1 = jnp.sum(x1 * x1, -1, keepdims=True)
    n2 = jnp.sum(x2 * x2, -1, keepdims=True)
    a = jnp.concatenate([-2 * x1, n1, jnp.ones_like(n1)], -1)
    b = jnp.concatenate([x2, jnp.ones_like(n2), n2], -1)
    d2 = jnp.matmul(a, jnp.swapaxes(b, -1, -2), precision=lax.Precision.HIGHEST)
    return jnp.sqrt(jnp.maximum(d2, 1e-30))


def _p_norm(diff, p):
    """The p-norm over the last axis of |differences| (p = 0 counts the nonzero ones)."""
    diff = jnp.abs(diff)
    if p == 0:
        return jnp.sum(diff != 0, -1).astype(diff.dtype)
    if p == math.inf:
        return jnp.max(diff, -1, initial=0).astype(diff.dtype)
    if p == 1:
        return jnp.sum(diff, -1)
    if p == 2:
        return jnp.sqrt(jnp.sum(diff * diff, -1))
    return jnp.sum(diff ** p, -1) ** (1 / p)


def _p_norm_grad(diff, g, d, p):
    """d(p-norm)/d(diff) times the incoming gradient `g`, with PyTorch's per-p formulas:
    pairs at distance 0 (and zero differences for p < 1) contribute 0."""
    zero = jnp.zeros((), diff.dtype)
    if p == 0:
        return jnp.zeros_like(diff)
    if p == 1:
        return g * jnp.sign(diff)
    if p == 2:
        return jnp.where(d == 0, zero, g * diff / jnp.where(d == 0, 1, d))
    if p == math.inf:
        return g * jnp.sign(diff) * (jnp.abs(diff) == d)
    a = jnp.abs(diff)
    safe_d = jnp.where(d == 0, 1, d)
    if p < 2:
        skip = (d == 0) | ((diff == 0) & (p < 1))
        val = jnp.sign(diff) * jnp.where(skip, 1, a) ** (p - 1) * g / safe_d ** (p - 1)
    else:
        skip = d == 0
        val = diff * a ** (p - 2) * g / safe_d ** (p - 1)
    return jnp.where(skip, zero, val)


@lower(aten._cdist_forward.default, static_scalars=True)
def cdist_forward(x1, x2, p, compute_mode=None):
    """compute_mode: None/0 uses the matrix product for p=2 when either side has more
    than 25 rows, 1 always, 2 never (PyTorch's rule)."""
    x1, x2 = _broadcast_batch(x1, x2)
    mode = compute_mode or 0
    if p == 2 and (mode == 1 or (mode == 0 and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        return _euclidean_mm(x1, x2)
    return _p_norm(x1[..., :, None, :] - x2[..., None, :, :], p)


@lower(aten._cdist_backward.default, static_scalars=True)
def cdist_backward(grad, x1, x2, p, dist):
    x1e, x2e = _broadcast_batch(x1, x2)
    diff = x1e[..., :, None, :] - x2e[..., None, :, :]
    out = _p_norm_grad(diff, grad[..., None], dist[..., None], p)
    return jnp.sum(out, -2).reshape(x1e.shape).astype(x1.dtype)


def _pairs(n):
    """Row indices (i, j) of the pairs i < j, in pdist's order."""
    return np.triu_indices(n, 1)


@lower(aten._pdist_forward.default, static_scalars=True)
def pdist_forward(x, p=2.0):
    """The p-norm distance of every pair of rows i < j, computed pair by pair (as
    PyTorch's kernel, not through a matrix product)."""
    i, j = _pairs(x.shape[0])
    return _p_norm(x[i] - x[j], p)


@lower(aten._pdist_backward.default, static_scalars=True)
def pdist_backward(grad, x, p, dist):
    i, j = _pairs(x.shape[0])
    out = _p_norm_grad(x[i] - x[j], grad[:, None], dist[:, None], p)
    return jnp.zeros_like(x).at[i].add(out).at[j].add(-out)
