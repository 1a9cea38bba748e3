"""What `mark_sharding` and its kin call: shardings given to tensors, read back, kept.

`mark(t, sharding)` gives tensor `t` a jax sharding (SPMD only, `_lazy/graph/spmd_layout`): data already
on the device is laid out that way at once; a pending value gets a sharding-constraint node
(`lowering/sharding_constraint`) that the partitioner honours, and the program's output takes that
layout. An in-place update of a sharded tensor keeps its sharding (`propagate`, called
where functionalization swaps a tensor's value). `local_shards` reads each device's block.
"""
import numpy as np
import torch
from jax.sharding import NamedSharding

from ..runtime import pjrt
from ..step.deferred_checks import raise_failed_checks
from ..step.execution import materialize
from ..graph.ir import In, Node, Value
from ..graph.tensor import XLATensor, to_functional, unwrap, wrap
from ..launch.transfers import from_cpu
from ..graph import spmd_layout as spmd
from ..launch import manual_regions as manual
from ..lowering.sharding_constraint import SHARD_ALIKE, SHARDING_CONSTRAINT


def _value_of(t):
    spmd.require()
    v = unwrap(t)._value
    if v.device != 0:
        raise RuntimeError(f"under SPMD xla:0 stands for every device; this tensor is on "
                           f"xla:{v.device}")
    return v


def _constrained(v, s):
    node = Node(SHARDING_CONSTRAINT, ((In(0), s), ()), (v,), (), ((v.shape, v.dtype),))
    out = Value(v.shape, v.dtype, v.device, node=node)
    out.sharding = s
    return out


def from_process_batch(v: Value, s) -> Value:
    """The global batch whose dim 0 is every process's buffer value `v` end to end (each
    process loading its own part), laid out by sharding `s`."""
    spmd.require()
    data = spmd.from_process_batches(v.data, s)
    out = Value(tuple(data.shape), v.dtype, v.device, data=data)
    out.sharding = s
    return out


def _outside_regions(t: torch.Tensor, what: str) -> Value:
    v = _value_of(t)
    if manual.inside(v):
        raise RuntimeError(f"{what}: this tensor is in manual sharding mode (one shard per "
                           "device); give the sharding after disable_manual_sharding")
    return v


def mark_manual(t: torch.Tensor) -> None:
    """Marks `t`, computed inside a manual region (`_lazy/launch/manual_regions`), as in manual sharding
    mode (its spec reads `{manual}`); raises for a tensor from outside one."""
    v = _value_of(t)
    if not manual.inside(v):
        raise RuntimeError("Marking a tensor computed outside a manual region (from "
                           "_spmd_full_to_shard_shape / enable_manual_sharding) as manual is "
                           "not supported")
    v.sharding = manual.MANUAL_SHARDING


def mark(t: torch.Tensor, s) -> None:
    """Gives `t` sharding `s`: its data is laid out so now, or its pending value
    constrained. Data that has another sharding (not replicated) keeps it: as in torch_xla,
    that one must be cleared first (`clear`)."""
    if manual.is_manual(s):
        raise RuntimeError("the manual sharding is given by enable_manual_sharding "
                           "(_spmd_full_to_shard_shape), not by mark_sharding")
    v = _outside_regions(t, "mark_sharding")
    if v.node is not None:
        unwrap(t)._value = _constrained(v, s)
        return
    if v.sharding is not None:
        current = spmd.describe(v.sharding, len(v.shape))
        if current == spmd.describe(s, len(v.shape)):
            return
        if spmd.kind(v.sharding, len(v.shape)) != spmd.REPLICATED:
            raise RuntimeError(f"Existing annotation must be cleared first: {current} (this "
                               f"tensor's data is sharded; clear_sharding it to reshard)")
    spmd.shard_data(v, s)


def annotate(t: torch.Tensor, s) -> None:
    """Gives `t` a sharding constraint `s` in the graph, data or pending: its data stays as
    it is laid out, the next program lays its value out by `s`."""
    unwrap(t)._value = _constrained(_outside_regions(t, "annotate_custom_sharding"), s)


