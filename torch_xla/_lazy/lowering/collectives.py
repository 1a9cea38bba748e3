"""Collectives inside the compiled graph: lowerings over the replicas' mesh axis.

These lower the ops `xla::all_reduce` and its kin (defined in `trace/collective_ops`, which
`xm.all_reduce` and its kin call, eagerly or inside `torch.compile`); each takes the op's
arguments as its schema orders them. A graph holding one is compiled as one SPMD program
over every replica's device (`launch/replica_program`), where each lowering calls a jax.lax
collective over the axis `pjrt.REPLICA_AXIS`. Mesh position = global ordinal, so replica
groups name positions on that axis, and the axis size is the world size. Without groups
the native psum/all_gather/psum_scatter/all_to_all run; with groups (shard_map has no
axis_index_groups) every replica gathers all values and keeps its group's.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..runtime.pjrt import REPLICA_AXIS as AXIS
from . import Lowering


def _group_of(groups, world):
    """For each ordinal: the members of its group (itself alone if it is in none)."""
    table = [(i,) for i in range(world)]
    for g in groups:
        for r in g:
            table[r] = g
    return table


def _my(table):
    """Row `axis_index` of a constant per-ordinal table."""
    return jnp.asarray(np.asarray(table))[lax.axis_index(AXIS)]


def _identity(op, dtype):
    if op in ("sum", "or"):
        return np.zeros((), dtype)
    if op in ("mul",):
        return np.ones((), dtype)
    if op == "and":
        return np.array(True) if dtype == np.bool_ else np.array(-1, dtype)
    info = jnp.finfo(dtype) if jnp.issubdtype(dtype, jnp.inexact) else jnp.iinfo(dtype)
    if op == "max":
        return np.array(-np.inf if jnp.issubdtype(dtype, jnp.inexact) else info.min, dtype)
    return np.array(np.inf if jnp.issubdtype(dtype, jnp.inexact) else info.max, dtype)


def _reduce(x, op, groups, world):
    if groups is None and op in ("sum", "max", "min") and x.dtype != np.bool_:
        return {"sum": lax.psum, "max": lax.pmax, "min": lax.pmin}[op](x, AXIS)
    members = _group_of(groups or (tuple(range(world)),), world)
    mask = _my([[j in members[i] for j in range(world)] for i in range(world)])
    every = lax.all_gather(x, AXIS)
    ident = _identity(op, x.dtype)
    y = jnp.where(mask.reshape((world,) + (1,) * x.ndim), every, ident)
    if op == "sum":
        return jnp.sum(y, axis=0, dtype=x.dtype)
    if op == "mul":
        return jnp.prod(y, axis=0, dtype=x.dtype)
    if op == "max":
        return jnp.max(y, axis=0)
    if op == "min":
        return jnp.min(y, axis=0)
    fn = lax.bitwise_and if op == "and" else lax.bitwise_or
    return lax.reduce(y, jnp.asarray(ident, x.dtype), fn, (0,))


def _scaled(x, scale):
    return x if scale == 1.0 else x * scale


def _world():
    return lax.axis_size(AXIS)


def _all_reduce(xs, reduce_type, scale, groups):
    world = _world()
    return tuple(_scaled(_reduce(x, reduce_type, groups or None, world), scale) for x in xs)


def _gather_group(x, groups, world):
    """(group size, *x.shape): the values of this replica's group, in group order."""
    every = lax.all_gather(x, AXIS)
    return jnp.take(every, _my(_group_of(groups, world)), axis=0)


def _merge(stacked, dim):
    """Concatenates the leading axis of `stacked` into axis `dim` of its elements."""
    moved = jnp.moveaxis(stacked, 0, dim)
    shape = moved.shape[:dim] + (moved.shape[dim] * moved.shape[dim + 1],) + moved.shape[dim + 2:]
    return moved.reshape(shape)


def _all_gather(x, dim, groups):
    if not groups:
        return lax.all_gather(x, AXIS, axis=dim, tiled=True)
    return _merge(_gather_group(x, groups, _world()), dim)


def _position(groups, world):
    """This replica's position in its group."""
    members = _group_of(groups, world)
    return _my([members[i].index(i) for i in range(world)])


def _reduce_scatter(x, reduce_type, scale, dim, shard_count, groups):
    groups, world = groups or None, _world()
    if groups is None and reduce_type == "sum":
        return _scaled(lax.psum_scatter(x, AXIS, scatter_dimension=dim, tiled=True), scale)
    chunk = x.shape[dim] // shard_count
    reduced = _reduce(x, reduce_type, groups, world)
    pos = _position(groups or (tuple(range(world)),), world)
    return _scaled(lax.dynamic_slice_in_dim(reduced, pos * chunk, chunk, axis=dim), scale)


def _all_to_all(x, split_dim, concat_dim, split_count, groups):
    if not groups:
        return lax.all_to_all(x, AXIS, split_dim, concat_dim, tiled=True)
    world = _world()
    chunk = x.shape[split_dim] // split_count
    mine = lax.dynamic_slice_in_dim(_gather_group(x, groups, world), _position(groups, world) * chunk,
                                    chunk, axis=split_dim + 1)
    return _merge(mine, concat_dim)


def _collective_permute(x, pairs):
    return lax.ppermute(x, AXIS, perm=pairs)


def _lowering(name, fn, collective=True):
    return Lowering(name if "::" in name else f"xla::{name}", fn, static_scalars=True, rng=False,
                    dynamic_shape=False, collective=collective)


# PyTorch's traceable collectives (`_c10d_functional`), over every replica.

def _c10d_all_reduce(x, reduce_op, group_name):
    return _all_reduce((x,), reduce_op, 1.0, ())[0]


def _c10d_all_gather(x, group_size, group_name):
    return _all_gather(x, 0, ())


def _c10d_reduce_scatter(x, reduce_op, group_size, group_name):
    return _reduce_scatter(x, reduce_op, 1.0, 0, group_size, ())


def _c10d_all_to_all(x, output_split_sizes, input_split_sizes, group_name):
    return _all_to_all(x, 0, 0, _world(), ())


def _c10d_broadcast(x, src, group_name):
    return lax.all_gather(x, AXIS)[src]


ALL_REDUCE = _lowering("all_reduce", _all_reduce)
ALL_GATHER = _lowering("all_gather", _all_gather)
REDUCE_SCATTER = _lowering("reduce_scatter", _reduce_scatter)
ALL_TO_ALL = _lowering("all_to_all", _all_to_all)
COLLECTIVE_PERMUTE = _lowering("collective_permute", _collective_permute)
C10D_ALL_REDUCE = _lowering("_c10d_functional::all_reduce", _c10d_all_reduce)
C10D_ALL_GATHER = _lowering("_c10d_functional::all_gather_into_tensor", _c10d_all_gather)
C10D_REDUCE_SCATTER = _lowering("_c10d_functional::reduce_scatter_tensor", _c10d_reduce_scatter)
C10D_ALL_TO_ALL = _lowering("_c10d_functional::all_to_all_single", _c10d_all_to_all)
C10D_BROADCAST = _lowering("_c10d_functional::broadcast", _c10d_broadcast)
# An eager collective's result is ready when it is read: waiting is the value itself.
WAIT_TENSOR = _lowering("_c10d_functional::wait_tensor", lambda x: x, collective=False)
