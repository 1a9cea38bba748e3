"""Softmax, normalizations, losses, embeddings, padding: forward and autograd's backward ops,
against the CPU, with no CPU fallback."""
import copy
import re

import pytest
import torch
import torch.nn.functional as F

from tests._lazy.lowering._helpers import seeded_randn
from tests.conftest import assert_lowered, assert_same, check_lowered, to_xla

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met


def randn(*shape, grad=True, dtype=torch.float32):
    return torch.randn(shape, dtype=dtype).requires_grad_(grad)


# ---- softmax ------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
@pytest.mark.parametrize("shape,dim", [((2, 3, 4), 1), ((), 0), ((5, 0, 0), -1), ((5, 0, 3), 1)])
def test_softmax(fn, shape, dim):
    check_lowered(lambda x: fn(x, dim), randn(*shape, dtype=torch.float64), grads=True)


def test_softmax_bfloat16_and_inf_rows():
    x = torch.randn(4, 6).to(torch.bfloat16)
    check_lowered(lambda x: F.softmax(x, -1), x, atol=1e-2, rtol=1e-2)
    y = torch.tensor([[0.0, -float("inf")], [-float("inf"), -float("inf")]])
    check_lowered(lambda y: (F.softmax(y, -1), F.log_softmax(y, -1)), y)


def test_scaled_dot_product_attention():
    q, k, v = randn(2, 3, 4, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 8)
    mask = torch.ones(4, 5, dtype=torch.bool).tril()
    mask[0] = False  # a fully masked row gives zeros (_safe_softmax), not nan
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.device))
    check_lowered(sdpa, q, k, v, grads=True, atol=1e-5, rtol=1e-5)


# ---- normalization ------------------------------------------------------------------------

@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(affine):
    x = randn(3, 4, 5)
    w, b = (randn(4, 5), randn(4, 5)) if affine else (None, None)
    check_lowered(lambda x, w, b: F.layer_norm(x, (4, 5), w, b, eps=1e-3), x, w, b,
                  grads=True, atol=1e-5, rtol=1e-4)


def test_layer_norm_bfloat16():
    x, w = torch.randn(3, 8).to(torch.bfloat16), torch.randn(8).to(torch.bfloat16)
    check_lowered(lambda x, w: F.layer_norm(x, (8,), w), x, w, atol=2e-2, rtol=2e-2)


def _train_steps(bn, x, g, steps=2):
    outs = []
    for _ in range(steps):
        out = bn(x)
        params = [x] + ([bn.weight, bn.bias] if bn.affine else [])
        outs.append((out,) + torch.autograd.grad(out, params, g))
    stats = (bn.running_mean, bn.running_var) if bn.track_running_stats else ()
    return outs, stats


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.BatchNorm1d(4, momentum=0.3), (5, 4, 3)),
    (lambda: torch.nn.BatchNorm2d(3), (4, 3, 2, 2)),
    (lambda: torch.nn.BatchNorm3d(2, affine=False, track_running_stats=False), (2, 2, 3, 2, 2)),
])
def test_batch_norm_training_updates_running_stats(make, shape):
    bn = make()
    x, g = randn(*shape), torch.randn(*shape)
    dev_bn = copy.deepcopy(bn).to(xm.xla_device())
    met.clear_counters()
    actual = _train_steps(dev_bn, to_xla(x), to_xla(g))
    assert_lowered()
    assert_same(actual, _train_steps(bn, x, g), rtol=1e-5, atol=1e-5)
    if bn.track_running_stats:  # the unbiased variance went into running_var
        assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))


def test_batch_norm_eval():
    x, rm, rv, w, b = randn(4, 3, 5), torch.randn(3), torch.rand(3) + 0.5, randn(3), randn(3)
    check_lowered(lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b,
                                               training=False, eps=1e-3),
                  x, w, b, grads=True, atol=1e-5, rtol=1e-5)


def test_batch_norm_half_input_float_stats():
    def fn(x):
        rm, rv = torch.zeros(3, device=x.device), torch.ones(3, device=x.device)
        return F.batch_norm(x, rm, rv, training=True), rm, rv
    check_lowered(fn, torch.randn(4, 3, 5).to(torch.float16), atol=1e-2, rtol=1e-2)


