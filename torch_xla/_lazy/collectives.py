"""Collectives inside the compiled graph, and the SPMD programs that run them.

A collective (all_reduce, all_gather, ...) is a graph node whose lowering calls a jax.lax
collective over the mesh axis `AXIS`. A graph holding one cannot run on its device alone: it
is compiled as one SPMD program over a 1-D mesh of every replica's device (`jax.shard_map`),
each replica's leaves and scalars assembled into global arrays, and each replica takes back
its own blocks of the outputs. Mesh position = global ordinal, so replica groups name
positions on that axis.

Under xmp.spawn (one process per device) every process calls the program with its block.
With several replicas in one process (DataParallel's threads) the threads meet: each posts
the arguments of its n-th such program, and the last to arrive runs it for all of them and
hands out the outputs.

Groups: without groups the native psum/all_gather/psum_scatter/all_to_all run; with groups
(shard_map has no axis_index_groups) every replica gathers all values and keeps its group's.
"""
import threading

import jax
import jax.numpy as jnp
import numpy as np
import torch
from jax import lax
from jax._src.lax.lax import _convert_element_type
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import metrics, runtime
from .ir import In, Node, Value
from .lowering import Lowering
from .tensor import to_functional, unwrap, wrap

AXIS = "replicas"
REDUCE_TYPES = ("sum", "mul", "and", "or", "min", "max")


# ---- groups ------------------------------------------------------------------------------

def normalize_groups(groups, world, equal_sizes=False):
    """`groups` as a tuple of tuples of ordinals, or None for one group of every replica."""
    if not groups:
        return None
    out = tuple(tuple(int(r) for r in g) for g in groups)
    flat = [r for g in out for r in g]
    if len(set(flat)) != len(flat) or any(not 0 <= r < world for r in flat):
        raise ValueError(f"replica groups {groups} must name distinct ordinals in [0, {world})")
    if equal_sizes and (len(flat) != world or len({len(g) for g in out}) != 1):
        raise ValueError(f"replica groups {groups} must cover all {world} replicas in groups of one size")
    return out


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


# ---- lowerings ---------------------------------------------------------------------------

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


def _all_reduce(*xs, reduce_type, scale, groups, world):
    return tuple(_scaled(_reduce(x, reduce_type, groups, world), scale) for x in xs)


def _gather_group(x, groups, world):
    """(group size, *x.shape): the values of this replica's group, in group order."""
    every = lax.all_gather(x, AXIS)
    return jnp.take(every, _my(_group_of(groups, world)), axis=0)


def _merge(stacked, dim):
    """Concatenates the leading axis of `stacked` into axis `dim` of its elements."""
    moved = jnp.moveaxis(stacked, 0, dim)
    shape = moved.shape[:dim] + (moved.shape[dim] * moved.shape[dim + 1],) + moved.shape[dim + 2:]
    return moved.reshape(shape)


def _all_gather(x, dim, groups, world):
    if groups is None:
        return lax.all_gather(x, AXIS, axis=dim, tiled=True)
    return _merge(_gather_group(x, groups, world), dim)


def _position(groups, world):
    """This replica's position in its group."""
    members = _group_of(groups, world)
    return _my([members[i].index(i) for i in range(world)])


def _reduce_scatter(x, reduce_type, scale, dim, shard_count, groups, world):
    if groups is None and reduce_type == "sum":
        return _scaled(lax.psum_scatter(x, AXIS, scatter_dimension=dim, tiled=True), scale)
    chunk = x.shape[dim] // shard_count
    reduced = _reduce(x, reduce_type, groups, world)
    pos = _position(groups or (tuple(range(world)),), world)
    return _scaled(lax.dynamic_slice_in_dim(reduced, pos * chunk, chunk, axis=dim), scale)


def _all_to_all(x, split_dim, concat_dim, split_count, groups, world):
    if groups is None:
        return lax.all_to_all(x, AXIS, split_dim, concat_dim, tiled=True)
    chunk = x.shape[split_dim] // split_count
    mine = lax.dynamic_slice_in_dim(_gather_group(x, groups, world), _position(groups, world) * chunk,
                                    chunk, axis=split_dim + 1)
    return _merge(mine, concat_dim)


def _collective_permute(x, pairs):
    return lax.ppermute(x, AXIS, perm=pairs)


def _lowering(name, fn):
    return Lowering(f"xla::{name}", fn, static_scalars=True, rng=False, dynamic_shape=False)


ALL_REDUCE = _lowering("all_reduce", _all_reduce)
ALL_GATHER = _lowering("all_gather", _all_gather)
REDUCE_SCATTER = _lowering("reduce_scatter", _reduce_scatter)
ALL_TO_ALL = _lowering("all_to_all", _all_to_all)
COLLECTIVE_PERMUTE = _lowering("collective_permute", _collective_permute)
OPS = frozenset((ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, COLLECTIVE_PERMUTE))


def has_collective(order) -> bool:
    return any(node.op in OPS for node in order)


# ---- building nodes from user tensors ----------------------------------------------------

def apply(op, tensors, avals, **static):
    """Records `op` on `tensors` (user tensors on one XLA device); returns user tensors for its
    outputs with the given (shape, dtype) avals."""
    inner = [unwrap(t) for t in tensors]
    devices = {t._value.device for t in inner}
    if len(devices) != 1:
        raise RuntimeError(f"a collective takes tensors on one XLA device, got xla:{sorted(devices)}")
    template = (tuple(In(i) for i in range(len(inner))), tuple(sorted(static.items())))
    node = Node(op, template, tuple(t._value for t in inner), (), tuple(avals))
    device = devices.pop()
    outs = [wrap(Value(shape, dtype, device, node=node, index=i)) for i, (shape, dtype) in enumerate(avals)]
    # Users hold functional tensors; C++ code below functionalization (DDP's) the inner ones.
    return [to_functional(o) for o in outs] if torch._is_functional_tensor(tensors[0]) else outs