def shard_alike(x: torch.Tensor, y: torch.Tensor):
    """Tensors equal to `x` and `y` that XLA's partitioner lays out alike (jax's
    `shard_alike`), whichever layout it picks."""
    vx = _outside_regions(x, "shard_as")
    vy = _outside_regions(y, "shard_as")
    if vx.shape != vy.shape:
        raise ValueError(f"shard_as: tensors of shapes {list(vx.shape)} and {list(vy.shape)} "
                         "cannot be laid out alike (their shapes must be equal)")
    node = Node(SHARD_ALIKE, ((In(0), In(1)), ()), (vx, vy), (),
                ((vx.shape, vx.dtype), (vy.shape, vy.dtype)))
    return tuple(to_functional(wrap(Value(v.shape, v.dtype, v.device, node=node, index=i)))
                 for i, v in enumerate((vx, vy)))


def enter_manual(t: torch.Tensor, s) -> torch.Tensor:
    """The per-device shard view of `t` laid out by `s`, in manual sharding mode
    (`_lazy/launch/manual_regions`)."""
    return to_functional(wrap(manual.enter(_value_of(t), s)))


def leave_manual(t: torch.Tensor, s, full_shape) -> torch.Tensor:
    """The global tensor of `full_shape`, laid out by `s`, whose shards are those of `t` (a
    tensor in manual sharding mode)."""
    return to_functional(wrap(manual.leave(_value_of(t), s, full_shape)))