_NORM_OPS = {
    "layer_norm": lambda x, w, rm, rv: torch.ops.aten.native_layer_norm(x, [5], w, w, 1e-5),
    "group_norm": lambda x, w, rm, rv: torch.ops.aten.native_group_norm(x, w, w, 4, 3, 5, 1, 1e-5),
    "batch_norm": lambda x, w, rm, rv: torch.ops.aten.native_batch_norm(x, w, w, rm, rv, True,
                                                                        0.1, 1e-5),
    "batch_norm_eval": lambda x, w, rm, rv: torch.ops.aten.native_batch_norm(
        x, w, w, rm, rv, False, 0.1, 1e-5),
    "batch_norm_no_stats": lambda x, w, rm, rv: torch.ops.aten._native_batch_norm_legit(
        x, w, w, True, 0.1, 1e-5),
    "batch_norm_functional": lambda x, w, rm, rv:
        torch.ops.aten._native_batch_norm_legit_functional(x, w, w, rm, rv, True, 0.1, 1e-5),
    "batch_norm_no_training": lambda x, w, rm, rv:
        torch.ops.aten._native_batch_norm_legit_no_training(x, w, w, rm, rv, 0.1, 1e-5),
    "batch_norm_with_update": lambda x, w, rm, rv:
        torch.ops.aten._batch_norm_with_update_functional(x, w, w, rm, rv, 0.1, 1e-5)[:3] +
        torch.ops.aten._batch_norm_with_update_functional(x, w, w, rm, rv, 0.1, 1e-5)[4:],
}


# (PyTorch's meta kernel of _batch_norm_with_update_functional fails without a weight.)
_NORM_CASES = [(name, dtype, param_dtype) for name in sorted(_NORM_OPS)
               for dtype, param_dtype in [(torch.bfloat16, torch.bfloat16),
                                          (torch.float16, torch.float16), (torch.bfloat16, None),
                                          (torch.bfloat16, torch.float32),
                                          (torch.float32, torch.float32)]
               if (name, param_dtype) != ("batch_norm_with_update", None)]


@pytest.mark.parametrize("name,dtype,param_dtype", _NORM_CASES)
def test_norm_statistics_take_the_cpus_dtypes(name, dtype, param_dtype):
    """The CPU kernels keep reduced-precision statistics in the input's dtype, float32 when a
    parameter is float32; the meta kernels say otherwise, the device follows the CPU."""
    x = torch.randn(4, 3, 5).to(dtype)
    w = None if param_dtype is None else (torch.rand(5 if name == "layer_norm" else 3) + 0.5)
    w = None if w is None else w.to(param_dtype)
    stats = param_dtype or dtype  # running statistics (None parameters: the input's dtype)
    rm, rv = torch.randn(3).to(stats), (torch.rand(3) + 0.5).to(stats)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    check_lowered(lambda *a: tuple(_NORM_OPS[name](*a)), x, w, rm, rv, rtol=tol, atol=tol)


def test_bfloat16_norm_layers_train_as_on_the_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4),
                                torch.nn.LayerNorm(4), torch.nn.GroupNorm(2, 4)).bfloat16()
    x = torch.randn(5, 3, 6).bfloat16()
    # weights of the loss (a sum of squares of a normalized output is a constant: its
    # gradients would be rounding noise alone)
    target = torch.randn(5, 4, 4)

    def run(m, x):
        out = m(x)
        wide = torch.float64 if out.dtype == torch.float64 else torch.float32
        loss = (out.to(wide) * target.to(x.device, wide)).sum()
        grads = torch.autograd.grad(loss, list(m.parameters()))
        return [out, *grads, m[1].running_mean, m[1].running_var]
    dev_model = copy.deepcopy(model).to(xm.xla_device())
    # bfloat16 rounding through three normalizations: where the device and the CPU differ,
    # the same model in float64 tells which is off
    reference = run(copy.deepcopy(model).double(), x.double())
    assert_same(run(dev_model, to_xla(x)), run(model, x), rtol=5e-2, atol=5e-2, reference=reference)


@pytest.mark.parametrize("groups", [1, 2])
def test_group_norm(groups):
    x, w, b = randn(3, 4, 5), randn(4), randn(4)
    check_lowered(lambda x, w, b: F.group_norm(x, groups, w, b), x, w, b, grads=True,
                  atol=1e-5, rtol=1e-4)


def test_instance_norm():
    x, w, b = randn(3, 4, 5, 2), randn(4), randn(4)
    check_lowered(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), x, w, b, grads=True,
                  atol=1e-5, rtol=1e-4)


def test_rms_norm():
    x, w = randn(3, 4, 6), randn(6)
    check_lowered(lambda x, w: F.rms_norm(x, (6,), w, eps=1e-5), x, w, grads=True, atol=1e-5, rtol=1e-5)


# ---- losses -------------------------------------------------------------------------------

@pytest.mark.parametrize("reduction,weighted", [("mean", True), ("sum", False), ("none", True),
                                                ("mean", False)])
