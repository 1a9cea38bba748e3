import inspect
import math

import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests._lazy.lowering._helpers import seeded_randn
from tests.conftest import assert_same, check, check_lowered, to_xla


def _rand(*shape, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return torch.randn(*shape).to(dtype)


def _spd(*batch, n=4):
    a = _rand(*batch, n, n, seed=3)
    return a @ a.mT + n * torch.eye(n)


X, Y, V, W = _rand(3, 4), _rand(4, 5, seed=1), _rand(4, seed=2), _rand(3, seed=4)
B, C = _rand(2, 3, 4, seed=5), _rand(2, 4, 5, seed=6)
G, R, S = _rand(4, 4, seed=7), _rand(5, 3, seed=8), _spd(2)
A = _rand(2, 4, 4, seed=9)

PRODUCTS = {
    "mm": (lambda x, y: x @ y, X, Y),
    "bmm": (torch.bmm, B, C),
    "matmul_broadcast": (lambda b, y: b @ y, B, Y),
    "mv": (torch.mv, X, V),
    "dot": (lambda v: torch.dot(v, v * 2), V),
    "vdot": (lambda v: torch.vdot(v, v * 2), V),
    "outer": (torch.outer, V, W),
    "addmm": (lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2), _rand(5), X, Y),
    "addmv": (lambda b, x, v: torch.addmv(b, x, v, alpha=3), W, X, V),
    "baddbmm": (lambda b, x, y: torch.baddbmm(b, x, y, beta=2), _rand(2, 3, 5), B, C),
    "addbmm": (lambda b, x, y: torch.addbmm(b, x, y, alpha=-1), _rand(3, 5), B, C),
    "einsum": (lambda b, c: torch.einsum("bij,bjk->bik", b, c), B, C),
    "einsum_trace": (lambda g: torch.einsum("ii->", g), G),
    "tensordot": (lambda b, c: torch.tensordot(b, c, dims=([2], [1])), B, C),
    "cross": (lambda a, b: torch.linalg.cross(a, b), _rand(2, 3), _rand(1, 3, seed=1)),
    "cross_dim": (lambda a, b: torch.cross(a, b, dim=0), _rand(3, 2), _rand(3, 2, seed=1)),
    "trace": (torch.trace, G),
    "tril_triu": (lambda g: (g.tril(), g.triu(1), g.tril(-1), g.triu(-2)), B),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_products(name):
    fn, *args = PRODUCTS[name]
    check_lowered(fn, *args, rtol=1e-5)


@pytest.mark.parametrize("name", ["mm", "bmm", "mv", "dot", "addmm", "baddbmm", "addbmm", "trace",
                                  "cross", "tril_triu", "matmul_broadcast"])
def test_integer_products(name):
    fn, *args = PRODUCTS[name]
    check_lowered(fn, *[(a * 4).long() for a in args])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["mm", "bmm", "addmm", "baddbmm", "mv", "dot"])
def test_low_precision_accumulates_in_float32(name, dtype):
    fn, *args = PRODUCTS[name]
    check_lowered(fn, *[a.to(dtype) for a in args], rtol=1e-2, atol=1e-2)


def test_float16_long_dot_is_accumulated_in_float32():
    """2048 products of 1.5 * 1.5 + the last, where a float16 accumulator would lose the tail."""
    x = torch.full((1, 2049), 1.5, dtype=torch.float16)
    y = torch.full((2049, 1), 1.5, dtype=torch.float16)
    check_lowered(lambda x, y: x @ y, x, y, rtol=0, atol=0)


def test_trace_of_int_is_int64():
    assert check_lowered(torch.trace, (G * 3).int()).dtype == torch.int64


def test_beta_zero_ignores_nan_bias():
    nan_bias = torch.full((3, 5), math.nan)
    check_lowered(lambda b, x, y: torch.addmm(b, x, y, beta=0), nan_bias, X, Y)
    check_lowered(lambda b, x, y: torch.baddbmm(b, x, y, beta=0.0), nan_bias.expand(2, 3, 5), B, C)