def copy_sharding(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Gives `dst` the sharding `src` has, if any."""
    s = unwrap(src)._value.sharding
    if s is not None:
        mark(dst, s)


def clear(t: torch.Tensor) -> None:
    """Forgets `t`'s sharding: a pending value loses its constraint, data stays where it is."""
    v = _value_of(t)
    if v.node is not None and v.node.op is SHARDING_CONSTRAINT:
        unwrap(t)._value = v.node.inputs[0]
    else:
        v.sharding = None


def propagate(old, new) -> None:
    """Where an in-place op swaps XLATensor `old`'s value for XLATensor `new`'s: `new` keeps
    `old`'s sharding (a new value; one `new` shares with other tensors is left alone)."""
    if type(old) is not XLATensor or old._value.sharding is None or type(new) is not XLATensor:
        return  # (functionalization of CPU tensors, torch.func.functionalize, comes here too)
    s, v = old._value.sharding, new._value
    if manual.is_manual(s):
        return  # a new value of a manual region is in it: it has no layout to keep
    if v.sharding is not None or v.shape != old._value.shape:
        return
    if v.node is None:
        placed = Value(v.shape, v.dtype, v.device, data=spmd.lay_out(v.data, v.shape, s))
        placed.sharding = s
        new._value = placed
    else:
        new._value = _constrained(v, s)


def spec_text(t: torch.Tensor) -> str:
    """`t`'s sharding as torch_xla prints it; '' if it has none (data moved to the virtual
    device; a program's output there is replicated)."""
    v = unwrap(t)._value
    if manual.is_manual(v.sharding):
        return "{manual}"
    if v.sharding is None:
        return "{replicated}" if spmd.replicated_output(v) else ""
    return spmd.describe(v.sharding, len(v.shape))


def sharding_of(t: torch.Tensor):
    """The jax sharding `t` was given (or its data took), None if none or manual."""
    s = unwrap(t)._value.sharding
    return None if manual.is_manual(s) else s


def spec_kind(t: torch.Tensor):
    """`t`'s sharding type (torch_xla's ShardingType number), or None."""
    v = unwrap(t)._value
    if manual.is_manual(v.sharding):
        return manual.MANUAL
    if v.sharding is None:
        return spmd.REPLICATED if spmd.replicated_output(v) else None
    return spmd.kind(v.sharding, len(v.shape))


def local_shards(t: torch.Tensor):
    """This process's blocks of `t`: (CPU tensor, indices, device name, replica id) in device
    order. Data not given a sharding is replicated: every device holds all of it."""
    v = _value_of(t)
    materialize([v])
    raise_failed_checks((v,))
    if spmd.is_virtual(v.data):
        host = pjrt.to_cpu_tensor(v.data, v.dtype)
        return [(host.clone(), Ellipsis, spmd.device_name(d), spmd.device_index(d))
                for d in pjrt.jax_devices()]
    if v.sharding is not None and not spmd.fits(v.shape, v.sharding):
        blocks = spmd.padded_shards(v.data, v.shape, v.sharding)
    else:
        blocks = spmd.shards(v.data, v.shape)
    return [(pjrt.to_cpu_tensor(data, v.dtype), indices, spmd.device_name(d), replica)
            for d, indices, replica, data in blocks]


def load_local_shards(t: torch.Tensor, blocks, devices) -> None:
    """Replaces `t`'s data by this process's `blocks` (CPU tensors), one for each of its
    devices (named as `local_shards` names them), laid out as `t` is (the blocks of a dim
    that does not divide padded or not)."""
    v = _value_of(t)
    materialize([v])
    s = v.sharding if v.sharding is not None else v.data.sharding
    if spmd.is_virtual(v.data) or spmd.kind(s, len(v.shape)) == spmd.REPLICATED:
        # (a replicated tensor's blocks are its every copy, which must stay equal)
        raise RuntimeError("load_local_shards_ needs a sharded tensor (mark_sharding it over "
                           "the devices first); this one is not split over them")
    by_name = {spmd.device_name(d): d for d in s.addressable_devices}
    fits = spmd.fits(v.shape, s)
    shard = tuple(s.shard_shape(v.shape)) if fits else spmd.shard_shape(v.shape, s)
    data = {}
    for block, name in zip(blocks, devices):
        if name not in by_name:
            raise RuntimeError(f"{name} holds no shard of this tensor (its devices: "
                               f"{sorted(by_name)})")
        if not _shard_fits(tuple(block.shape), shard, padded=not fits):
            raise RuntimeError(f"the shard for {name} has shape {list(block.shape)}; this "
                               f"tensor's shards have shape {list(shard)}")
        data[by_name[name]] = from_cpu(block, 0, dtype=v.dtype).data
    missing = sorted(set(by_name) - {spmd.device_name(d) for d in data})
    if missing:
        raise RuntimeError(f"no shard given for {missing}")
    if fits:
        v.data = spmd.assemble(v.shape, s, data)
    else:
        v.data = spmd.from_padded_blocks(v.shape, s, {d: np.asarray(b) for d, b in data.items()})


def from_cpu_shards(shards, s, global_shape=None) -> torch.Tensor:
    """The global tensor laid out by sharding `s` whose block on this process's device i is
    `shards[i]` (CPU tensors of one shape); its shape is `global_shape`, by default the
    blocks' shape times the tiles of each dim (a replicated layout: the block's shape). A
    smaller `global_shape` whose shards are the blocks padded at their end takes the
    blocks' leading values (the rest is padding)."""
    spmd.require()
    devices = pjrt.jax_devices()
    if len(shards) != len(devices):
        raise RuntimeError(f"one shard for each local device is needed: {len(devices)} devices, "
                           f"{len(shards)} shards")
    block = tuple(shards[0].shape)
    if global_shape is None:
        if isinstance(s, NamedSharding):
            tiles = spmd.splits(block, s)
        else:
            probe = tuple(max(b, 1) * len(devices) for b in block)
            tiles = tuple(p // q for p, q in zip(probe, s.shard_shape(probe)))
        global_shape = [b * k for b, k in zip(block, tiles)]
    global_shape = tuple(int(d) for d in global_shape)
    if len(global_shape) != len(block) or not _blocks_of(global_shape, block, s):
        raise RuntimeError(f"shards of shape {list(block)} do not make a tensor of shape "
                           f"{list(global_shape)} laid out as {spmd.describe(s, len(block))}")
    dtype = shards[0].dtype
    blocks = {d: from_cpu(b, 0, dtype).data for d, b in zip(devices, shards)}
    if spmd.fits(global_shape, s):
        data = spmd.assemble(global_shape, s, blocks)
    else:
        data = spmd.from_padded_blocks(global_shape, s, {d: np.asarray(b) for d, b in blocks.items()})
    v = Value(global_shape, dtype, 0, data=data)
    v.sharding = s
    return to_functional(wrap(v))


def _shard_fits(block, shard, padded) -> bool:
    """Whether a block of shape `block` can be a shard of shape `shard` (`padded`: given
    without its padding, no larger)."""
    if not padded:
        return block == shard
    return len(block) == len(shard) and all(b <= n for b, n in zip(block, shard))


def _blocks_of(shape, block, s) -> bool:
    """Whether `block` is the (padded) shard shape of a value of `shape` laid out by `s`."""
    if isinstance(s, NamedSharding):
        return spmd.shard_shape(shape, s) == block
    try:  # a sharding without a mesh's spec: dims must divide
        return tuple(s.shard_shape(shape)) == block
    except ValueError:
        return False
