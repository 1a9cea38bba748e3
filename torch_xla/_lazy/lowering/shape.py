"""Shape ops: the functional copies of views that functionalization emits, splits,
concatenation, the reorderings of elements (flip, roll, repeat, pad), and resize."""
import math

import jax
import jax.numpy as jnp
import numpy as np

from ..base import jax_compat
from ..runtime import pjrt
from . import aten, lower, lower_on_demand
from ._types import cast, result_type


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


@lower(aten.select_copy.int, aten.select.int, parameters=("index",))
def select(x, dim, index):
    """One dynamic slice at the index (a program parameter on the lazy path: reading each
    row of a tensor, or row `i` of step `i`, is one program), made non-negative: the engine
    has refused an index out of range (`engine_ops.indexing`); no gather, no call (a stack's
    backward selects each of its inputs' gradients: a scanned model's depth of them)."""
    n = x.shape[dim]
    if not n:
        return jnp.take(x, index, axis=dim)
    start = jax.lax.rem(index + n, n)
    return jax.lax.squeeze(jax.lax.dynamic_slice_in_dim(x, start, 1, dim % x.ndim,
                                                        allow_negative_indices=False), (dim % x.ndim,))


@lower(aten.slice_copy.Tensor, aten.slice.Tensor)
def slice_(x, dim=0, start=None, end=None, step=1):
    n = x.shape[dim]
    if not isinstance(n, int):  # a symbolic size (an export's dynamic dimension)
        return jax.lax.slice_in_dim(x, _bound(start, n, 0), _bound(end, n, n), step, dim % x.ndim)
    start, end, _ = slice(start, end, step).indices(n)
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(start, max(start, end), step)
    return x[tuple(idx)]


def _bound(i, n, default):
    """A slice bound `i` (int or None) clamped to [0, n] for a symbolic size `n`."""
    if i is None:
        return default
    if i < 0:
        return jax_compat.max_dim(n + i, 0)
    return jax_compat.min_dim(n, i)


@lower(aten.cat.default)
def cat(tensors, dim=0):
    """PyTorch promotes across all inputs, and skips legacy empty 1-d ones of any rank."""
    dtype = result_type(*tensors)
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    return jnp.concatenate([cast(t, dtype) for t in kept], axis=dim % kept[0].ndim)


@lower(aten.stack.default)
def stack(tensors, dim=0):
    dtype = result_type(*tensors)
    return jnp.stack([cast(t, dtype) for t in tensors], axis=dim % (tensors[0].ndim + 1))


def _split_at(x, sizes, dim):
    dim = dim % max(x.ndim, 1)
    bounds = np.cumsum([0] + list(sizes))
    return tuple(jax.lax.slice_in_dim(x, int(a), int(b), axis=dim) for a, b in zip(bounds, bounds[1:]))


@lower(aten.split_with_sizes_copy.default, aten.split_with_sizes.default)
def split_with_sizes(x, split_sizes, dim=0):
    return _split_at(x, split_sizes, dim)


@lower(aten.split_copy.Tensor, aten.split.Tensor)
def split(x, split_size, dim=0):
    n = x.shape[dim % x.ndim]
    sizes = [min(split_size, n - i) for i in range(0, n, split_size)] if split_size else [0]
    return _split_at(x, sizes or [0], dim)


@lower(aten.unbind_copy.int, aten.unbind.int)
def unbind(x, dim=0):
    dim = dim % x.ndim
    return tuple(jax.lax.index_in_dim(x, i, dim, keepdims=False) for i in range(x.shape[dim]))


@lower(aten.flip.default)
def flip(x, dims):
    return jnp.flip(x, tuple(d % x.ndim for d in dims)) if x.ndim and dims else x


@lower(aten.roll.default)
def roll(x, shifts, dims=()):
    if not dims:
        return jnp.roll(x.reshape(-1), shifts[0]).reshape(x.shape)
    return jnp.roll(x, tuple(shifts), tuple(d % x.ndim for d in dims))


@lower(aten.repeat.default)
def repeat(x, repeats):
    x = x.reshape((1,) * (len(repeats) - x.ndim) + x.shape)
    return jnp.tile(x, tuple(repeats))


