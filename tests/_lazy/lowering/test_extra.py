"""Less common ops (lowering/extra.py), forward and backward against the CPU. Each check
bundles several variants into one program to keep compilations few."""
import math

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import check_lowered


def _rand(*shape, seed=0, grad=True):
    torch.manual_seed(seed)
    return torch.randn(*shape).requires_grad_(grad)


def _with_grads(fn):
    """fn's outputs followed by the gradients of its floating outputs (weighted by a fixed
    cotangent) with respect to its inputs that require grad."""
    def run(*args):
        out = fn(*args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        diff = [o for o in outs if o.requires_grad]
        ins = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        cts = [torch.arange(o.numel(), device=o.device).reshape(o.shape).cos().to(o.dtype) for o in diff]
        return tuple(outs) + torch.autograd.grad(diff, ins, cts)
    return run


# ---- grid sampling ----------------------------------------------------------------------------

PADDINGS = [(p, ac) for p in ("zeros", "border", "reflection") for ac in (False, True)]


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_2d(mode):
    x = _rand(2, 3, 5, 6)
    grid = (torch.rand(2, 4, 3, 2) * 2.4 - 1.2).requires_grad_()  # some points outside

    def sample(x, grid):
        return [F.grid_sample(x, grid, mode=mode, padding_mode=p, align_corners=ac) for p, ac in PADDINGS]
    check_lowered(_with_grads(sample), x, grid, rtol=1e-4, atol=1e-4)


def test_grid_sample_3d():
    x = _rand(1, 2, 3, 4, 5)
    grid = (torch.rand(1, 2, 3, 2, 3) * 2.4 - 1.2).requires_grad_()

    def sample(x, grid):
        return [F.grid_sample(x, grid, mode="bilinear", padding_mode=p, align_corners=ac) for p, ac in PADDINGS] + [
            F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=False)]
    check_lowered(_with_grads(sample), x, grid, rtol=1e-4, atol=1e-4)


def test_grid_sample_grad_of_grid_only():
    """The input needs no gradient: the backward leaves its gradient out."""
    grid = (torch.rand(1, 3, 3, 2) * 2 - 1).requires_grad_()
    check_lowered(_with_grads(lambda x, g: F.grid_sample(x, g, align_corners=False)),
                  _rand(1, 2, 4, 4, grad=False), grid, rtol=1e-4, atol=1e-5)


# ---- pairwise distances -----------------------------------------------------------------------

MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def test_cdist_every_p_and_mode():
    def distances(a, b):
        return [torch.cdist(a, b, p=p, compute_mode=m) for p in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf)
                for m in MODES]
    check_lowered(_with_grads(distances), _rand(2, 4, 3), _rand(5, 3, seed=1), rtol=1e-4, atol=1e-4)


def test_cdist_zero_distances_have_zero_gradient():
    a = _rand(3, 2)
    b = torch.cat([a.detach()[:2], torch.ones(1, 2)]).requires_grad_()
    check_lowered(_with_grads(lambda a, b: [torch.cdist(a, b, p=p, compute_mode=MODES[2])
                                            for p in (0.5, 2.0, 3.0)]), a, b, rtol=1e-4, atol=1e-4)


def test_cdist_large_uses_the_matrix_product():
    check_lowered(_with_grads(lambda a, b: torch.cdist(a, b)), _rand(30, 3), _rand(4, 3, seed=1),
                  rtol=1e-4, atol=1e-4)


# ---- segment reductions ---------------------------------------------------------------------

LENGTHS = torch.tensor([[2, 0, 3, 0], [0, 1, 2, 2], [3, 0, 2, 0], [1, 1, 1, 2], [0, 1, 2, 2]])
OFFSETS = torch.cat([torch.zeros(5, 1, dtype=torch.long), LENGTHS], 1).cumsum(1)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce):
    def segments(x, y, short, lengths, offsets):
        return [torch.segment_reduce(x, reduce, lengths=short, unsafe=True),  # covers 4 rows of 5
                torch.segment_reduce(x, reduce, lengths=short, initial=2.0, unsafe=True),
                torch.segment_reduce(y, reduce, lengths=lengths, axis=1),
                torch.segment_reduce(y, reduce, offsets=offsets, axis=1, initial=-1.5)]
    check_lowered(_with_grads(segments), _rand(5, 3), _rand(5, 5, seed=1), torch.tensor([1, 2, 0, 1]),
                  LENGTHS, OFFSETS, rtol=1e-5)


def test_segment_reduce_ties_and_zeros():
    """Tied maxima share a positive gradient but each keep a negative one (PyTorch's CPU
    kernel); a product's gradient at a zero is the product of the others."""
    x = torch.tensor([2., 0., 0., 3., 0., 4., 1., 1., 5., 5.], requires_grad=True)
    lengths = torch.tensor([3, 2, 1, 2, 2])
    check_lowered(_with_grads(lambda x, n: [torch.segment_reduce(x, r, lengths=n) for r in ("prod", "max", "min")]
                              + [torch.segment_reduce(x, "prod", lengths=n, initial=3.0)]), x, lengths)


# ---- resizing and pooling ---------------------------------------------------------------------

def test_upsample_bilinear_antialiased():
    def resize(x):
        return [F.interpolate(x, size=s, mode="bilinear", antialias=True, align_corners=ac)
                for s, ac in (((3, 4), False), ((3, 4), True), ((10, 5), False), ((1, 2), True))] + [
            F.interpolate(x, scale_factor=(0.4, 1.7), mode="bilinear", antialias=True)]
    check_lowered(_with_grads(resize), _rand(2, 3, 7, 9), rtol=1e-4)


