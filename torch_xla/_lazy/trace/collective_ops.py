"""The collectives as PyTorch ops: `xla::all_reduce` and its kin, what `xm.all_reduce` and
its kin call.

Each collective is an op of the `xla` library (torch.library), so that dynamo records a call
inside a compiled function as a node of its graph, shaped by the fake kernel here. On XLA
tensors (the lazy path) the engine op here records a graph node; a captured graph
(`graph_capture`) lowers its node through the same lowering (`lowering/collectives`).
Either way the graph that holds one runs as one program over every replica's device
(`launch/replica_program`). Both check the arguments against the world size of the call (it
differs between DataParallel's threads and the process outside them), so no shape is
cached across calls. PyTorch's own traceable collectives (`_c10d_functional`) on XLA
tensors are the same ops over every replica, as in torch_xla (their group name is not read).
"""
import torch

from . import eager
from ..runtime import pjrt
from ..base import user_code
from .dispatch import encode_constant_call, engine_op
from ..graph.ir import In, Node, Value
from ..lowering import REGISTRY
from ..graph.tensor import to_functional, unwrap, wrap
from ..lowering import collectives as lowerings
from ..lowering.collectives import ALL_REDUCE  # noqa: F401  (a node's lowering, for tests)

REDUCE_TYPES = ("sum", "mul", "and", "or", "min", "max")


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


def _check_group_size(groups, world, name, count, what):
    size = len(groups[0]) if groups else world
    if count != size:
        raise ValueError(f"{name}: {what} {count} must be the group size ({size})")


def _check_reduce_type(reduce_type):
    if reduce_type not in REDUCE_TYPES:
        raise ValueError(f"Invalid reduce type '{reduce_type}'; expected one of {REDUCE_TYPES}")


def _divides(name, shape, dim, count):
    if shape[dim] % count:
        raise ValueError(f"{name}: {count} must divide dimension {dim} of {list(shape)}")


# ---- each op's output shapes, from its arguments (and checks) --------------------------------

def _all_reduce_shapes(world, inputs, reduce_type, scale, groups):
    _check_reduce_type(reduce_type)
    normalize_groups(groups, world)
    return [tuple(t.shape) for t in inputs]


def _all_gather_shapes(world, x, dim, groups):
    groups = normalize_groups(groups, world, equal_sizes=True)
    shape = list(x.shape)
    shape[dim] *= len(groups[0]) if groups else world
    return [tuple(shape)]


def _reduce_scatter_shapes(world, x, reduce_type, scale, dim, shard_count, groups):
    _check_reduce_type(reduce_type)
    groups = normalize_groups(groups, world, equal_sizes=True)
    _check_group_size(groups, world, "reduce_scatter", shard_count, "shard_count")
    _divides("reduce_scatter", x.shape, dim, shard_count)
    shape = list(x.shape)
    shape[dim] //= shard_count
    return [tuple(shape)]


def _all_to_all_shapes(world, x, split_dim, concat_dim, split_count, groups):
    groups = normalize_groups(groups, world, equal_sizes=True)
    _check_group_size(groups, world, "all_to_all", split_count, "split_count")
    _divides("all_to_all", x.shape, split_dim, split_count)
    shape = list(x.shape)
    shape[split_dim] //= split_count
    shape[concat_dim] *= split_count
    return [tuple(shape)]


def _collective_permute_shapes(world, x, pairs):
    if any(len(p) != 2 or not all(0 <= r < world for r in p) for p in pairs):
        raise ValueError(f"collective_permute: pairs {pairs} must be (source, target) ordinals in [0, {world})")
    return [tuple(x.shape)]


def _c10d_all_reduce_shapes(world, x, reduce_op, group_name):
    _check_reduce_type(reduce_op)
    return [tuple(x.shape)]


def _c10d_all_gather_shapes(world, x, group_size, group_name):
    _check_group_size(None, world, "all_gather_into_tensor", group_size, "group_size")
    return [(x.shape[0] * group_size,) + tuple(x.shape[1:])]


def _c10d_reduce_scatter_shapes(world, x, reduce_op, group_size, group_name):
    return _reduce_scatter_shapes(world, x, reduce_op, 1.0, 0, group_size, ())


def _c10d_all_to_all_shapes(world, x, output_split_sizes, input_split_sizes, group_name):
    split = x.shape[0] // world if world else 0
    if any(int(s) != split for s in list(output_split_sizes) + list(input_split_sizes)):
        raise RuntimeError("torch_xla does not support arbitrary split sizes for all_to_all")
    return _all_to_all_shapes(world, x, 0, 0, world, ())


def _c10d_broadcast_shapes(world, x, src, group_name):
    if not 0 <= src < world:
        raise ValueError(f"broadcast: src {src} is not an ordinal in [0, {world})")
    return [tuple(x.shape)]


