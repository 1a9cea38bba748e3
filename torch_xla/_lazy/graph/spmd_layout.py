"""SPMD's data model: one virtual device over every device, values sharded on jax meshes.

Under `pjrt.use_spmd()` (torch_xla's `xr.use_spmd()`) xla:0 stands for every device of the runtime,
in every process. A value's buffer is then one of two things:
- a single-device array on device 0: data given no sharding yet (the "virtual device" of
  torch_xla). Data moved there from the host stays on the host until used
  (`transfers.HostValue`), so that a sharding known first places each device's shard
  straight from there (`shard_data`). A program that needs it on the mesh places it there,
  replicated (`place`);
- a global jax array over a jax `Mesh` of all devices, sharded by a `NamedSharding`
  (`mark_sharding`), or laid out as XLA's partitioner chose for a program's output.
`Value.sharding` is the sharding a value was given (or its buffer took in a program); the
SPMD program (`_lazy/launch/spmd_program`) uses it as the output's layout and jit reads the
inputs' layouts from their arrays. A sharding with a dim that does not divide over its
mesh axes cannot lay a jax array out (jax arrays hold no padded shards): such data is held
replicated, programs constrain it to its sharding, and its shards are read padded, as XLA
pads them (`lay_out`, `padded_shards`).

Device ids are global device indices (positions in `pjrt.global_devices()`), as
torch_xla's `Mesh` numbers them, and shardings are described as torch_xla prints them
(`{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}`).
"""
import functools
import weakref

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

from ..base import counters
from ..runtime import pjrt, runner

# torch_xla's OpSharding types (XLA's OpSharding.Type numbers)
REPLICATED, MAXIMAL, TILED, PARTIAL = 0, 1, 3, 5

# Values a program computed on the virtual device: a program's outputs are replicated (every
# device would compute the same), as torch_xla reports them, unlike data only moved there.
_computed_replicated = weakref.WeakSet()


def computed_on_virtual(values) -> None:
    """`values` (a program's outputs, sharding None) were computed on the virtual device."""
    _computed_replicated.update(values)


def replicated_output(v) -> bool:
    """Whether value `v`, given no sharding, is a program's replicated output."""
    return v in _computed_replicated


def require() -> None:
    if not pjrt.is_spmd():
        raise RuntimeError("SPMD is not enabled: call torch_xla.runtime.use_spmd() before "
                           "sharding tensors")


@functools.lru_cache(maxsize=None)
def mesh(device_ids: tuple, shape: tuple, axis_names: tuple) -> Mesh:
    """The jax Mesh of global devices `device_ids` (row-major over `shape`)."""
    devices = pjrt.global_devices()
    grid = np.empty(len(device_ids), dtype=object)
    grid[:] = [devices[i] for i in device_ids]
    return Mesh(grid.reshape(shape), axis_names)


def sharding(jax_mesh: Mesh, spec: tuple) -> NamedSharding:
    """`spec` (one entry per tensor dim: an axis name, a tuple of names, or None) on `jax_mesh`."""
    return NamedSharding(jax_mesh, PartitionSpec(*spec))


@functools.lru_cache(maxsize=None)
def mesh_sharding(device_ids: tuple, shape: tuple, axis_names: tuple, spec: tuple) -> NamedSharding:
    """`spec` on the mesh of `device_ids`, made once per mesh and spec, as torch_xla caches
    a mesh's OpShardings (each one made counts CreateOpSharding)."""
    counters.count("CreateOpSharding")
    return sharding(mesh(device_ids, shape, axis_names), spec)


def mesh_of(s) -> Mesh:
    """The mesh of sharding `s` (for a sharding without one, as XLA may leave a program's
    output: a 1-D mesh of its devices in its order)."""
    if isinstance(s, NamedSharding):
        return s.mesh
    return _device_mesh(tuple(s._device_assignment))


@functools.lru_cache(maxsize=None)
def _device_mesh(devices):
    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    return Mesh(grid, ("devices",))


def replicated(jax_mesh: Mesh) -> NamedSharding:
    return NamedSharding(jax_mesh, PartitionSpec())