@lower(aten.repeat_interleave.self_int)
def repeat_interleave(x, repeats, dim=None, output_size=None):
    if dim is None:
        return jnp.repeat(x.reshape(-1), repeats)
    return jnp.repeat(x, repeats, axis=dim % max(x.ndim, 1))


@lower(aten.repeat_interleave.Tensor, dynamic_shape=True)
def repeat_interleave_indices(repeats, output_size=None):
    """The indices torch.repeat_interleave(x, tensor_repeats) selects: i repeated repeats[i]
    times (its length depends on the values)."""
    repeats = repeats.reshape(-1)
    return jnp.repeat(jnp.arange(repeats.shape[0], dtype=np.int64), repeats,
                      total_repeat_length=output_size)


@lower(aten.constant_pad_nd.default)
def constant_pad_nd(x, pad, value=0):
    """pad lists (before, after) pairs from the last dim backwards; negative pads crop."""
    config = [(0, 0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        config[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return jax.lax.pad(x, cast(value, x.dtype), config)


@lower(aten.view_as_real_copy.default, aten.view_as_real.default)
def view_as_real(x):
    return jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)


@lower(aten.view_as_complex_copy.default, aten.view_as_complex.default)
def view_as_complex(x):
    return jax.lax.complex(x[..., 0], x[..., 1])


@lower(aten.complex.default)
def complex_(real, imag):
    """(Its decomposition writes through views of a new tensor, which only works above
    functionalization.) The parts broadcast, as in PyTorch."""
    return jax.lax.complex(*jnp.broadcast_arrays(real, imag))


@lower(aten.polar.default)
def polar(magnitude, angle):
    return jax.lax.complex(magnitude * jnp.cos(angle), magnitude * jnp.sin(angle))


@lower(aten.view_copy.dtype, aten.view.dtype)
def view_dtype(x, dtype):
    """Reinterprets the bytes: the last dim scales by the ratio of element sizes."""
    dtype = pjrt.to_jax_dtype(dtype)
    old, new = np.dtype(x.dtype).itemsize, np.dtype(dtype).itemsize
    if x.dtype == np.bool_ or dtype == np.bool_:
        x = x.astype(np.uint8) if x.dtype == np.bool_ else x
        out = jax.lax.bitcast_convert_type(x, np.uint8 if dtype == np.bool_ else dtype)
        return out.astype(bool) if dtype == np.bool_ else out
    if old == new:
        return jax.lax.bitcast_convert_type(x, dtype)
    if old > new:
        out = jax.lax.bitcast_convert_type(x, dtype)  # adds a trailing dim of old // new
        return out.reshape(x.shape[:-1] + (-1,)) if x.ndim else out.reshape(-1)
    x = x.reshape(x.shape[:-1] + (x.shape[-1] * old // new, new // old))
    return jax.lax.bitcast_convert_type(x, dtype)


@lower(aten.resize.default)
def resize(x, size, memory_format=None):
    """The functional `resize_`: x's leading elements (row-major) in the new shape; elements
    beyond x's are uninitialised in PyTorch, zeros here."""
    n = math.prod(size)
    flat = x.reshape(-1)[:n]
    return jnp.pad(flat, (0, n - flat.shape[0])).reshape(tuple(size))


@lower_on_demand("xla::dynamic_expand")
def dynamic_expand(x, size, src, src_dim, target_dim):
    """`expand` whose dim `target_dim` takes the size of `src`'s dim `src_dim` (symbolic in an
    export with dynamic dimensions; `torch_xla.experimental.xla_dynamic_reshape_ops`)."""
    size = list(size)
    size[target_dim] = src.shape[src_dim]
    return expand(x, size)


@lower_on_demand("xla::dynamic_view")
def dynamic_view(x, size, src, src_dim, target_dim, mul_scaler):
    """`view` whose dim `target_dim` is `src`'s dim `src_dim` times `mul_scaler`."""
    size = list(size)
    size[target_dim] = src.shape[src_dim] * int(mul_scaler)
    return view(x, size)
