"""Neural-network ops: softmax, normalizations, losses, embeddings, padding, pixel shuffle.

These are the ops PyTorch's autograd emits for `torch.nn.functional`, forward and
backward. Float16/bfloat16 inputs are computed in float32 (PyTorch's "opmath" type) and
cast back. Reductions in losses: 0 = none, 1 = mean, 2 = sum. (_ctc_loss_backward and the
margin losses' backwards have no meta kernel in PyTorch, so no lowering.)
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..runtime import pjrt
from ..base import torch_compat
from . import aten, lower
from ._linear import linear_backward
from ._types import float_opmath, opmath


def _axis(x, dim):
    """`dim` as a jax axis (None for 0-d tensors, where PyTorch accepts dim 0 and -1)."""
    return dim % x.ndim if x.ndim else None


def _reduce(loss, reduction):
    if reduction == 1:
        return jnp.mean(loss)
    if reduction == 2:
        return jnp.sum(loss)
    return loss


def _grad_scale(grad, x, reduction):
    """d(reduced loss)/d(elementwise loss), broadcast against `x`."""
    if reduction == 1:
        return grad / x.size
    return grad


# ---- softmax ------------------------------------------------------------------------------

def _row_max(x, ax):  # -inf for an empty row (whose result is empty too)
    return jnp.max(x, axis=ax, keepdims=True, initial=-jnp.inf)


@lower(aten._softmax.default)
def softmax(x, dim, half_to_float):
    ax = _axis(x, dim)
    x = x.astype(float_opmath(x.dtype))
    e = jnp.exp(x - _row_max(x, ax))
    return e / jnp.sum(e, axis=ax, keepdims=True)


@lower(aten._log_softmax.default)
def log_softmax(x, dim, half_to_float):
    ax = _axis(x, dim)
    x = x.astype(float_opmath(x.dtype))
    shifted = x - _row_max(x, ax)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=ax, keepdims=True))


@lower(aten._safe_softmax.default)
def safe_softmax(x, dim, dtype=None):
    """Softmax whose rows of only -inf give 0 rather than nan (attention with full masks)."""
    if dtype is not None:
        x = x.astype(pjrt.to_jax_dtype(dtype))
    masked = jnp.all(x == -jnp.inf, axis=_axis(x, dim), keepdims=True)
    out = softmax(x, dim, False)
    return jnp.where(masked, jnp.zeros((), out.dtype), out)


@lower(aten._softmax_backward_data.default)
def softmax_backward(grad, out, dim, input_dtype):
    ax = _axis(out, dim)
    dt = float_opmath(grad.dtype)
    grad, out = grad.astype(dt), out.astype(dt)
    return out * (grad - jnp.sum(grad * out, axis=ax, keepdims=True))


@lower(aten._log_softmax_backward_data.default)
def log_softmax_backward(grad, out, dim, input_dtype):
    ax = _axis(out, dim)
    dt = float_opmath(grad.dtype)
    grad, out = grad.astype(dt), out.astype(dt)
    return grad - jnp.exp(out) * jnp.sum(grad, axis=ax, keepdims=True)


# ---- normalization ------------------------------------------------------------------------

def _normalize_backward(grad, xhat, rstd, axes, n):
    """d/dx of (x - mean(x)) * rstd over `axes` (n elements), given dL/dxhat = grad."""
    s1 = jnp.sum(grad, axis=axes, keepdims=True)
    s2 = jnp.sum(grad * xhat, axis=axes, keepdims=True)
    return rstd / n * (n * grad - s1 - xhat * s2)


@lower(aten.native_layer_norm.default)
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    xa = x.astype(float_opmath(x.dtype))
    mean = jnp.mean(xa, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xa - mean), axis=axes, keepdims=True)
    rstd = jax.lax.rsqrt(var + eps)
    out = (xa - mean) * rstd
    if weight is not None:
        out = out * weight.astype(out.dtype)
    if bias is not None:
        out = out + bias.astype(out.dtype)
    return out, mean, rstd


@lower(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    k = x.ndim - len(normalized_shape)
    axes, outer = tuple(range(k, x.ndim)), tuple(range(k))
    dt = float_opmath(x.dtype)
    grad, xa = grad.astype(dt), x.astype(dt)
    xhat = (xa - mean.astype(dt)) * rstd.astype(dt)
    gx = grad if weight is None else grad * weight.astype(dt)
    n = math.prod(normalized_shape)
    dx = _normalize_backward(gx, xhat, rstd.astype(dt), axes, n) if output_mask[0] else None
    dw = jnp.sum(grad * xhat, axis=outer) if output_mask[1] and weight is not None else None
    db = jnp.sum(grad, axis=outer) if output_mask[2] and bias is not None else None
    return dx, dw, db


def _channel(v, ndim):
    """A per-channel vector shaped to broadcast against an (N, C, ...) tensor."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, save_mean, save_invstd, new running_mean, new running_var); the running
    statistics are updated like PyTorch: momentum, and the unbiased variance."""
    dt = float_opmath(x.dtype)
    xa = x.astype(dt)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        mean = jnp.mean(xa, axis=axes)
        var = jnp.mean(jnp.square(xa - _channel(mean, x.ndim)), axis=axes)
        invstd = jax.lax.rsqrt(var + eps)
        if running_mean is not None:
            n = x.size // x.shape[1]
            running_mean = momentum * mean + (1 - momentum) * running_mean.astype(dt)
            running_var = momentum * var * (n / (n - 1)) + (1 - momentum) * running_var.astype(dt)
    else:
        mean = running_mean.astype(dt)
        invstd = 1 / jnp.sqrt(running_var.astype(dt) + eps)
    out = (xa - _channel(mean, x.ndim)) * _channel(invstd, x.ndim)
    if weight is not None:
        out = out * _channel(weight.astype(dt), x.ndim)
    if bias is not None:
        out = out + _channel(bias.astype(dt), x.ndim)
    return out, mean, invstd, running_mean, running_var


@lower(aten.native_batch_norm.default)
def native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Without running-statistics updates: the engine routes training with running statistics
    through `_native_batch_norm_legit_functional` and writes them back (`_lazy/trace/engine_ops/batch_norm.py`)."""
    return _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)[:3]


