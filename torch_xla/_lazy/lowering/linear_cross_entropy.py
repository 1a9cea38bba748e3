"""`F.linear_cross_entropy`'s chunked ops (torch_nn::_linear_cross_entropy_batch_chunked*):
cross entropy of the class indices `target` against the logits input @ linear_weightᵀ
(+ linear_bias), with class weights and `ignore_index`.

PyTorch splits the batch into chunks so that the (N, C) logits never exist at once on its
devices; one XLA program needs no such loop (XLA fuses the product, the softmax and the
reductions and plans the memory), so these lowerings compute the loss of the whole batch
in `acc_dtype`. The mean/sum op returns its gradients with the loss (PyTorch's backward
only scales them); they are jax's derivatives of that loss. The ops exist once PyTorch's
module defining them is imported, so they are registered on demand.
"""
import jax
import jax.numpy as jnp
import torch

from ..runtime import pjrt
from . import lower_on_demand
from .linalg import matmul_precision
from .meta_stand_ins import meta_stand_in

_SCALAR = "torch_nn::_linear_cross_entropy_batch_chunked"
_NONE = "torch_nn::_linear_cross_entropy_batch_chunked_no_reduction"


def _per_sample(x, w, b, target, weight, ignore_index):
    """(-log softmax(logits)[target] per sample, its weight: weight[target], 0 where the
    target is ignore_index)."""
    logits = jnp.matmul(x, w.T, precision=matmul_precision())
    if b is not None:
        logits = logits + b
    ignored = target == ignore_index
    t = jnp.where(ignored, 0, target)
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits, -1), t[:, None], -1)[:, 0]
    wt = jnp.ones(t.shape, x.dtype) if weight is None else weight.astype(x.dtype)[t]
    return nll, jnp.where(ignored, jnp.zeros((), x.dtype), wt)


@lower_on_demand(_SCALAR, static_scalars=True)
def chunked(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
            label_smoothing, batch_chunk_size, acc_policy, acc_dtype, allow_retain_graph,
            compute_input_grad, compute_linear_weight_grad, compute_linear_bias_grad):
    """(loss, d loss/d input, d loss/d linear_weight, d loss/d linear_bias); a gradient not
    asked for is empty, as PyTorch's."""
    acc = pjrt.to_jax_dtype(acc_dtype)

    def loss(x, w, b):
        nll, wt = _per_sample(x, w, b, target, weight, ignore_index)
        total = jnp.sum(nll * wt)
        return total / jnp.sum(wt) if reduction == "mean" else total

    args = (input.astype(acc), linear_weight.astype(acc),
            None if linear_bias is None else linear_bias.astype(acc))
    wanted = [compute_input_grad, compute_linear_weight_grad,
              compute_linear_bias_grad and linear_bias is not None]
    argnums = tuple(i for i, want in enumerate(wanted) if want)
    if argnums:
        value, grads = jax.value_and_grad(loss, argnums=argnums)(*args)
        grads = dict(zip(argnums, grads))
    else:
        value, grads = loss(*args), {}
    empty = [jnp.zeros((0, 0), input.dtype), jnp.zeros((0, 0), input.dtype), jnp.zeros((0,), input.dtype)]
    return (value,) + tuple(grads.get(i, empty[i]) for i in range(3))


@lower_on_demand(_NONE, static_scalars=True)
def chunked_no_reduction(input, linear_weight, target, linear_bias, weight, ignore_index,
                         batch_chunk_size, acc_policy, acc_dtype):
    acc = pjrt.to_jax_dtype(acc_dtype)
    nll, wt = _per_sample(input.astype(acc), linear_weight.astype(acc),
                          None if linear_bias is None else linear_bias.astype(acc),
                          target, weight, ignore_index)
    return nll * wt


def _check(input, linear_weight, target, linear_bias, reduction, label_smoothing):
    """The checks PyTorch's chunked kernel makes and its meta kernel does not."""
    if target.dtype != torch.int64:
        raise TypeError(f"linear_cross_entropy: target dtype must be torch.int64, got {target.dtype}.")
    if label_smoothing > 0.0:
        raise NotImplementedError("linear_cross_entropy does not support label smoothing")
    if reduction not in {"mean", "sum", "none"}:
        raise NotImplementedError(f"linear_cross_entropy does not support {reduction=}")
    if linear_bias is not None and linear_bias.shape != linear_weight.shape[:-1]:
        raise RuntimeError("linear_cross_entropy: expected linear_bias shape "
                           f"{tuple(linear_weight.shape[:-1])}, got {tuple(linear_bias.shape)}.")


def _checked(name, reduction_at, smoothing_at):
    """A meta kernel: `_check`, then PyTorch's own (its fake implementation)."""
    def stand_in(*args):
        op = getattr(torch.ops.torch_nn, name.split("::")[1]).default
        reduction = args[reduction_at] if reduction_at is not None else "none"
        smoothing = args[smoothing_at] if smoothing_at is not None else 0.0
        _check(args[0], args[1], args[2], args[3], reduction, smoothing)
        return op(*args)
    return stand_in


meta_stand_in(_SCALAR)(_checked(_SCALAR, 5, 7))
meta_stand_in(_NONE)(_checked(_NONE, None, None))