# name -> (schema of an `xla::` op, or the `_c10d_functional` op, its shapes, its lowering)
_OPS = {
    "all_reduce": ("(Tensor[] inputs, str reduce_type, float scale, int[][] groups) -> Tensor[]",
                   _all_reduce_shapes, lowerings.ALL_REDUCE),
    "all_gather": ("(Tensor input, int dim, int[][] groups) -> Tensor",
                   _all_gather_shapes, lowerings.ALL_GATHER),
    "reduce_scatter": ("(Tensor input, str reduce_type, float scale, int dim, int shard_count, "
                       "int[][] groups) -> Tensor", _reduce_scatter_shapes, lowerings.REDUCE_SCATTER),
    "all_to_all": ("(Tensor input, int split_dim, int concat_dim, int split_count, int[][] groups) "
                   "-> Tensor", _all_to_all_shapes, lowerings.ALL_TO_ALL),
    "collective_permute": ("(Tensor input, int[][] pairs) -> Tensor", _collective_permute_shapes,
                           lowerings.COLLECTIVE_PERMUTE),
}
_C10D = {
    "all_reduce": (_c10d_all_reduce_shapes, lowerings.C10D_ALL_REDUCE),
    "all_gather_into_tensor": (_c10d_all_gather_shapes, lowerings.C10D_ALL_GATHER),
    "reduce_scatter_tensor": (_c10d_reduce_scatter_shapes, lowerings.C10D_REDUCE_SCATTER),
    "all_to_all_single": (_c10d_all_to_all_shapes, lowerings.C10D_ALL_TO_ALL),
    "broadcast": (_c10d_broadcast_shapes, lowerings.C10D_BROADCAST),
}


def _record(lowering, template, values, device, avals):
    """User-level outputs of a new node of `lowering` on `values` (on `device`)."""
    node = Node(lowering, template, tuple(values), (), tuple(avals), user_code.user_line())
    outs = [wrap(Value(shape, dtype, device, node=node, index=i)) for i, (shape, dtype) in enumerate(avals)]
    if eager.enabled() and eager.op_by_op():  # (fused: cut with the rest)
        eager.run_outputs(outs)
    return outs


def _register(op, shapes, lowering):
    """`op` recorded on XLA tensors as a node of `lowering`, and lowered by it in captured
    graphs; its first argument is a tensor or a list of them, the others static."""
    REGISTRY[op] = lowering

    @engine_op(op)
    def record(first, *rest):
        many = isinstance(first, (list, tuple))
        out_shapes = shapes(pjrt.world_size(), first, *rest)
        template, values, device = encode_constant_call(op, (first, *rest), {})
        avals = [(s, v.dtype) for s, v in zip(out_shapes, values)]
        outs = _record(lowering, template, values, device, avals)
        return outs if many else outs[0]


def _fake(shapes):
    def fake(first, *rest):
        many = isinstance(first, (list, tuple))
        tensors = list(first) if many else [first]
        out = [t.new_empty(s) for s, t in zip(shapes(pjrt.world_size(), first, *rest), tensors)]
        return out if many else out[0]
    return fake


_lib = torch.library.Library("xla", "FRAGMENT")
for _name, (_schema, _shapes, _lowering) in _OPS.items():
    _lib.define(_name + _schema)
    torch.library.register_fake(f"xla::{_name}", _fake(_shapes), lib=_lib)
    _register(getattr(torch.ops.xla, _name).default, _shapes, _lowering)
for _name, (_shapes, _lowering) in _C10D.items():
    _register(getattr(torch.ops._c10d_functional, _name).default, _shapes, _lowering)
REGISTRY[torch.ops._c10d_functional.wait_tensor.default] = lowerings.WAIT_TENSOR
engine_op(torch.ops._c10d_functional.wait_tensor.default)(lambda t: wrap(t._value))


def apply(op, tensors, avals, **static):
    """Records `op` (a lowering of no ATen op) on `tensors` (user tensors on one XLA device);
    returns user tensors for its outputs with the given (shape, dtype) avals."""
    values = [unwrap(t)._value for t in tensors]
    for v in values:
        if v.data is None and v.node is None:
            raise v.failure()
    devices = {v.device for v in values}
    if len(devices) != 1:
        raise RuntimeError(f"{op.name} takes tensors on one XLA device, got xla:{sorted(devices)}")
    template = (tuple(In(i) for i in range(len(values))), tuple(sorted(static.items())))
    outs = _record(op, template, values, devices.pop(), avals)
    # Users hold functional tensors; C++ code below functionalization (DDP's) the inner ones.
    return [to_functional(o) for o in outs] if torch._is_functional_tensor(tensors[0]) else outs


def aval(t: torch.Tensor, shape=None):
    return (tuple(t.shape) if shape is None else tuple(shape), t.dtype)