def layout(s):
    """A hashable form of sharding `s` that equivalent NamedShardings share (jax writes
    P('x') and P('x', None) for the same layout)."""
    if isinstance(s, NamedSharding):
        spec = tuple(s.spec)
        while spec and spec[-1] is None:
            spec = spec[:-1]
        return s.mesh, spec
    return s


def is_virtual(array) -> bool:
    """Whether `array` is data on the virtual device (one device, no sharding yet)."""
    return isinstance(array.sharding, SingleDeviceSharding)


def _axes(entry) -> tuple:
    return () if entry is None else entry if type(entry) is tuple else (entry,)


def splits(shape, s) -> tuple:
    """How many shards each dim of `shape` is split into by NamedSharding `s`."""
    spec = tuple(s.spec) + (None,) * (len(shape) - len(s.spec))
    return tuple(int(np.prod([s.mesh.shape[a] for a in _axes(e)], dtype=int)) for e in spec)


def _uneven_dims(shape, s):
    if not isinstance(s, NamedSharding):
        return [] if _shard_shape_ok(shape, s) else [None]
    return [d for d, (n, k) in enumerate(zip(shape, splits(shape, s))) if n % k]


def _shard_shape_ok(shape, s) -> bool:
    try:
        s.shard_shape(tuple(shape))
        return True
    except ValueError:
        return False


def fits(shape, s) -> bool:
    """Whether every dim of `shape` divides evenly into its shards (jax arrays hold no
    padded shards)."""
    return not _uneven_dims(shape, s)


def check_fits(shape, s) -> None:
    """Raises ValueError naming the first dim of `shape` that `s` cannot split evenly."""
    uneven = _uneven_dims(shape, s)
    if not uneven:
        return
    d = uneven[0]
    if d is None:
        raise ValueError(f"cannot lay out a tensor of shape {list(shape)} by {s}: each sharded "
                         "dim must divide evenly over its devices")
    axes = _axes((tuple(s.spec) + (None,) * len(shape))[d])
    k = splits(shape, s)[d]
    raise ValueError(
        f"cannot shard dim {d} of a tensor of shape {list(shape)} over mesh axes "
        f"{', '.join(repr(a) for a in axes)} ({k} devices): its size {shape[d]} does not divide "
        f"evenly by {k}")