def aval(t: torch.Tensor, shape=None):
    return (tuple(t.shape) if shape is None else tuple(shape), t.dtype)


# ---- running a graph that holds collectives ----------------------------------------------

_programs = {}
_meshes = {}


def _mesh():
    devices = tuple(runtime.replica_mesh_devices())
    mesh = _meshes.get(devices)
    if mesh is None:
        mesh = _meshes[devices] = Mesh(np.array(devices, dtype=object), (AXIS,))
    return mesh


def _weak(block, proto):
    """A replica's scalar from its block, weakly typed again like a Python scalar under jit."""
    x = block.reshape(())
    return x if type(proto) is bool else _convert_element_type(x, x.dtype, weak_type=True)


def _compile(w, mesh, global_args):
    program = w.program
    leaf_shapes = [tuple(a.shape) for a in w.args[0] + w.args[1]]
    protos = w.args[2]

    def body(leaves, scalars):
        leaves = [b.reshape(()) if not s else b for b, s in zip(leaves, leaf_shapes)]
        scalars = [_weak(b, p) for b, p in zip(scalars, protos)]
        outs = program.run_traced(tuple(leaves[:len(w.args[0])]), tuple(leaves[len(w.args[0]):]),
                                  tuple(scalars))
        return [o.reshape((1,)) if o.ndim == 0 else o for o in outs]

    spec = PartitionSpec(AXIS)
    fn = jax.shard_map(body, mesh=mesh, in_specs=(spec, spec), out_specs=spec, check_vma=False)
    metrics.count("UncachedCompile")
    return jax.jit(fn).lower(*global_args).compile()


def _global_args(per_replica, mesh):
    """Global arrays (leaves, scalars) from each local replica's (donated, kept, scalars)."""
    sharding = NamedSharding(mesh, PartitionSpec(AXIS))
    world = mesh.devices.size
    devices = [runtime.jax_device(i) for i in runtime.replicas()]
    leaves = []
    for blocks in zip(*[a[0] + a[1] for a in per_replica]):
        blocks = [b.reshape((1,)) if b.ndim == 0 else b for b in blocks]
        shape = (world * blocks[0].shape[0],) + tuple(blocks[0].shape[1:])
        leaves.append(jax.make_array_from_single_device_arrays(shape, sharding, blocks))
    scalars = []
    for values in zip(*[a[2] for a in per_replica]):
        blocks = [jax.device_put(np.array([v]), d) for v, d in zip(values, devices)]
        scalars.append(jax.make_array_from_single_device_arrays((world,), sharding, blocks))
    return leaves, scalars


def _run(w, per_replica):
    """Runs the SPMD program of walk `w`; returns each local replica's outputs."""
    mesh = _mesh()
    global_args = _global_args(per_replica, mesh)
    key = (w.key, tuple(d.id for d in mesh.devices.flat))
    compiled = _programs.get(key)
    if compiled is None:
        compiled = _programs[key] = _compile(w, mesh, global_args)
    else:
        metrics.count("CachedCompile")
    outs = compiled(*global_args)
    local = [runtime.jax_device(i) for i in runtime.replicas()]
    result = [[] for _ in local]
    for out, root in zip(outs, w.roots):
        blocks = {s.device: s.data for s in out.addressable_shards}
        for r, d in enumerate(local):
            b = blocks[d]
            result[r].append(b.reshape(()) if not root.shape else b)
    return result


def run(w):
    """Outputs (for w.roots) of this replica's part of the SPMD program of walk `w`."""
    device = w.roots[0].device
    local = runtime.replicas()
    if device not in local:
        raise RuntimeError(f"xla:{device} runs a collective but is not one of the replicas "
                           f"(xla:{list(local)})")
    if len(local) == 1:
        return _run(w, [w.args])[0]
    return _meeting.join(device, w)


class _Meeting:
    """Where the threads driving this process's replicas meet to run a program together."""

    def __init__(self):
        self.cond = threading.Condition()
        self.reset()

    def reset(self):
        with self.cond:
            self.posts, self.results, self.rounds, self.error = {}, {}, {}, None

    def abort(self, error):
        """Wakes every waiting replica with `error` (a replica's thread failed)."""
        with self.cond:
            self.error = error
            self.cond.notify_all()

    def join(self, device, w):
        local = runtime.replicas()
        with self.cond:
            if self.error is not None:
                raise RuntimeError("another replica failed") from self.error
            r = self.rounds.get(device, 0)
            self.rounds[device] = r + 1
            posts = self.posts.setdefault(r, {})
            posts[device] = w
            if len(posts) < len(local):
                while r not in self.results and self.error is None:
                    self.cond.wait()
                if r not in self.results:
                    raise RuntimeError("another replica failed") from self.error
                return self._take(r, device)
            del self.posts[r]
        try:
            keys = {p.key for p in posts.values()}
            if len(keys) != 1:
                raise RuntimeError("the replicas ran different graphs at one collective step; every "
                                   "replica must run the same operations")
            outs = _run(w, [posts[i].args for i in local])
            result = {i: outs[k] for k, i in enumerate(local)}
        except BaseException as e:  # every replica of the round raises it
            result = {i: e for i in local}
        with self.cond:
            self.results[r] = result
            self.cond.notify_all()
            return self._take(r, device)

    def _take(self, r, device):
        result = self.results[r]
        out = result.pop(device)
        if not result:
            del self.results[r]
        if isinstance(out, BaseException):
            raise out
        return out


_meeting = _Meeting()
reset = _meeting.reset
abort = _meeting.abort
