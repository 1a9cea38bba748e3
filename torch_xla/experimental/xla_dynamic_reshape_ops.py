"""`torch.ops.xla.dynamic_expand` and `torch.ops.xla.dynamic_view`, as in torch_xla: `expand`
and `view` whose one dynamic dimension is named by where it comes from (a dim of another
tensor, times a factor for a view) rather than by a size. The export passes of
`unbounded_dynamism_export` put them in place of the ATen ops on symbolic sizes; they run
on any device (CPU: through `expand`/`view`; XLA: the engine's lowering, a symbolic
dimension of the module in an export)."""
import torch

_lib = torch.library.Library("xla", "FRAGMENT")
_lib.define("dynamic_expand(Tensor input, SymInt[] size, Tensor src_tensor, int src_dim, "
            "int target_dim) -> Tensor")
_lib.define("dynamic_view(Tensor input, SymInt[] size, Tensor src_tensor, int src_dim, "
            "int target_dim, float mul_scaler) -> Tensor")


def _expanded_size(size, src_tensor, src_dim, target_dim):
    size = list(size)
    size[target_dim] = src_tensor.shape[src_dim]
    return size


def _viewed_size(size, src_tensor, src_dim, target_dim, mul_scaler):
    size = list(size)
    size[target_dim] = src_tensor.shape[src_dim] * int(mul_scaler)
    return size


@torch.library.impl(_lib, "dynamic_expand", "CompositeExplicitAutograd")
def dynamic_expand(input, size, src_tensor, src_dim, target_dim):
    """`input.expand(size)` with `size[target_dim]` = `src_tensor.shape[src_dim]`."""
    return input.expand(_expanded_size(size, src_tensor, src_dim, target_dim)).clone()


@torch.library.impl(_lib, "dynamic_view", "CompositeExplicitAutograd")
def dynamic_view(input, size, src_tensor, src_dim, target_dim, mul_scaler):
    """`input.reshape(size)` with `size[target_dim]` = `src_tensor.shape[src_dim] * mul_scaler`."""
    return input.reshape(_viewed_size(size, src_tensor, src_dim, target_dim, mul_scaler)).clone()


@torch.library.register_fake("xla::dynamic_expand", lib=_lib)
def _dynamic_expand_fake(input, size, src_tensor, src_dim, target_dim):
    size = _expanded_size(size, src_tensor, src_dim, target_dim)
    lead = len(size) - input.dim()
    return input.new_empty([input.shape[i - lead] if s == -1 else s for i, s in enumerate(size)])


@torch.library.register_fake("xla::dynamic_view", lib=_lib)
def _dynamic_view_fake(input, size, src_tensor, src_dim, target_dim, mul_scaler):
    return input.reshape(_viewed_size(size, src_tensor, src_dim, target_dim, mul_scaler)).clone()
