"""Manual sharding: per-shard code inside an SPMD program (XLA's manual regions).

`enter(v, s)` (torch_xla's `enable_manual_sharding`) gives the per-device view of global
value `v` laid out by NamedSharding `s`: a value of one shard's shape, whose ops, recorded
as usual, each compute one shard. `leave(v, s, full_shape)` (`disable_manual_sharding`)
ends the region at `v`: the ops between the entries and `v` become one node whose lowering
is jax's `shard_map` over the mesh, the manual computation XLA's partitioner leaves as it
is (SPMDFullToShardShape / SPMDShardToFullShape; Shardy's manual_computation). A value
from outside the region that it reads enters it whole on every device (replicated).

A dim that does not divide over its mesh axes is padded at its end on entry (the last
shards hold padding, as XLA pads) and the padding is cut off on leaving.

A value inside a region exists only inside a program: reading it raises, and `mark_step`
leaves it pending (`outside_regions`).
"""
import weakref

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from . import graph_program, subgraph
from ..base import user_code
from ..graph.ir import In, Node, Sc, Value
from ..lowering import Lowering
from ..graph import spmd_layout as spmd

MANUAL = 4  # torch_xla's ShardingType.MANUAL


class _Manual:
    """The `sharding` of a value entering a manual region (printed `{manual}`)."""

    def __repr__(self):
        return "{manual}"


MANUAL_SHARDING = _Manual()


def is_manual(s) -> bool:
    return s is MANUAL_SHARDING


_INSIDE = ("a tensor in manual sharding mode (from enable_manual_sharding) holds one shard per "
           "device and exists only inside a program: pass it, or what is computed from it, to "
           "disable_manual_sharding before reading it")


def _read_inside(x, sharding):
    raise RuntimeError(_INSIDE)


ENTRY = Lowering("xla::spmd_full_to_shard_shape", _read_inside, static_scalars=True, rng=False,
                 dynamic_shape=False)


_entries = weakref.WeakSet()  # the entry values alive: while there is none, no region is open


def enter(v: Value, s) -> Value:
    """The per-shard view of value `v` laid out by NamedSharding `s`."""
    spmd.require()
    if inside(v):
        raise RuntimeError("enable_manual_sharding: this tensor is already in manual sharding mode")
    shape = spmd.shard_shape(v.shape, s)
    node = Node(ENTRY, ((In(0), s), ()), (v,), (), ((shape, v.dtype),))
    out = Value(shape, v.dtype, v.device, node=node)
    out.sharding = MANUAL_SHARDING
    _entries.add(out)
    return out


def _is_entry(v) -> bool:
    return v.node is not None and v.node.op is ENTRY


def _region_of(values):
    """For every pending value reachable from `values`: whether it is computed from an entry
    (is inside a manual region), by value id."""
    found, stack = {}, [(v, False) for v in values]
    while stack:
        v, expanded = stack.pop()
        if id(v) in found:
            continue
        if v.node is None:
            found[id(v)] = False
        elif _is_entry(v):
            found[id(v)] = True
        elif expanded:
            found[id(v)] = any(found[id(i)] for i in v.node.inputs)
        else:
            stack.append((v, True))
            stack.extend((i, False) for i in v.node.inputs if id(i) not in found)
    return found


def inside(v: Value) -> bool:
    """Whether value `v` is inside a manual region (computed from an entry)."""
    return bool(_entries) and _region_of([v])[id(v)]


def check_readable(values) -> None:
    """Raises if one of `values` is inside a manual region (it has no value of its own)."""
    if _entries:
        in_region = _region_of(values)
        if any(in_region[id(v)] for v in values):
            raise RuntimeError(_INSIDE)


def outside_regions(values, held):
    """`values` less those inside a manual region (they stay pending), and `held` with the
    buffers those read (which the program must not donate)."""
    if not _entries:
        return values, held
    in_region = _region_of(values)
    kept = [v for v in values if not in_region[id(v)]]
    if len(kept) == len(values):
        return values, held
    held = set(held)
    _, _, leaves = graph_program._collect([v for v in values if in_region[id(v)]])
    held.update(id(v.data) for v in leaves)
    return kept, held