@lower(aten._native_batch_norm_legit_functional.default)
def batch_norm_functional(x, weight, bias, running_mean, running_var, training, momentum, eps):
    return _batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)


@lower(aten._native_batch_norm_legit_no_training.default)
def batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    return _batch_norm(x, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


@lower(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update(x, weight, bias, running_mean, running_var, momentum, eps):
    """(output, save_mean, save_invstd, reserve, new running_mean, new running_var); the
    reserve is empty, as on the CPU (only cuDNN keeps one)."""
    out, mean, invstd, new_mean, new_var = _batch_norm(x, weight, bias, running_mean,
                                                       running_var, True, momentum, eps)
    return out, mean, invstd, jnp.zeros((0,), jnp.uint8), new_mean, new_var


@lower(aten._batch_norm_no_update.default)
def batch_norm_no_update(x, weight, bias, running_mean, running_var, momentum, eps):
    out, mean, invstd = _batch_norm(x, weight, bias, running_mean, running_var, False,
                                    momentum, eps)[:3]
    return out, mean, invstd, jnp.zeros((0,), jnp.uint8)


@lower(aten._native_batch_norm_legit.no_stats)
def batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    return _batch_norm(x, weight, bias, None, None, True, momentum, eps)[:3]


@lower(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(grad, x, weight, running_mean, running_var, save_mean, save_invstd,
                               train, eps, output_mask):
    dt = float_opmath(x.dtype)
    grad, xa = grad.astype(dt), x.astype(dt)
    if train:
        mean, invstd = save_mean.astype(dt), save_invstd.astype(dt)
    else:
        mean, invstd = running_mean.astype(dt), 1 / jnp.sqrt(running_var.astype(dt) + eps)
    axes = (0,) + tuple(range(2, x.ndim))
    mean, invstd = _channel(mean, x.ndim), _channel(invstd, x.ndim)
    xhat = (xa - mean) * invstd
    w = jnp.ones((), dt) if weight is None else _channel(weight.astype(dt), x.ndim)
    dx = None
    if output_mask[0]:
        if train:
            dx = _normalize_backward(grad * w, xhat, invstd, axes, x.size // x.shape[1])
        else:
            dx = grad * w * invstd
    dw = jnp.sum(grad * xhat, axis=axes) if output_mask[1] else None
    db = jnp.sum(grad, axis=axes) if output_mask[2] else None
    return dx, dw, db


@lower(aten.native_group_norm.default)
def native_group_norm(x, weight, bias, n, c, hw, group, eps):
    dt = float_opmath(x.dtype)
    xg = x.astype(dt).reshape(n, group, -1)
    mean = jnp.mean(xg, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(xg - mean), axis=2, keepdims=True)
    rstd = jax.lax.rsqrt(var + eps)
    out = ((xg - mean) * rstd).reshape(x.shape)
    if weight is not None:
        out = out * _channel(weight.astype(dt), x.ndim)
    if bias is not None:
        out = out + _channel(bias.astype(dt), x.ndim)
    return out, mean[..., 0], rstd[..., 0]


@lower(aten.native_group_norm_backward.default)
def native_group_norm_backward(grad, x, mean, rstd, weight, n, c, hw, group, output_mask):
    dt = float_opmath(x.dtype)
    shape = (n, group, c // group, hw)
    g, xa = grad.astype(dt).reshape(shape), x.astype(dt).reshape(shape)
    mean, rstd = mean.astype(dt)[..., None, None], rstd.astype(dt)[..., None, None]
    xhat = (xa - mean) * rstd
    dx = None
    if output_mask[0]:
        w = 1 if weight is None else weight.astype(dt).reshape(1, group, c // group, 1)
        dx = _normalize_backward(g * w, xhat, rstd, (2, 3), shape[2] * hw).reshape(x.shape)
    dw = jnp.sum(g * xhat, axis=(0, 3)).reshape(c) if output_mask[1] else None
    db = jnp.sum(g, axis=(0, 3)).reshape(c) if output_mask[2] else None
    return dx, dw, db


# ---- losses -------------------------------------------------------------------------------

def _nll_parts(x, target, weight, ignore_index):
    """(the class axis, whether each target is kept, its weight: 0 where it is ignored)."""
    cls = 1 if x.ndim >= 2 else 0
    keep = target != ignore_index
    w = jnp.ones((), x.dtype) if weight is None else jnp.take(weight, jnp.where(keep, target, 0))
    return cls, keep, jnp.where(keep, w, jnp.zeros((), x.dtype))


@lower(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def nll_loss(x, target, weight, reduction, ignore_index):
    cls, keep, w = _nll_parts(x, target, weight, ignore_index)
    # x at each target's class, gathered (not a one-hot mask over x): 0 where none is named
    valid = keep & (target >= 0) & (target < x.shape[cls])
    index = jnp.expand_dims(jnp.where(valid, target, 0), cls)
    picked = jnp.take_along_axis(x, index, cls, mode="clip").squeeze(cls)
    loss = -jnp.where(valid, picked, jnp.zeros((), x.dtype)) * w
    total = jnp.sum(w)
    if reduction == 0:
        return loss, jnp.zeros((), x.dtype)
    if reduction == 1:
        return jnp.sum(loss) / total, total
    return jnp.sum(loss), total


@lower(aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
def nll_loss_backward(grad, x, target, weight, reduction, ignore_index, total_weight):
    cls, keep, w = _nll_parts(x, target, weight, ignore_index)
    classes = jnp.arange(x.shape[cls], dtype=target.dtype).reshape((-1,) + (1,) * (x.ndim - cls - 1))
    onehot = (jnp.expand_dims(target, cls) == classes) & jnp.expand_dims(keep, cls)
    scale = -w * grad if reduction != 1 else -w * (grad / total_weight)
    return jnp.where(onehot, jnp.expand_dims(scale, cls), jnp.zeros((), x.dtype))


@lower(aten.mse_loss.default)
def mse_loss(x, target, reduction=1):
    return _reduce(jnp.square(x - target), reduction)


@lower(aten.mse_loss_backward.default)
def mse_loss_backward(grad, x, target, reduction):
    return 2 * (x - target) * _grad_scale(grad, x, reduction)


@lower(aten.smooth_l1_loss.default)
def smooth_l1_loss(x, target, reduction=1, beta=1.0):
    z = jnp.abs(x - target)
    return _reduce(jnp.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), reduction)


@lower(aten.smooth_l1_loss_backward.default)
def smooth_l1_loss_backward(grad, x, target, reduction, beta):
    d = x - target
    g = _grad_scale(grad, x, reduction)
    return jnp.where(d < -beta, -g, jnp.where(d > beta, g, d * g / beta))


@lower(aten.huber_loss.default)
def huber_loss(x, target, reduction=1, delta=1.0):
    """float16/bfloat16 as the running torch's CPU kernel: each step rounded to the dtype (its
    vectorised kernel's order), or computed in float32 and rounded once."""
    if x.dtype in (jnp.float16, jnp.bfloat16) and \
            torch_compat.huber_loss_rounds_each_step(x.dtype.name):
        z = jnp.abs(x - target)
        d, half = jnp.asarray(delta, x.dtype), jnp.asarray(0.5, x.dtype)
        loss = jnp.where(z >= d, d * (z - half * d), half * z * z)
        return _reduce(loss.astype(jnp.float32), reduction)  # a mean sums in float32
    dt = opmath(x.dtype)
    z = jnp.abs(x.astype(dt) - target.astype(dt))
    return _reduce(jnp.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


@lower(aten.huber_loss_backward.default)
def huber_loss_backward(grad, x, target, reduction, delta):
    d = x - target
    g = _grad_scale(grad, x, reduction)
    return jnp.where(d < -delta, -delta * g, jnp.where(d > delta, delta * g, d * g))


@lower(aten.binary_cross_entropy.default)
def binary_cross_entropy(x, target, weight=None, reduction=1):
    floor = jnp.asarray(-100, x.dtype)
    loss = -(target * jnp.maximum(jnp.log(x), floor)
             + (1 - target) * jnp.maximum(jnp.log1p(-x), floor))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@lower(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(grad, x, target, weight=None, reduction=1):
    g = _grad_scale(grad, x, reduction) * (x - target) / jnp.maximum((1 - x) * x, 1e-12)
    return g if weight is None else g * weight


@lower(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(x, target, weight=None, pos_weight=None, reduction=1):
    softplus_neg = jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(-x, 0)  # -log(sigmoid(x))
    log_weight = 1 if pos_weight is None else (pos_weight - 1) * target + 1
    loss = (1 - target) * x + log_weight * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _ctc_targets(targets, target_lengths, width):
    """(N, width) padded targets from PyTorch's 2-d padded or 1-d concatenated form."""
    if targets.ndim == 2:
        return jnp.pad(targets[:, :width], ((0, 0), (0, max(0, width - targets.shape[1]))))
    starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
    pos = np.minimum(starts[:, None] + np.arange(width), max(targets.shape[0] - 1, 0))
    return targets[pos] if targets.shape[0] else jnp.zeros(pos.shape, targets.dtype)


@lower(aten._ctc_loss.default)
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """(negative log-likelihood (N,), log_alpha (N, T, 2 * max_target + 1)): the forward
    recursion of Graves et al. in PyTorch's arithmetic (a max-shifted log of summed
    exps). log_alpha is -inf where PyTorch leaves it uninitialised (its backward reads
    only the rest); `zero_infinity` is applied by the caller."""
    t_max, n = log_probs.shape[:2]
    width = max(target_lengths, default=0)
    states = 2 * width + 1
    labels = _ctc_targets(targets, target_lengths, width).astype(jnp.int64)
    primes = jnp.full((n, states), blank, jnp.int64).at[:, 1::2].set(labels)  # (N, S')
    lengths = np.asarray(target_lengths, np.int64)
    in_lengths = np.asarray(input_lengths, np.int64)
    s_idx = np.arange(states)
    valid = s_idx[None] <= 2 * lengths[:, None]  # (N, S')
    skip = np.zeros((n, states), bool)
    skip[:, 2:] = True
    skip = jnp.asarray(skip) & (primes != jnp.roll(primes, 2, 1))
    neginf = jnp.asarray(-jnp.inf, log_probs.dtype)
    emit = jnp.take_along_axis(log_probs, jnp.broadcast_to(primes[None], (t_max, n, states)), 2)

    first = jnp.where(jnp.asarray((s_idx[None] == 0) | ((s_idx[None] == 1) & (lengths[:, None] > 0))),
                      emit[0], neginf)

    def step(alpha, inputs):
        t, e = inputs
        la2 = jnp.pad(alpha[:, :-1], ((0, 0), (1, 0)), constant_values=-jnp.inf)
        la3 = jnp.where(skip, jnp.pad(alpha[:, :-2], ((0, 0), (2, 0)), constant_values=-jnp.inf), neginf)
        m = jnp.maximum(jnp.maximum(alpha, la2), la3)
        m = jnp.where(m == -jnp.inf, 0, m)
        new = jnp.log(jnp.exp(alpha - m) + jnp.exp(la2 - m) + jnp.exp(la3 - m)) + m + e
        new = jnp.where(jnp.asarray(valid) & (t < jnp.asarray(in_lengths))[:, None], new, neginf)
        return new, new

    _, rest = lax.scan(step, first, (jnp.arange(1, t_max), emit[1:]))
    alphas = jnp.concatenate([first[None], rest], 0)  # (T, N, S')
    alphas = jnp.where(jnp.asarray(in_lengths > 0)[None, :, None], alphas, neginf)
    last = alphas[np.maximum(in_lengths - 1, 0), np.arange(n)]  # (N, S')
    l1 = last[np.arange(n), 2 * lengths]
    l2 = last[np.arange(n), np.maximum(2 * lengths - 1, 0)]
    m = jnp.maximum(l1, l2)
    m = jnp.where(m == -jnp.inf, 0, m)
    both = jnp.log(jnp.exp(l1 - m) + jnp.exp(l2 - m)) + m
    likelihood = jnp.where(jnp.asarray(lengths == 0), l1, both)
    empty = jnp.where(jnp.asarray(lengths == 0), 0, neginf)
    likelihood = jnp.where(jnp.asarray(in_lengths == 0), empty, likelihood)
    return -likelihood, jnp.swapaxes(alphas, 0, 1)


# ---- embeddings ---------------------------------------------------------------------------

@lower(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return jnp.take(weight, indices, axis=0, mode="clip")


@lower(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    idx = indices.reshape(-1)
    g = grad.reshape(idx.shape[0], -1).astype(float_opmath(grad.dtype))
    if padding_idx >= 0:
        g = jnp.where((idx == padding_idx)[:, None], jnp.zeros((), g.dtype), g)
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), g.dtype).at[idx].add(1)
        g = g / counts[idx][:, None]
    return jnp.zeros((num_weights, g.shape[1]), g.dtype).at[idx].add(g)


def _bags(indices, offsets, include_last_offset, padding_idx):
    """(bag of each index, whether it counts (not padding_idx), number of bags)."""
    nbags = offsets.shape[0] - (1 if include_last_offset else 0)
    bag = jnp.searchsorted(offsets[:nbags], jnp.arange(indices.shape[0], dtype=offsets.dtype),
                           side="right") - 1
    return bag, indices != padding_idx, nbags


@lower(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """(output, offset2bag, bag_size, max_indices) with the shapes of PyTorch's meta kernel:
    bag_size has an entry per offset, max_indices is empty unless mode is max (2). Empty
    bags give zeros."""
    bag, keep, nbags = _bags(indices, offsets, include_last_offset, padding_idx)
    rows = jnp.take(weight, indices, axis=0, mode="clip")
    if mode != 2:  # sums in float32 for float16/bfloat16 weights, rounded once (the engine)
        rows = rows.astype(opmath(rows.dtype))
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None].astype(rows.dtype)
    size = jax.ops.segment_sum(keep.astype(jnp.int64), bag, nbags)
    bag_size = jnp.pad(size, (0, offsets.shape[0] - nbags))
    zero = jnp.zeros((), rows.dtype)
    if mode != 2:
        out = jax.ops.segment_sum(jnp.where(keep[:, None], rows, zero), bag, nbags)
        if mode == 1:
            out = out / jnp.maximum(size, 1)[:, None].astype(out.dtype)
        return out, bag, bag_size, jnp.zeros((0,), jnp.int64)
    low = jnp.array(-jnp.inf, rows.dtype)
    out = jax.ops.segment_max(jnp.where(keep[:, None], rows, low), bag, nbags)
    # the first index of each bag reaching the maximum, per column
    pos = jnp.arange(indices.shape[0])[:, None]
    hit = keep[:, None] & (rows == out[bag])
    first = jax.ops.segment_min(jnp.where(hit, pos, indices.shape[0]), bag, nbags)
    empty = (size == 0)[:, None]
    max_indices = jnp.where(empty, 0, jnp.take(indices, first, mode="clip"))
    return jnp.where(empty, zero, out), bag, bag_size, max_indices


@lower(aten._embedding_bag_backward.default)
def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights,
                           scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, max_indices,
                                        num_weights, scale_grad_by_freq, mode, per_sample_weights,
                                        padding_idx)


@lower(aten._embedding_bag_dense_backward.default)
def embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, max_indices, num_weights,
                                 scale_grad_by_freq, mode, per_sample_weights, padding_idx=-1):
    dt = float_opmath(grad.dtype)
    grad = grad.astype(dt)
    if mode == 2:
        live = (bag_size[:grad.shape[0]] > 0)[:, None]
        cols = jnp.broadcast_to(jnp.arange(grad.shape[1]), grad.shape)
        return jnp.zeros((num_weights, grad.shape[1]), dt).at[max_indices, cols].add(
            jnp.where(live, grad, jnp.zeros((), dt)))
    g = jnp.take(grad, offset2bag, axis=0, mode="clip")
    if mode == 1:
        g = g / jnp.maximum(jnp.take(bag_size, offset2bag), 1)[:, None].astype(dt)
    if per_sample_weights is not None:
        g = g * per_sample_weights[:, None].astype(dt)
    keep = (indices != padding_idx)[:, None]
    if scale_grad_by_freq:
        counts = jnp.zeros((num_weights,), dt).at[indices].add(1)
        g = g / counts[indices][:, None]
    return jnp.zeros((num_weights, grad.shape[1]), dt).at[indices].add(
        jnp.where(keep, g, jnp.zeros((), dt)))


@lower(aten._embedding_bag_per_sample_weights_backward.default)
def embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
                                              padding_idx=-1):
    dt = float_opmath(grad.dtype)
    rows = jnp.take(weight, indices, axis=0, mode="clip").astype(dt)
    g = jnp.take(grad, offset2bag, axis=0, mode="clip").astype(dt)
    return jnp.where(indices != padding_idx, jnp.sum(g * rows, axis=1), jnp.zeros((), dt))


# ---- padding and pixel shuffle ------------------------------------------------------------

def _pad_index(n, lo, hi, mode):
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        i = (n - 1) - np.abs((n - 1) - i)
    return np.clip(i, 0, n - 1)


def _pad(x, padding, mode):
    """Gathers along each padded dim; padding is (left, right) pairs from the last dim."""
    for k in range(len(padding) // 2):
        ax = x.ndim - 1 - k
        x = jnp.take(x, _pad_index(x.shape[ax], padding[2 * k], padding[2 * k + 1], mode), axis=ax)
    return x


def _pad_backward(grad, x, padding, mode):
    return linear_backward(lambda v: _pad(v, padding, mode), x.shape, grad.dtype)(grad)


for _mode, _ops, _backward_ops in [
        ("reflect", (aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d),
         (aten.reflection_pad1d_backward, aten.reflection_pad2d_backward,
          aten.reflection_pad3d_backward)),
        ("edge", (aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d),
         (aten.replication_pad1d_backward, aten.replication_pad2d_backward,
          aten.replication_pad3d_backward))]:
    lower(*_ops)(lambda x, padding, _m=_mode: _pad(x, padding, _m))
    lower(*_backward_ops)(lambda grad, x, padding, _m=_mode: _pad_backward(grad, x, padding, _m))


@lower(aten.pixel_shuffle.default)
def pixel_shuffle(x, r):
    *lead, c, h, w = x.shape
    k = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    y = jnp.transpose(y, tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return y.reshape(*lead, c // (r * r), h * r, w * r)


@lower(aten.pixel_unshuffle.default)
def pixel_unshuffle(x, r):
    *lead, c, h, w = x.shape
    k = len(lead)
    y = x.reshape(*lead, c, h // r, r, w // r, r)
    y = jnp.transpose(y, tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return y.reshape(*lead, c * r * r, h // r, w // r)


# ---- attention -------------------------------------------------------------------------------

def _flash_attention_cpu(q, k, v, is_causal, attn_mask, scale):
    """(output, logsumexp of the scores per query) of PyTorch's CPU flash attention, computed
    in the op-math dtype; rows whose every score is masked give 0 (as PyTorch's kernel does)."""
    dt = float_opmath(q.dtype)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = jnp.einsum("...le,...se->...ls", q.astype(dt), k.astype(dt)) * dt.type(scale)
    if is_causal:
        scores = jnp.where(jnp.tri(*scores.shape[-2:], dtype=bool), scores, -jnp.inf)
    if attn_mask is not None:  # float only (PyTorch's CPU kernel refuses others, at the op)
        scores = scores + attn_mask.astype(dt)
    lse = jax.scipy.special.logsumexp(scores, axis=-1)
    weights = jnp.where(jnp.isneginf(lse)[..., None], 0, jnp.exp(scores - lse[..., None]))
    return jnp.einsum("...ls,...se->...le", weights, v.astype(dt)).astype(q.dtype), lse


def _no_dropout(dropout_p):
    if dropout_p:
        raise NotImplementedError("_scaled_dot_product_flash_attention_for_cpu with dropout is "
                                  "not lowered on XLA; use scaled_dot_product_attention")


@lower(aten._scaled_dot_product_flash_attention_for_cpu.default)
def flash_attention_cpu(q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    _no_dropout(dropout_p)
    return _flash_attention_cpu(q, k, v, is_causal, attn_mask, scale)


@lower(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def flash_attention_cpu_backward(grad, q, k, v, out, lse, dropout_p, is_causal, attn_mask=None,
                                 scale=None):
    _no_dropout(dropout_p)
    _, pullback = jax.vjp(
        lambda a, b, c: _flash_attention_cpu(a, b, c, is_causal, attn_mask, scale)[0], q, k, v)
    return pullback(grad.astype(out.dtype))