def test_linear_bias_adds_one_op():
    """`F.linear`'s addmm leaves beta and alpha at 1: its lowering is the product plus
    the bias, with no scaling or test of beta (ops a first step would trace and compile);
    NaNs of the bias still reach the output, as on the CPU."""
    import jax
    import jax.numpy as jnp
    from torch_xla._lazy.lowering import REGISTRY
    fn = REGISTRY[torch.ops.aten.addmm.default].fn
    text = str(jax.make_jaxpr(fn)(jnp.ones(5), jnp.ones((3, 4)), jnp.ones((4, 5))))
    assert text.count(" add ") == 1 and not any(op in text for op in ("select_n", " mul ", " eq ")), text
    nan_bias = torch.full((5,), math.nan)
    check_lowered(lambda b, x, y: torch.nn.functional.linear(x, y.T, b), nan_bias, X, Y)
    check_lowered(lambda b, x, y: torch.addmm(b, x, y, beta=2, alpha=1), _rand(5), X, Y)


def _signs_fixed_eigh(values, vectors):
    """Eigenvectors are defined up to sign (implementation-defined in PyTorch): first row >= 0."""
    return values, vectors * vectors[..., :1, :].sign()


def _signs_fixed_svd(u, s, vh):
    sign = u[..., :1, :].sign()
    return u * sign, s, vh * sign.mT


DECOMPOSITIONS = {
    "cholesky": (torch.linalg.cholesky, S),
    "cholesky_upper": (lambda s: torch.linalg.cholesky(s, upper=True), S),
    "cholesky_ex": (lambda s: tuple(torch.linalg.cholesky_ex(s)), S),
    "inv": (torch.linalg.inv, S),
    "inv_ex": (lambda s: tuple(torch.linalg.inv_ex(s)), G),
    "solve": (torch.linalg.solve, S, _rand(2, 4, 3)),
    "solve_broadcast": (torch.linalg.solve, S, _rand(4, 3)),
    "solve_vector": (torch.linalg.solve, G, V),
    "solve_right": (lambda a, b: torch.linalg.solve(a, b, left=False), G, _rand(3, 4)),
    "solve_ex": (lambda a, b: tuple(torch.linalg.solve_ex(a, b)), G, V),
    "det": (torch.linalg.det, A),
    "slogdet": (lambda a: tuple(torch.linalg.slogdet(a)), A),
    "lu_factor_ex": (lambda a: tuple(torch.linalg.lu_factor_ex(a)), A),
    "lu_factor_wide": (lambda a: tuple(torch.linalg.lu_factor(a)), R.T.contiguous()),
    "lu": (lambda a: tuple(torch.linalg.lu(a)), R),
    "lu_wide_batched": (lambda a: tuple(torch.linalg.lu(a)), B),
    "lu_unpack": (lambda a: tuple(torch.lu_unpack(*torch.linalg.lu_factor(a))), R),
    "lu_unpack_pivots_only": (lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a), False)[0], A),
    "lu_solve": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), G, _rand(4, 2)),
    "lu_solve_adjoint": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
                         G, _rand(4, 2)),
    "lu_solve_right": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, left=False),
                       G, _rand(2, 4)),
    "qr": (lambda a: tuple(torch.linalg.qr(a)), R),
    "qr_complete": (lambda a: tuple(torch.linalg.qr(a, mode="complete")), R),
    "qr_r": (lambda a: tuple(torch.linalg.qr(a, mode="r")), R),
    "svd": (lambda a: _signs_fixed_svd(*torch.linalg.svd(a, full_matrices=False)), R),
    "svd_batched_wide": (lambda a: _signs_fixed_svd(*torch.linalg.svd(a, full_matrices=False)), B),
    "svdvals": (torch.linalg.svdvals, R),
    "eigh": (lambda a: _signs_fixed_eigh(*torch.linalg.eigh(a)), S),
    "eigvalsh_upper": (lambda a: torch.linalg.eigvalsh(a.triu()), S),
    "solve_triangular": (lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), G, _rand(4, 3)),
    "solve_triangular_right": (lambda a, b: torch.linalg.solve_triangular(
        a, b, upper=True, left=False, unitriangular=True), G, _rand(3, 4)),
    "triangular_solve": (lambda a, b: tuple(torch.triangular_solve(b, a, transpose=True)), G, _rand(4, 3)),
    "pinv": (torch.linalg.pinv, R),
    "pinv_atol": (lambda a: torch.linalg.pinv(a, atol=1.0), R),
    "pinv_hermitian": (lambda a: torch.linalg.pinv(a, hermitian=True), S),
    "matrix_exp": (lambda a: torch.linalg.matrix_exp(a / 4), A),
    "cholesky_solve": (lambda s, b: torch.cholesky_solve(b, torch.linalg.cholesky(s)), S, _rand(4, 2)),
    "cholesky_inverse": (lambda s: torch.cholesky_inverse(torch.linalg.cholesky(s[0]), upper=False), S),
    "matrix_norm_2": (lambda a: torch.linalg.matrix_norm(a, ord=2), R),
    "matrix_norm_fro": (torch.linalg.matrix_norm, R),
    "cond": (torch.linalg.cond, G),
    "matrix_rank": (torch.linalg.matrix_rank, R @ R.T),
}


