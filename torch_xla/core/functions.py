"""torch_xla.core.functions (imported as `xf`): collectives that autograd differentiates, and
layers built on them.

The gradients are those of the collective taken over all replicas of the group, as for
`torch.distributed.nn.functional`: the replicas' losses add up to the training loss, so the
gradient reaching a replica's input sums what every replica's loss sends back to it (an
all_reduce of the incoming gradients for all_reduce, a reduce_scatter for all_gather, an
all_gather for reduce_scatter). torch_xla 2.9 keeps only this replica's own share instead.
"""
import torch

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def _group_position(groups):
    """(size, position) of this replica in its group."""
    ordinal = xr.global_ordinal()
    for group in groups or ():
        if ordinal in group:
            return len(group), list(group).index(ordinal)
    return xr.world_size(), ordinal


class AllReduce(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, reduce_type, scale, groups):
        if reduce_type not in (xm.REDUCE_SUM, xm.REDUCE_MUL, xm.REDUCE_MIN, xm.REDUCE_MAX):
            raise RuntimeError(f"all_reduce with autograd: {reduce_type!r} has no gradient "
                               f"(sum, mul, min and max have)")
        ctx.reduce_type, ctx.scale, ctx.groups = reduce_type, scale, groups
        output = xm.all_reduce(reduce_type, input, scale=scale, groups=groups)
        ctx.save_for_backward(input, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output = ctx.saved_tensors
        grad = xm.all_reduce(xm.REDUCE_SUM, grad_output, scale=ctx.scale, groups=ctx.groups)
        if ctx.reduce_type == xm.REDUCE_MUL:  # d(prod)/dx = prod / x
            grad = grad * torch.where(input != 0, output / ctx.scale / input, torch.zeros_like(input))
        elif ctx.reduce_type in (xm.REDUCE_MIN, xm.REDUCE_MAX):
            grad = torch.where(input == output / ctx.scale, grad, torch.zeros_like(grad))
        return grad, None, None, None


def all_reduce(reduce_type, value, scale=1.0, groups=None):
    """`xm.all_reduce` of one tensor (sum, mul, min or max), differentiable."""
    return AllReduce.apply(value, reduce_type, scale, groups)


class AllGather(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, dim, groups):
        ctx.dim, ctx.groups = dim % input.dim(), groups
        return xm.all_gather(input, dim=dim, groups=groups)

    @staticmethod
    def backward(ctx, grad_output):
        size, _ = _group_position(ctx.groups)
        return xm.reduce_scatter(xm.REDUCE_SUM, grad_output, 1.0, ctx.dim, size, groups=ctx.groups), None, None


def all_gather(value, dim=0, groups=None):
    """`xm.all_gather` along `dim`, differentiable."""
    return AllGather.apply(value, dim, groups)


class ReduceScatter(torch.autograd.Function):

    @staticmethod
    def forward(ctx, input, reduce_type, scale, scatter_dim, shard_count, groups):
        if reduce_type != xm.REDUCE_SUM:
            raise RuntimeError(f"reduce_scatter with autograd: only 'sum' has a gradient, got {reduce_type!r}")
        ctx.scale, ctx.dim, ctx.groups = scale, scatter_dim % input.dim(), groups
        return xm.reduce_scatter(reduce_type, input, scale, scatter_dim, shard_count, groups=groups)

    @staticmethod
    def backward(ctx, grad_output):
        grad = xm.all_gather(grad_output, dim=ctx.dim, groups=ctx.groups)
        return grad * ctx.scale if ctx.scale != 1.0 else grad, None, None, None, None, None


def reduce_scatter(reduce_type, value, scale, scatter_dim, shard_count, groups=None):
    """`xm.reduce_scatter` ('sum') of one tensor, differentiable."""
    return ReduceScatter.apply(value, reduce_type, scale, scatter_dim, shard_count, groups)


class AllReduceSumLayer(torch.autograd.Function):
    """Sum over all replicas forward, and of the gradients backward."""

    @staticmethod
    def forward(ctx, x):
        return xm.all_reduce(xm.REDUCE_SUM, x)

    @staticmethod
    def backward(ctx, grad_output):
        return xm.all_reduce(xm.REDUCE_SUM, grad_output)


def distributed_mm(w, x, split=1):
    """`W @ X` with W's columns sharded over the replicas: each replica holds `w` (N x Ko),
    its Ko columns of W, and the whole `x` (Ko * world x M); returns W @ X (N x M), the same
    on every replica. `split` cuts M in that many pieces, gathered one at a time."""
    world, ordinal = xr.world_size(), xr.global_ordinal()
    if x.size(0) != w.size(1) * world:
        raise ValueError(f"distributed_mm: x has {x.size(0)} rows, expected {w.size(1)} x {world} replicas")
    if x.size(1) % split:
        raise ValueError(f"distributed_mm: split {split} does not divide the {x.size(1)} columns of x")
    results = []
    for piece in torch.split(x, x.size(1) // split, dim=1):
        gathered = all_gather(piece, dim=1)                                   # (Ko*W) x (M*W)
        mine = torch.narrow(gathered, 0, ordinal * w.size(1), w.size(1))     # Ko x (M*W)
        summed = all_reduce(xm.REDUCE_SUM, w @ mine)                          # N x (M*W)
        results.append(torch.narrow(summed, 1, ordinal * piece.size(1), piece.size(1)))
    return torch.cat(results, dim=1) if len(results) > 1 else results[0]


class SyncBatchNorm(torch.nn.Module):
    """Batch normalization whose batch statistics are those of the batches of all replicas
    together (inputs of 2 to 5 dimensions, channels in dimension 1)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = torch.nn.Parameter(torch.ones(num_features))
        self.bias = torch.nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        if not 2 <= batch.dim() <= 5 or batch.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm({self.num_features}): expected 2 to 5 dimensions with "
                             f"{self.num_features} channels in dimension 1, got {list(batch.shape)}")
        dims = [d for d in range(batch.dim()) if d != 1]
        if self.training:
            scale = 1.0 / xr.world_size()
            mean = AllReduceSumLayer.apply(batch.mean(dim=dims)) * scale
            var = AllReduceSumLayer.apply((batch * batch).mean(dim=dims)) * scale - mean * mean
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)
        else:
            mean, var = self.running_mean, self.running_var
        shape = [1, -1] + [1] * (batch.dim() - 2)
        return ((batch - mean.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
                * self.weight.view(shape) + self.bias.view(shape))

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"
