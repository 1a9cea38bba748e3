"""gradient_accumulation: the steps of one optimizer update, over the leading dimension of
the inputs, in one graph.

torch_xla traces the step once and runs it in an XLA While loop. Here the step is traced
once per iteration into the same graph (unrolled): the results are the same, the graph and
its compilation grow with the number of steps.
"""
import torch


def gradient_accumulation(train_step, iterable_tensors, model, *carried_tensors):
    """Runs `train_step(*slices, *carried)` for each index i of the leading dimension of
    `iterable_tensors` (slices: `t[i]` of each), with backward of loss / steps each time.

    `train_step` returns the loss, or `(loss, *new_carried_tensors)` when there are carried
    tensors, which go to the next step. The gradients of the mean loss over the steps are
    added to the parameters' `.grad`. Returns the mean loss (float32), and after it the
    carried tensors of the last step, if any.
    """
    if not iterable_tensors:
        raise ValueError("iterable_tensors cannot be empty")
    steps = iterable_tensors[0].size(0)
    for i, t in enumerate(iterable_tensors):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"Element {i} of iterable_tensors is not a tensor")
        if t.numel() == 0:
            raise ValueError(f"Element {i} of iterable_tensors is empty")
        if t.size(0) != steps:
            raise ValueError(f"Element {i} of iterable_tensors has inconsistent first dimension")
    params = [p for p in model.parameters() if p.requires_grad]
    earlier = [p.grad for p in params]
    for p in params:
        p.grad = None
    carried, total = list(carried_tensors), None
    for i in range(steps):
        result = train_step(*(t[i] for t in iterable_tensors), *carried)
        if carried_tensors:
            loss, *carried = result
        else:
            loss = result
        loss = loss / steps
        loss.backward()
        total = loss.detach().float() if total is None else total + loss.detach().float()
    for p, grad in zip(params, earlier):
        if grad is not None and p.grad is not None:
            p.grad = grad.add_(p.grad)
        elif grad is not None:
            p.grad = grad
    return (total, *carried) if carried_tensors else total