@pytest.mark.parametrize("name", DECOMPOSITIONS)
def test_decompositions(name):
    """Values against LAPACK on the CPU: the same conventions (pivots, signs of Q and of the
    singular/eigen vectors for these inputs)."""
    fn, *args = DECOMPOSITIONS[name]
    check_lowered(fn, *args, rtol=1e-4, atol=1e-4)


def test_float64_and_batched_broadcast():
    check_lowered(torch.linalg.solve, S.double(), _rand(3, 1, 4, 2).double())
    check_lowered(lambda a: tuple(torch.linalg.slogdet(a)), A.double())


def test_complex():
    z = torch.complex(_rand(3, 3), _rand(3, 3, seed=1))
    check_lowered(lambda a, b: torch.vdot(a[0], b[1]), z, z.conj())
    check_lowered(torch.linalg.solve, z, z[:, :2], rtol=1e-4, atol=1e-4)
    check_lowered(lambda a: tuple(torch.linalg.slogdet(a)), z, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("diag,order", [([1.0, 2.0, -1.0, 3.0], 3), ([0.0, 1.0, 1.0], 1),
                                        ([1.0, 1.0], 0), ([2.0, math.nan, 1.0], 2)])
def test_cholesky_info_is_the_failing_minor(diag, order):
    out = check_lowered(lambda a: torch.linalg.cholesky_ex(a)[1], torch.diag(torch.tensor(diag)))
    assert out.item() == order


def test_singular_inputs():
    # eliminated exactly (multipliers of 1/2 and 1/4), so a zero pivot is 0 in any LAPACK:
    # `info` 3 factoring A, 2 factoring Aᵀ (as torch 2.9 and 2.10 do in inv_ex). A matrix
    # needing multipliers of 1/3 leaves MKL a pivot of ~1e-7, and torch's CPU `info` 0.
    singular = torch.tensor([[4.0, 2.0, 2.0], [2.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    check_lowered(lambda a: torch.linalg.inv_ex(a)[1], singular)
    check_lowered(lambda a: torch.linalg.lu_factor_ex(a)[2], singular)
    check_lowered(lambda a: tuple(torch.linalg.slogdet(a))[:2], torch.zeros(2, 2))
    check_lowered(torch.linalg.det, torch.zeros(2, 2))


@pytest.mark.parametrize("fn,a,message", [
    (torch.linalg.inv, torch.zeros(3, 3), "input matrix is singular"),
    (torch.linalg.cholesky, torch.diag(torch.tensor([1.0, 2.0, -1.0])), "leading minor of order 3"),
    (lambda a: torch.linalg.solve(a, a[0]), torch.ones(2, 3, 3), r"\(Batch element 0\)"),
])
def test_failed_factorizations_raise_pytorchs_error(fn, a, message):
    """PyTorch raises at the op; on XLA the next sync after the step's program ran does."""
    with pytest.raises(torch.linalg.LinAlgError, match=message):
        fn(a)
    with pytest.raises(torch.linalg.LinAlgError, match=message):
        fn(to_xla(a))
        xm.mark_step()  # launches the program
        xm.wait_device_ops()


def _executions():
    data = met.metric_data("ExecuteTime")
    return data[0] if data else 0


def test_linalg_checks_in_a_training_step_add_no_execution():
    """inv's and cholesky's info checks join the step's program: one execution per step."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(4, 4, device=xm.xla_device()))
    opt = torch.optim.SGD([w], lr=0.01)
    eye = 4 * torch.eye(4, device=xm.xla_device())
    xm.mark_step()
    per_step = []
    for _ in range(3):
        before = _executions()
        opt.zero_grad()
        a = w @ w.T + eye
        loss = torch.linalg.inv(a).sum() + torch.linalg.cholesky(a).sum()
        loss.backward()
        xm.optimizer_step(opt, barrier=True)
        per_step.append(_executions() - before)
    assert per_step == [1, 1, 1]
    expected = torch.linalg.inv(w.detach().cpu() @ w.detach().cpu().T + 4 * torch.eye(4))
    assert_same(torch.linalg.inv(w @ w.T + eye), expected, rtol=1e-4, atol=1e-4)


def test_a_singular_matrix_raises_at_the_next_mark_step_naming_the_op_and_line():
    x = torch.ones(3, device=xm.xla_device())
    singular = torch.zeros(3, 3, device=xm.xla_device())
    line = inspect.currentframe().f_lineno + 1
    y = torch.linalg.inv(singular) @ x
    xm.mark_step()  # launches the step's program; the next mark_step reads its check
    with pytest.raises(torch.linalg.LinAlgError) as info:
        xm.mark_step()
    message = str(info.value)
    assert message.startswith("linalg.inv: The diagonal element 1 is zero")
    assert f"{__file__}:{line}" in message and "torch.linalg.inv(singular)" in message
    assert y.shape == (3,) and x.cpu().tolist() == [1.0, 1.0, 1.0]  # the step's values exist
    xm.mark_step()  # the check was made once


GRADS = {
    "mm": (lambda x, y: x @ y, X, Y),
    "bmm": (torch.bmm, B, C),
    "addmm": (lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2), _rand(5), X, Y),
    "addmv": (torch.addmv, W, X, V),
    "baddbmm": (lambda b, x, y: torch.baddbmm(b, x, y, beta=2), _rand(2, 3, 5), B, C),
    "addbmm": (torch.addbmm, _rand(3, 5), B, C),
    "dot": (torch.dot, V, V * 2),
    "cross": (torch.linalg.cross, _rand(2, 3), _rand(2, 3, seed=1)),
    "cholesky": (torch.linalg.cholesky, S),
    "inv": (torch.linalg.inv, S),
    "solve": (torch.linalg.solve, S, _rand(2, 4, 3)),
    "solve_triangular": (lambda a, b: torch.linalg.solve_triangular(a.triu(), b, upper=True), G, _rand(4, 3)),
    "det": (torch.linalg.det, A),
    "slogdet": (lambda a: torch.linalg.slogdet(a)[1], A),
    "qr": (lambda a: sum(t.sum() for t in torch.linalg.qr(a)), R),
    "eigvalsh": (torch.linalg.eigvalsh, S),
    "svdvals": (torch.linalg.svdvals, R),
    "pinv": (torch.linalg.pinv, R),
    "trace": (torch.trace, G),
}


@pytest.mark.parametrize("name", GRADS)
def test_gradients(name):
    """Gradients of every input (backward formulas may use other families' ops)."""
    fn, *args = GRADS[name]
    check(fn, *[a.detach().requires_grad_() for a in args], grads=True, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("left", [True, False])
def test_solve_gradients_with_a_matrix_right_hand_side(left):
    """solve's backward reuses the LU the forward returns: it must be PyTorch's (of A)."""
    torch.manual_seed(0)
    a, b = torch.randn(3, 4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    check(lambda a, b: torch.linalg.solve(a, b, left=left), a, b, grads=True, rtol=1e-4, atol=1e-4)


def _torch_cholesky_removed() -> bool:
    """torch 2.14 replaced the deprecated `torch.cholesky` by a Python function that raises
    on every device (asking it would spend its warn-once deprecation warning)."""
    return getattr(torch.cholesky, "__module__", "torch") == "torch._linalg_utils"


def test_cholesky_deprecated():
    a = seeded_randn(2, 4, 4, grad=False)
    spd = (a @ a.mT + 4 * torch.eye(4)).requires_grad_()
    if _torch_cholesky_removed():
        with pytest.raises(RuntimeError, match="now removed"):
            torch.cholesky(to_xla(spd))
        return
    with pytest.warns(UserWarning, match="deprecated"):
        check_lowered(lambda s: [torch.cholesky(s), torch.cholesky(s, upper=True)], spd, grads=True,
                      rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matrix_exp_of_half_matrices_is_computed_in_float32(dtype):
    """(PyTorch's own CPU kernel gives garbage in these dtypes: compared with float32's.)"""
    a = (seeded_randn(2, 3, 3, grad=False) / 4).to(dtype)
    out = torch.linalg.matrix_exp(to_xla(a))
    assert out.dtype == dtype
    # torch.testing's tolerances for the dtype
    tol = {torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5), torch.float16: dict(rtol=1e-3, atol=1e-5)}[dtype]
    assert_same(out, torch.linalg.matrix_exp(a.float()).to(dtype), **tol)


def test_cholesky_of_empty_matrices():
    if not _torch_cholesky_removed():
        check_lowered(lambda a, b: [torch.cholesky(a), torch.cholesky(b, upper=True)],
                      torch.zeros(0, 0), torch.zeros(0, 3, 3))
    check_lowered(lambda a, b: [torch.linalg.cholesky(a), *torch.linalg.cholesky_ex(b, upper=True),
                                torch.linalg.cholesky(b.double())],
                  torch.zeros(0, 0), torch.zeros(2, 0, 0))


def test_householder_product_and_ormqr():
    reflectors, tau = torch.geqrf(seeded_randn(2, 5, 3, grad=False))
    reflectors.requires_grad_(), tau.requires_grad_()

    def apply(h, t, c, d):
        return [torch.linalg.householder_product(h, t), torch.linalg.householder_product(h, t[..., :2])] + [
            torch.ormqr(h, t, c, left=True, transpose=tr) for tr in (False, True)] + [
            torch.ormqr(h, t, d, left=False, transpose=tr) for tr in (False, True)]
    check_lowered(apply, reflectors, tau, seeded_randn(2, 5, 4, seed=1),
                  seeded_randn(2, 3, 5, seed=2), grads=True, rtol=1e-4, atol=1e-4)


def test_eig():
    """Real input, complex results; LAPACK's normalisation of the eigenvectors."""
    def eig(a):
        values, vectors = torch.linalg.eig(a)
        return values, vectors, torch.linalg.eigvals(a), values.abs() + vectors.abs().sum(-2)
    check_lowered(lambda a: eig(a)[2:], seeded_randn(2, 4, 4), grads=True, rtol=1e-4, atol=1e-4)
    check_lowered(lambda a: eig(a)[:2], seeded_randn(3, 3, grad=False), rtol=1e-4, atol=1e-5)


MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def test_cdist_every_p_and_mode():
    def distances(a, b):
        return [torch.cdist(a, b, p=p, compute_mode=m) for p in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf)
                for m in MODES]
    check_lowered(distances, seeded_randn(2, 4, 3), seeded_randn(5, 3, seed=1), grads=True,
                  rtol=1e-4, atol=1e-4)


def test_cdist_zero_distances_have_zero_gradient():
    a = seeded_randn(3, 2)
    b = torch.cat([a.detach()[:2], torch.ones(1, 2)]).requires_grad_()
    check_lowered(lambda a, b: [torch.cdist(a, b, p=p, compute_mode=MODES[2]) for p in (0.5, 2.0, 3.0)],
                  a, b, grads=True, rtol=1e-4, atol=1e-4)


def test_cdist_large_uses_the_matrix_product():
    check_lowered(lambda a, b: torch.cdist(a, b), seeded_randn(30, 3),
                  seeded_randn(4, 3, seed=1), grads=True, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("p", [0, 0.5, 1, 1.5, 2, 3, math.inf])
def test_pdist_every_p(p):
    """Pair by pair, with PyTorch's gradient rules at zero distances (rows 1 and 3 equal)."""
    x = _rand(6, 4, seed=10, dtype=torch.float64)
    x[3] = x[1]
    check_lowered(lambda x: torch.nn.functional.pdist(x, p), x.requires_grad_(), grads=True)
    check_lowered(lambda x: torch.nn.functional.pdist(x, p), _rand(1, 3, seed=11))