def test_fractional_max_pool2d():
    samples = torch.rand(2, 3, 2)

    def pool(x, s):
        return [*F.fractional_max_pool2d(x, (3, 2), output_size=(5, 7), return_indices=True, _random_samples=s),
                *F.fractional_max_pool2d(x, 2, output_size=1, return_indices=True, _random_samples=s),
                F.fractional_max_pool2d(x[0], 2, output_size=3, _random_samples=s[:1])]
    check_lowered(_with_grads(pool), _rand(2, 3, 9, 8), samples)


def test_fractional_max_pool3d_forward():
    """(Its backward has no meta kernel in PyTorch, so it still runs on the CPU.)"""
    check_lowered(lambda x, s: F.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 2, 3), return_indices=True,
                                                       _random_samples=s),
                  _rand(1, 2, 6, 7, 5, grad=False), torch.rand(1, 2, 3))



# ---- CTC loss ---------------------------------------------------------------------------------

@pytest.mark.parametrize("input_lengths,target_lengths", [([6, 4], [3, 1]), ([2, 4], [3, 1]), ([6, 0], [3, 0]),
                                                          ([5, 3], [0, 2])])
def test_ctc_loss_forward(input_lengths, target_lengths):
    """Likelihoods (inf when the target cannot fit, 0 for empty input and target) and the
    part of log_alpha PyTorch initialises; padded and concatenated targets."""
    def ctc(log_probs, padded, concatenated):
        out = []
        for targets in (padded, concatenated):
            nll, alpha = torch.ops.aten._ctc_loss(log_probs, targets, input_lengths, target_lengths, 0, False)
            out += [nll] + [alpha[b, :n, :2 * m + 1] for b, (n, m) in enumerate(zip(input_lengths, target_lengths))]
        return out
    padded = torch.tensor([[1, 1, 2], [3, 0, 0]])
    concatenated = torch.cat([padded[0, :target_lengths[0]], padded[1, :target_lengths[1]]])
    check_lowered(ctc, torch.randn(6, 2, 4).log_softmax(2), padded, concatenated, rtol=1e-5)


def test_ctc_loss_reductions():
    """(Its backward, aten::_ctc_loss_backward, has no meta kernel and still runs on the CPU.)"""
    check_lowered(lambda x, t: [F.ctc_loss(x, t, [8, 7], [3, 2], reduction=r, zero_infinity=True)
                                for r in ("mean", "sum", "none")],
                  _rand(8, 2, 5, grad=False).log_softmax(2), torch.tensor([[1, 4, 4], [2, 3, 0]]), rtol=1e-5)


# ---- linear algebra ---------------------------------------------------------------------------

def test_cholesky_deprecated():
    a = _rand(2, 4, 4, grad=False)
    spd = (a @ a.mT + 4 * torch.eye(4)).requires_grad_()
    with pytest.warns(UserWarning, match="deprecated"):
        check_lowered(_with_grads(lambda s: [torch.cholesky(s), torch.cholesky(s, upper=True)]), spd,
                      rtol=1e-4, atol=1e-4)


def test_cholesky_of_empty_matrices():
    check_lowered(lambda a, b: [torch.cholesky(a), torch.cholesky(b, upper=True)], torch.zeros(0, 0),
                  torch.zeros(0, 3, 3))


def test_householder_product_and_ormqr():
    reflectors, tau = torch.geqrf(_rand(2, 5, 3, grad=False))
    reflectors.requires_grad_(), tau.requires_grad_()

    def apply(h, t, c, d):
        return [torch.linalg.householder_product(h, t), torch.linalg.householder_product(h, t[..., :2])] + [
            torch.ormqr(h, t, c, left=True, transpose=tr) for tr in (False, True)] + [
            torch.ormqr(h, t, d, left=False, transpose=tr) for tr in (False, True)]
    check_lowered(_with_grads(apply), reflectors, tau, _rand(2, 5, 4, seed=1), _rand(2, 3, 5, seed=2),
                  rtol=1e-4, atol=1e-4)


def test_eig():
    """Real input, complex results; LAPACK's normalisation of the eigenvectors."""
    def eig(a):
        values, vectors = torch.linalg.eig(a)
        return values, vectors, torch.linalg.eigvals(a), values.abs() + vectors.abs().sum(-2)
    check_lowered(_with_grads(lambda a: eig(a)[2:]), _rand(2, 4, 4), rtol=1e-4, atol=1e-4)
    check_lowered(lambda a: eig(a)[:2], _rand(3, 3, grad=False), rtol=1e-4, atol=1e-5)


# ---- factories --------------------------------------------------------------------------------

def test_sgn_backward_of_real_tensors_uses_zero_tensors():
    check_lowered(_with_grads(lambda x: x.sgn()), _rand(3, 4))


@pytest.mark.parametrize("size", [(2, 3), (4, 3), (12,), (0,)])
def test_resize(size):
    """Shrinking keeps the leading elements; growing keeps them in front (the rest is
    uninitialised in PyTorch, so only the kept part is compared)."""
    def resize(x):
        y = x.clone()
        y.resize_(size)
        return y.flatten()[:x.numel()]
    check_lowered(resize, _rand(3, 4, grad=False))