def padded_shape(shape, s) -> tuple:
    """`shape` with each dim rounded up to a multiple of its number of shards under `s`."""
    return tuple(-(-n // k) * k for n, k in zip(shape, splits(shape, s)))


def shard_shape(shape, s) -> tuple:
    """One shard's shape, a dim that does not divide rounded up (its last shards padded)."""
    return tuple(-(-n // k) for n, k in zip(shape, splits(shape, s)))


def lay_out(array, shape, s):
    """`array` (a value of `shape`) laid out for sharding `s`: by `s` itself, or, where a dim
    does not divide (jax arrays hold no padded shards), replicated over its mesh; programs
    then constrain it to `s` (`spmd_program`), and its shards are read padded
    (`padded_shards`), as XLA pads them."""
    return place(array, lay_out_sharding(shape, s))


def padded_shards(array, shape, s):
    """This process's shards of the value `array` laid out by `s` whose dims need not
    divide, as `shards` gives them: each block padded with zeros at its end to the shard
    shape, its indices clipped to the value (a block all padding has empty ones)."""
    whole = np.asarray(place(array, replicated(s.mesh)).addressable_shards[0].data)
    padded = padded_shape(shape, s)
    whole = np.pad(whole, [(0, p - n) for n, p in zip(shape, padded)])
    blocks = jax.make_array_from_callback(padded, s, lambda index: whole[index])
    return [(d, indices if indices is Ellipsis else
             [slice(min(sl.start, n), min(sl.stop, n), 1) for sl, n in zip(indices, shape)],
             replica, data) for d, indices, replica, data in shards(blocks, padded)]


def from_padded_blocks(shape, s, blocks):
    """The value of `shape` whose shards under `s` (dims need not divide) are this process's
    `blocks` (a dict from jax device to numpy data, each padded or not), laid out as
    `lay_out` lays it out."""
    padded, shard = padded_shape(shape, s), shard_shape(shape, s)
    full = {d: np.pad(b, [(0, m - n) for n, m in zip(b.shape, shard)]) for d, b in blocks.items()}
    crop = tuple(slice(0, n) for n in shape)
    return _move(lambda x: x[crop], assemble(padded, s, full), lay_out_sharding(shape, s),
                 ("crop", tuple(shape)))


def _move(fn, array, out_sharding, what):
    """`fn(array)` (a program that only moves data) laid out by `out_sharding`, compiled by
    the runner once per (`what`, the array's shape, dtype and layout, the output's)."""
    placement = runner.OnMesh(out_sharding)
    key = (what, array.shape, str(array.dtype), layout(array.sharding), layout(out_sharding))
    program = runner.lookup(key, placement)
    if program is None:
        program = runner.compile(fn, (array,), placement, key=key)
    return runner.execute(program, array)


def shard_data(v, s) -> None:
    """Lays buffer value `v`'s data out by sharding `s`, now; data still on the host
    (`transfers.HostValue`) is placed so from there, each device receiving its shard."""
    require()
    target = lay_out_sharding(v.shape, s)
    v.data = v.place(target) if getattr(v, "host", None) is not None else place(v.data, target)
    v.sharding = s


def lay_out_sharding(shape, s):
    """The sharding `lay_out` gives a value of `shape` for sharding `s`."""
    return s if fits(shape, s) else replicated(s.mesh)


def place(array, s):
    """`array`'s values as a global array laid out by sharding `s`."""
    if array.sharding == s:
        return array
    if array.is_fully_addressable and s.is_fully_addressable:
        return jax.device_put(array, s)
    if array.is_fully_addressable:  # local data for a mesh spanning processes
        host = np.asarray(array)
        return jax.make_array_from_callback(host.shape, s, lambda index: host[index])
    return _move(lambda x: x, array, s, "place")


def from_process_batches(array, s, dim: int = 0):
    """A global array laid out by `s` whose dim `dim` is every process's `array` (this
    process's part of a batch, each process holding as many rows) put end to end."""
    shape = list(array.shape)
    shape[dim] *= pjrt.process_count()
    check_fits(shape, s)
    return jax.make_array_from_process_local_data(s, np.asarray(array), tuple(shape))


@functools.lru_cache(maxsize=None)
def _global_index():
    return {d: i for i, d in enumerate(pjrt.global_devices())}


def device_index(jax_device) -> int:
    """The global index of a jax device (torch_xla's device id)."""
    return _global_index()[jax_device]


def device_name(jax_device) -> str:
    return f"{pjrt.device_type()}:{device_index(jax_device)}"


def describe(s, ndim: int) -> str:
    """Sharding `s` of a rank-`ndim` value as torch_xla prints it."""
    if isinstance(s, SingleDeviceSharding):
        return f"{{maximal device={device_index(next(iter(s.device_set)))}}}"
    hlo = s._to_xla_hlo_sharding(ndim)
    if hlo.is_replicated():
        return "{replicated}"
    if hlo.is_maximal():
        return f"{{maximal device={device_index(s._device_assignment[hlo.tile_assignment_devices()[0]])}}}"
    order = s._device_assignment
    dims = ",".join(str(d) for d in hlo.tile_assignment_dimensions())
    ids = ",".join(str(device_index(order[p])) for p in hlo.tile_assignment_devices())
    last = " last_tile_dim_replicate" if hlo.replicate_on_last_tile_dim() else ""
    return f"{{devices=[{dims}]{ids}{last}}}"


def kind(s, ndim: int) -> int:
    """torch_xla's sharding type of `s` (REPLICATED, MAXIMAL, TILED or PARTIAL)."""
    if isinstance(s, SingleDeviceSharding):
        return MAXIMAL
    hlo = s._to_xla_hlo_sharding(ndim)
    if hlo.is_replicated():
        return REPLICATED
    if hlo.is_maximal():
        return MAXIMAL
    return PARTIAL if hlo.replicate_on_last_tile_dim() else TILED


def shards(array, shape):
    """This process's shards of `array`: (jax device, indices, replica id, jax data) in
    device order. `indices` is a list of slices into the global value, or Ellipsis for a
    replicated one; a replicated array's replica id is its device's global index."""
    out = []
    replicated_ = array.sharding.is_fully_replicated
    for sh in array.addressable_shards:
        if replicated_:
            indices, replica = Ellipsis, device_index(sh.device)
        else:
            indices = [slice(*sl.indices(n)) for sl, n in zip(sh.index, shape)]
            replica = sh.replica_id
        out.append((sh.device, indices, replica, sh.data))
    out.sort(key=lambda s: device_index(s[0]))
    return out


def assemble(shape, s, blocks):
    """A global array of `shape` laid out by `s` from this process's blocks, a dict from jax
    device to numpy data."""
    arrays = [jax.device_put(blocks[d], d) for d in s.addressable_devices]
    return jax.make_array_from_single_device_arrays(tuple(shape), s, arrays)


def from_tile_assignment(tile_assignment, group_assignment, replication_groups, type_: int):
    """The NamedSharding XLA's OpSharding describes, given as torch_xla builds one:
    REPLICATED; TILED with `tile_assignment` (device ids, one axis per tensor dim); PARTIAL
    with `group_assignment` (ids of replication groups, one axis per tensor dim) and
    `replication_groups` (the device ids of each group)."""
    if type_ == REPLICATED:
        n = len(pjrt.global_devices())
        return replicated(mesh(tuple(range(n)), (n,), ("devices",)))
    if type_ == TILED:
        ids = np.asarray(tile_assignment, dtype=int)
        names = tuple(f"dim{i}" for i in range(ids.ndim))
        return sharding(mesh(tuple(int(i) for i in ids.flat), ids.shape, names), names)
    if type_ == PARTIAL:
        groups = np.asarray(group_assignment, dtype=int)
        ids = np.asarray([replication_groups[g] for g in groups.flat], dtype=int)
        names = tuple(f"dim{i}" for i in range(groups.ndim)) + ("replicas",)
        grid = mesh(tuple(int(i) for i in ids.flat), groups.shape + ids.shape[1:], names)
        return sharding(grid, tuple(n if k > 1 else None for n, k in zip(names, groups.shape)))
    raise ValueError(f"an OpSharding of type {type_} has no layout over the devices here "
                     f"(REPLICATED={REPLICATED}, TILED={TILED} and PARTIAL={PARTIAL} have)")


class _DescribedDevice:
    """A device as the runtime's attributes describe it (`device_info.device_attributes`),
    with the fields jax's mesh_utils reads of a device: its place in a TPU slice's torus
    (`coords`, `core_on_chip`), its slice and process."""

    def __init__(self, attributes: dict):
        kind, _, ordinal = attributes["name"].partition(":")
        self.id = int(ordinal)
        self.platform = {"TPU": "tpu", "CUDA": "gpu", "GPU": "gpu", "ROCM": "gpu"}.get(kind, kind.lower())
        self.device_kind = attributes.get("device_kind", "")
        self.process_index = attributes.get("process_index", 0)
        for name in ("coords", "core_on_chip", "slice_index"):
            if name in attributes:
                setattr(self, name, attributes[name])


def hybrid_device_ids(ici_shape, dcn_shape, attributes):
    """Device ids of a mesh of shape ici * dcn over the devices `attributes` describe (the
    runtime's), whose dcn axes run across slices (across processes where the devices are of
    one slice, or have none: CPU and GPU hosts), in the order jax's mesh_utils gives: a
    TPU slice's devices placed by their torus coordinates."""
    from jax.experimental import mesh_utils
    devices = sorted((_DescribedDevice(a) for a in attributes), key=lambda d: d.id)
    if int(np.prod(dcn_shape)) == 1:
        grid = mesh_utils.create_device_mesh(tuple(ici_shape), devices=devices)
    else:
        grid = mesh_utils.create_hybrid_device_mesh(
            tuple(ici_shape), tuple(dcn_shape), devices=devices,
            process_is_granule=len({getattr(d, "slice_index", 0) for d in devices}) == 1)
    return [d.id for d in grid.flat]