class _Region:
    """A manual region as its node's static argument: the per-shard program (a plan as the
    compiler writes one) and how its inputs and output lie on the mesh. Equal regions
    (same ops, same layouts) are equal, so a steady loop compiles once."""
    __slots__ = ("plan", "root", "n_inputs", "mesh", "in_specs", "pads", "out_spec",
                 "full_shape", "key")

    def __init__(self, plan, root, mesh, in_specs, pads, out_spec, full_shape):
        self.plan, self.root, self.mesh = plan, root, mesh
        self.n_inputs, self.in_specs, self.pads = len(in_specs), in_specs, pads
        self.out_spec, self.full_shape = out_spec, full_shape
        self.key = (plan, root, mesh, in_specs, pads, out_spec, full_shape)

    def __eq__(self, other):
        return type(other) is _Region and other.key == self.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"manual_region({len(self.plan)} ops over mesh {dict(self.mesh.shape)})"


def _run_region(region, *args):
    arrays, scalars = args[:region.n_inputs], args[region.n_inputs:]
    arrays = [jnp.pad(a, pad) if any(p for _, p in pad) else a
              for a, pad in zip(arrays, region.pads)]
    def per_shard(*xs):
        return subgraph.run(region.plan, (region.root,), xs[:region.n_inputs],
                            xs[region.n_inputs:])[0]

    in_specs = region.in_specs + (PartitionSpec(),) * len(scalars)
    out = jax.shard_map(per_shard, mesh=region.mesh, in_specs=in_specs,
                        out_specs=region.out_spec, check_vma=False)(*arrays, *scalars)
    if tuple(out.shape) != region.full_shape:  # the padding of uneven dims
        out = out[tuple(slice(0, n) for n in region.full_shape)]
    return out


REGION = Lowering("xla::spmd_manual_region", _run_region, static_scalars=False, rng=False,
                  dynamic_shape=False)


def _check_full_shape(shard, full_shape, s):
    for dim, (n, k, m) in enumerate(zip(full_shape, spmd.splits(full_shape, s), shard)):
        if -(-n // k) != m:
            raise ValueError(
                f"disable_manual_sharding: dim {dim} of full shape {list(full_shape)} split "
                f"{k} ways gives shards of size {-(-n // k)}, but the tensor's shards have "
                f"size {m} (its shard shape is {list(shard)})")


def _region_inputs(params, s):
    """What a region's node reads for its parameters `params` (the global values of its
    entries, the values from outside), how each lies on the mesh in the region, and the
    padding that makes each entry's dims divide."""
    inputs, in_specs, pads = [], [], []
    for x in params:
        if _is_entry(x):
            named = x.node.template[0][1]
            if named.mesh != s.mesh:
                raise RuntimeError("a manual region's tensors must enter and leave it on one "
                                   "mesh")
            source = x.node.inputs[0]
            inputs.append(source)
            in_specs.append(named.spec)
            pads.append(tuple((0, m * k - n) for n, m, k in
                              zip(source.shape, x.shape, spmd.splits(source.shape, named))))
        else:
            inputs.append(x)
            in_specs.append(PartitionSpec())
            pads.append(tuple((0, 0) for _ in x.shape))
    return inputs, tuple(in_specs), tuple(pads)


def leave(v: Value, s, full_shape) -> Value:
    """The global value of `full_shape`, laid out by NamedSharding `s`, whose shards are
    those of `v` (a value inside a manual region)."""
    spmd.require()
    full_shape = tuple(int(n) for n in full_shape)
    if len(full_shape) != len(v.shape):
        raise ValueError(f"disable_manual_sharding: full shape {list(full_shape)} has "
                         f"{len(full_shape)} dims, the tensor {len(v.shape)}")
    in_region = _region_of([v])
    if not in_region[id(v)]:
        raise RuntimeError("disable_manual_sharding needs a tensor in manual sharding mode "
                           "(from enable_manual_sharding, or computed from such tensors)")
    _check_full_shape(v.shape, full_shape, s)
    plan, root, params, scalars = subgraph.extract(
        [v], lambda x: _is_entry(x) or not in_region[id(x)])
    root = root[0]
    inputs, in_specs, pads = _region_inputs(params, s)
    region = _Region(tuple(plan), root, s.mesh, in_specs, pads, s.spec, full_shape)
    template = ((region, *[In(i) for i in range(len(inputs))],
                 *[Sc(j, type(c)) for j, c in enumerate(scalars)]), ())
    node = Node(REGION, template, tuple(inputs), tuple(scalars), ((full_shape, v.dtype),),
                user_code.user_line())
    out = Value(full_shape, v.dtype, v.device, node=node)
    out.sharding = s
    return out


def region_mesh(node):
    """The mesh of a manual region's node (None for other nodes)."""
    return node.template[0][0].mesh if node.op is REGION else None
