"""Shape ops: the functional copies of views that functionalization emits, and concatenation."""
import jax.numpy as jnp

from . import aten, lower


def _infer(size, numel):
    size = list(size)
    if -1 in size:
        i = size.index(-1)
        rest = 1
        for j, s in enumerate(size):
            if j != i:
                rest *= s
        size[i] = numel // rest if rest else 0
    return tuple(size)


@lower(aten.view_copy.default, aten.view.default, aten._unsafe_view.default, aten.reshape.default,
       aten._reshape_alias_copy.default)
def view(x, size, *_):
    return jnp.reshape(x, _infer(size, x.size))


@lower(aten.t_copy.default, aten.t.default)
def t(x):
    return x.T if x.ndim == 2 else x


@lower(aten.permute_copy.default, aten.permute.default)
def permute(x, dims):
    return jnp.transpose(x, [d % x.ndim if x.ndim else 0 for d in dims])


@lower(aten.transpose_copy.int, aten.transpose.int)
def transpose(x, d0, d1):
    return jnp.swapaxes(x, d0, d1) if x.ndim else x


@lower(aten.expand_copy.default, aten.expand.default)
def expand(x, size, implicit=False):
    lead = len(size) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return jnp.broadcast_to(x, shape)


@lower(aten.unsqueeze_copy.default, aten.unsqueeze.default)
def unsqueeze(x, dim):
    return jnp.expand_dims(x, dim % (x.ndim + 1))


@lower(aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.squeeze_copy.dims,
       aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(x, dim=None):
    if x.ndim == 0:
        return x
    dims = range(x.ndim) if dim is None else ([dim] if isinstance(dim, int) else dim)
    dims = tuple(d % x.ndim for d in dims if x.shape[d % x.ndim] == 1)
    return jnp.squeeze(x, dims) if dims else x


@lower(aten.select_copy.int, aten.select.int)
def select(x, dim, index):
    return jnp.take(x, index % x.shape[dim] if x.shape[dim] else index, axis=dim)


@lower(aten.slice_copy.Tensor, aten.slice.Tensor)
def slice_(x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim]
    start, end, _ = slice(start, end, step).indices(n)
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(start, max(start, end), step)
    return x[tuple(idx)]


@lower(aten.cat.default)
def cat(tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    return jnp.concatenate(tensors, axis=dim % tensors[0].ndim)
