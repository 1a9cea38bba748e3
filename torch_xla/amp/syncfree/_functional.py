"""The update rules of the sync-free optimizers, as tensor ops: each new value is chosen
against the old one by `found_inf` on the device, so skipping costs no host read."""
import torch


def step(base_step, closure, found_inf, update):
    """An optimizer's `step(closure, found_inf)`: without `found_inf`, the base optimizer's
    `base_step`; with it, the closure's loss (computed with gradients on) after
    `update(found_inf)` updated the parameters, skipping on the device."""
    if found_inf is None:
        return base_step(closure=closure)
    loss = None
    if closure is not None:
        with torch.enable_grad():
            loss = closure()
    update(found_inf)
    return loss


def _keep_if(skip, old, new):
    """`old` updated in place to `new` unless `skip` (a 0-d bool tensor)."""
    old.copy_(torch.where(skip, old, new))


def _skip(found_inf):
    if found_inf.dim() != 0:
        raise ValueError("The found_inf tensor has to be scalar type")
    return found_inf != 0


def adam_step(found_inf, state_steps, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *,
              amsgrad, beta1, beta2, lr, weight_decay, eps, maximize, use_adamw):
    """torch.optim.Adam's (or, `use_adamw`, AdamW's) update of each parameter, skipped when
    `found_inf` is nonzero; the step counters are device tensors."""
    skip = _skip(found_inf)
    for param, grad, exp_avg, exp_avg_sq, max_sq, step in zip(
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps):
        grad = -grad if maximize else grad
        value = param
        if weight_decay:
            if use_adamw:
                value = value * (1 - lr * weight_decay)
            else:
                grad = grad + weight_decay * param
        new_step = step + 1
        new_avg = exp_avg.lerp(grad, 1 - beta1)
        new_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
        correction1 = 1 - torch.pow(beta1, new_step)
        correction2_sqrt = torch.sqrt(1 - torch.pow(beta2, new_step))
        if amsgrad:
            new_max = torch.maximum(max_sq, new_sq)
            _keep_if(skip, max_sq, new_max)
            denom = new_max.sqrt() / correction2_sqrt + eps
        else:
            denom = new_sq.sqrt() / correction2_sqrt + eps
        _keep_if(skip, param, value - (lr / correction1) * new_avg / denom)
        _keep_if(skip, exp_avg, new_avg)
        _keep_if(skip, exp_avg_sq, new_sq)
        _keep_if(skip, step, new_step)


def sgd_step(found_inf, state_steps, params, d_p_list, momentum_buffer_list, *, weight_decay,
             momentum, lr, dampening, nesterov, maximize):
    """torch.optim.SGD's update of each parameter, skipped when `found_inf` is nonzero. The
    momentum buffer takes the first (unskipped) step's gradient, as torch's does."""
    skip = _skip(found_inf)
    for param, d_p, buf, step in zip(params, d_p_list, momentum_buffer_list, state_steps):
        d_p = -d_p if maximize else d_p
        if weight_decay:
            d_p = d_p + weight_decay * param
        if momentum:
            new_buf = torch.where(step == 0, d_p, buf * momentum + (1 - dampening) * d_p)
            _keep_if(skip, buf, new_buf)
            d_p = d_p + momentum * new_buf if nesterov else new_buf
        _keep_if(skip, param, param - lr * d_p)
        _keep_if(skip, step, step + 1)