def test_nll_loss(reduction, weighted):
    x, t = randn(6, 5), torch.tensor([0, 4, 2, 2, 1, 3])
    w = torch.rand(5) if weighted else None
    fn = lambda x, t, w: F.nll_loss(x, t, w, ignore_index=2, reduction=reduction)
    check_lowered(fn, x, t, w, grads=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss2d(reduction):
    x, t, w = randn(2, 4, 3, 3), torch.randint(0, 4, (2, 3, 3)), torch.rand(4)
    t[0, 0, 0] = -100
    check_lowered(lambda x, t, w: F.nll_loss(x, t, w, reduction=reduction), x, t, w, grads=True)


def test_nll_loss_unbatched_and_all_ignored():
    check_lowered(lambda x, t: F.nll_loss(x, t), randn(5), torch.tensor(3), grads=True)
    x, t = torch.randn(2, 3), torch.tensor([1, 1])
    check_lowered(lambda x, t: F.nll_loss(x, t, ignore_index=1), x, t)  # 0/0: nan, as on the CPU


def test_nll_loss_gathers_the_targets_class():
    """The loss reads x at each target (a gather): no op of x's size (a one-hot mask of it
    read all of a language model's logits)."""
    import torch_xla
    x, t = to_xla(torch.randn(8, 1000)), to_xla(torch.tensor([0, 999, 5, -100, 7, 7, 1, 2]))
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([F.nll_loss(x, t)])
    assert "gather(" in hlo
    assert set(re.findall(r"= \w+\[8,1000\]\S* ([\w-]+)\(", hlo)) == {"parameter"}


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy(smoothing):
    x, t = randn(4, 5), torch.tensor([0, 4, 2, 1])
    check_lowered(lambda x, t: F.cross_entropy(x, t, label_smoothing=smoothing), x, t, grads=True,
                  atol=1e-5, rtol=1e-5)


def test_cross_entropy_probabilities():
    x, p = randn(4, 5), torch.softmax(torch.randn(4, 5), -1)
    check_lowered(lambda x, p: F.cross_entropy(x, p), x, p, grads=True, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("loss,reduction", [
    (F.mse_loss, "mean"), (F.mse_loss, "none"), (F.l1_loss, "sum"), (F.smooth_l1_loss, "mean"),
    (F.huber_loss, "sum"),
    (lambda x, y, reduction: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5), "none"),
    (lambda x, y, reduction: F.huber_loss(x, y, reduction=reduction, delta=0.3), "none"),
])
def test_regression_losses(loss, reduction):
    x, y = randn(3, 4), randn(3, 4)
    check_lowered(lambda x, y: loss(x, y, reduction=reduction), x, y, grads=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    x, t, w = torch.rand(3, 4).requires_grad_(), torch.rand(3, 4), torch.rand(3, 4)
    x.data[0, 0] = 0.0  # log(0) is clamped to -100
    check_lowered(lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction=reduction), x, t, w, grads=True,
                  atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(reduction):
    x, t, w, pw = randn(3, 4) * 30, torch.rand(3, 4), torch.rand(3, 4), torch.rand(4)
    fn = lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw,
                                                                 reduction=reduction)
    check_lowered(fn, x, t, w, pw, grads=True, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(log_target):
    x = torch.log_softmax(torch.randn(3, 4), -1).requires_grad_()
    t = torch.log_softmax(torch.randn(3, 4), -1)
    t = t if log_target else t.exp()
    check_lowered(lambda x, t: F.kl_div(x, t, reduction="batchmean", log_target=log_target), x, t, grads=True)


# ---- embeddings ---------------------------------------------------------------------------

@pytest.mark.parametrize("padding_idx,scale", [(None, False), (1, False), (None, True), (2, True)])
def test_embedding(padding_idx, scale):
    w, idx = randn(5, 3), torch.tensor([[0, 2, 2], [1, 4, 2]])
    fn = lambda idx, w: F.embedding(idx, w, padding_idx=padding_idx, scale_grad_by_freq=scale)
    check_lowered(fn, idx, w, grads=True)


# ---- padding and pixel shuffle ------------------------------------------------------------

@pytest.mark.parametrize("mode,shape,pad", [
    ("reflect", (2, 5), (2, 3)), ("replicate", (2, 3, 4, 5), (0, 1, 3, 2)),
    ("reflect", (1, 2, 3, 4, 5), (2, 1, 1, 0, 2, 2)), ("replicate", (1, 2, 3, 4, 5), (1, 1, 0, 2, 2, 1))])
def test_pad(mode, shape, pad):
    check_lowered(lambda x: F.pad(x, pad, mode=mode), randn(*shape), grads=True)


def test_pixel_shuffle():
    check_lowered(lambda x: F.pixel_shuffle(x, 2), randn(2, 8, 3, 4), grads=True)
    check_lowered(lambda x: F.pixel_unshuffle(x, 2), randn(3, 2, 4, 6), grads=True)


@pytest.mark.parametrize("mode,last,padding_idx", [("sum", False, None), ("mean", True, 2),
                                                   ("max", True, 2)])
def test_embedding_bag(mode, last, padding_idx):
    w, idx = randn(6, 3), torch.tensor([0, 2, 2, 1, 5, 3, 2])
    offsets = torch.tensor([0, 2, 2, 5] + ([7] if last else []))  # bag 1 is empty
    fn = lambda idx, offsets, w: F.embedding_bag(idx, w, offsets.to(idx.device), mode=mode,
                                                 include_last_offset=last, padding_idx=padding_idx)
    check_lowered(fn, idx, offsets, w, grads=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_embedding_bag_and_huber_loss_round_as_the_cpu(dtype):
    """Weighted bag sums of float16/bfloat16 round once, as the CPU's; Huber losses round as
    the running torch's CPU kernel does (each step, or once: torch_compat), in both dtypes."""
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(10, 5, generator=g) * 4).to(dtype)
    psw = (torch.randn(8, generator=g) * 4).to(dtype)
    idx = torch.randint(0, 10, (8,), generator=g)
    x, y = ((torch.randn(16, generator=g) * 8).to(dtype) for _ in range(2))
    check_lowered(lambda idx, w, psw: [
        F.embedding_bag(idx, w, torch.tensor([0, 3], device=idx.device), mode="sum",
                        per_sample_weights=psw),
        F.embedding_bag(idx, w, torch.tensor([0, 5], device=idx.device), mode="mean")],
        idx, w, psw, rtol=1.6e-2 if dtype == torch.bfloat16 else 1e-3, atol=1e-3)
    check_lowered(lambda x, y: [F.huber_loss(x, y, reduction="none", delta=8.7),
                                F.huber_loss(x, y, reduction="mean", delta=8.7)], x, y,
                  rtol=1e-3, atol=1e-3)


def test_embedding_bag_per_sample_weights_and_2d_input():
    w, idx, psw = randn(6, 3), torch.tensor([0, 2, 2, 1, 5, 3]), randn(6)
    fn = lambda idx, w, psw: F.embedding_bag(idx, w, torch.tensor([0, 3], device=idx.device),
                                             per_sample_weights=psw, mode="sum")
    check_lowered(fn, idx, w, psw, grads=True)
    # the repeated index is the largest: PyTorch's CPU kernel scales the index that follows a
    # repeated one (in sorted order) by the wrong count (embedding_bag([1, 1, 3]) gives row 3
    # half its gradient); the device follows the documented rule
    check_lowered(lambda idx, w: F.embedding_bag(idx, w, mode="mean", scale_grad_by_freq=True),
                  torch.tensor([[0, 1, 4], [3, 4, 4]]), w, grads=True)
    # without gradients: _embedding_bag_forward_only
    check_lowered(lambda idx, w: F.embedding_bag(idx, w, mode="max"), idx.reshape(2, 3), w.detach())


# ---- CTC loss -----------------------------------------------------------------------------

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
                  seeded_randn(8, 2, 5, grad=False).log_softmax(2), torch.tensor([[1, 4, 4], [2, 3, 0]]),
                  rtol=1e-5)


# ---- CPU flash attention ----------------------------------------------------------------

@pytest.mark.parametrize("causal,mask", [(False, None), (True, None), (False, "float")])
def test_cpu_flash_attention_forward_and_backward(causal, mask):
    """Its logsumexp output and its backward op are PyTorch's, not the export decomposition's."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, 5, requires_grad=True) for _ in range(3))
    masks = {None: None, "float": torch.randn(4, 4)}

    def attention(q, k, v):
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, is_causal=causal, attn_mask=None if mask is None else masks[mask].to(q.device))
        out.pow(2).sum().backward()
        return out, lse, q.grad, k.grad, v.grad
    check_lowered(attention, q, k, v, rtol=1e-4, atol=1e-5)


def test_cpu_flash_attention_refuses_a_bool_mask_as_pytorch_does(dev):
    q = torch.randn(1, 1, 2, 3)
    mask = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(RuntimeError) as cpu:
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, attn_mask=mask)
    with pytest.raises(RuntimeError) as xla:
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q.to(dev), q.to(dev), q.to(dev), attn_mask=mask.to(dev))
    assert str(xla.value) == str(cpu.value)
