"""XLAShardedTensor: a tensor seen with its sharding, and the shards each device holds."""
import enum
from dataclasses import dataclass
from typing import List, Union

import torch
from torch.distributed.tensor import DTensor
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from torch_xla._lazy.base import torch_compat
from torch_xla._lazy.trace import mark_sharding as _sharding


class ShardingType(enum.IntEnum):
    """XLA's OpSharding types."""
    REPLICATED = 0
    MAXIMAL = 1
    TUPLE = 2
    TILED = 3
    MANUAL = 4
    PARTIAL = 5
    UNKNOWN = 6


@dataclass
class XLAShard:
    """One device's block of a sharded tensor, read to the CPU when `local_shards` was asked
    (padded at its end to the shard shape where a dim does not divide, as XLA pads)."""
    data: torch.Tensor
    # Slices into the global tensor, one per dim; Ellipsis if the tensor is replicated.
    indices: Union[type(Ellipsis), List[slice]]
    shard_device: str  # the device holding it, e.g. 'CPU:3'
    # 0 for a tiled tensor, the group member index for a partially replicated one, the
    # device's global index for a replicated one.
    replica_id: int

    @property
    def unpadded_data(self) -> torch.Tensor:
        """The data less the padding the last blocks of a dim that does not divide hold."""
        if self.indices is Ellipsis:
            return self.data
        return self.data[tuple(slice(0, i.stop - i.start) for i in self.indices)]


class XLAShardedTensor(DTensor):
    """A tensor on the XLA device together with its sharding (what `mark_sharding` returns),
    a DTensor as torch_xla's is (its layout as DTensor's `_spec`, `placements`).

    It behaves as `global_tensor`, the whole tensor: ops on it run on `global_tensor` and give
    XLAShardedTensors again. One made to require gradients (`requires_grad=True`) is a leaf
    of its own: ops on it are recorded on the XLAShardedTensors, and its `.grad` is one;
    they run in its `__torch_dispatch__`, which torch 2.10 and 2.11 never call (see
    `torch_compat.dtensor_subclasses_dispatch_themselves`): there it is refused.
    `local_shards` reads the blocks on this process's devices, `load_local_shards_`
    replaces them.
    """
    __slots__ = ("global_tensor", "mesh_shape", "partition_spec", "_cached_spec")

    @staticmethod
    def __new__(cls, elem: torch.Tensor, mesh_shape=None, partition_spec=None, *args, **kwargs):
        requires_grad = kwargs.get("requires_grad", False)
        if requires_grad and not torch_compat.dtensor_subclasses_dispatch_themselves():
            raise NotImplementedError(
                "an XLAShardedTensor requiring gradients of its own needs torch to run ops on "
                "it in its __torch_dispatch__, which this torch skips for subclasses of DTensor "
                "(pytorch/pytorch#177716, fixed in torch 2.12): wrap a tensor requiring "
                "gradients instead (its .grad is the gradient)")
        r = torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=elem.device, requires_grad=requires_grad)
        r.global_tensor = elem.detach() if requires_grad else elem
        inherited = elem if isinstance(elem, XLAShardedTensor) else None
        r.mesh_shape = mesh_shape or (inherited.mesh_shape if inherited is not None else None)
        r.partition_spec = partition_spec or (
            inherited.partition_spec if inherited is not None else None)
        r._cached_spec = None
        return r

    @property
    def local_shards(self) -> List[XLAShard]:
        return [XLAShard(data, indices, device, replica)
                for data, indices, device, replica in _sharding.local_shards(self.global_tensor)]

    def load_local_shards_(self, shards: List[XLAShard]) -> None:
        """Replaces the data of this process's devices by `shards` (one per device)."""
        _sharding.load_local_shards(self.global_tensor, [s.data for s in shards],
                                    [s.shard_device for s in shards])

    @property
    def sharding_spec(self) -> str:
        return _sharding.spec_text(self.global_tensor)

    @property
    def sharding_type(self):
        kind = _sharding.spec_kind(self.global_tensor)
        return None if kind is None else ShardingType(kind)

    def __repr__(self):
        return f"XLAShardedTensor({self.global_tensor})"

    @property
    def placements(self) -> tuple:
        """DTensor's placements of this layout: for each mesh dim, `Shard(d)` if it splits
        tensor dim d, else `Replicate()` (from `mesh_shape` and a partition spec of mesh
        dim indices); read from `_spec`, made at the first read."""
        if self.mesh_shape is None or self.partition_spec is None:
            raise ValueError("Placements not available: XLAShardedTensor requires mesh_shape "
                             "and partition_spec to be set. Use mark_sharding() to properly "
                             "initialize sharding information.")
        return self._spec.placements

    def _placements(self) -> tuple:
        from torch.distributed.tensor.placement_types import Replicate, Shard
        by_mesh_dim = {}
        for dim, entry in enumerate(self.partition_spec):
            for axis in (entry if type(entry) is tuple else (entry,)):
                if axis is not None:
                    if type(axis) is not int:
                        raise ValueError(f"placements need mesh dims as indices, the partition "
                                         f"spec names {axis!r}")
                    by_mesh_dim[axis] = dim
        return tuple(Shard(by_mesh_dim[m]) if m in by_mesh_dim else Replicate()
                     for m in range(len(self.mesh_shape)))

    @property
    def _spec(self):
        """The layout as DTensor's `DTensorSpec` (what DTensor code reads of a tensor): a
        `DeviceMesh('xla')` of `mesh_shape` over the devices in order, `placements`, and the
        global tensor's metadata; made once, until `wrap_as_sharded_tensor` changes the layout.
        A tensor an op made (no layout given to it) raises ValueError."""
        if self._cached_spec is None:
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
            import torch_xla.runtime as xr
            if self.mesh_shape is None or self.partition_spec is None:
                raise ValueError("mesh_shape and partition_spec must be specified to create "
                                 "DTensorSpec (a tensor made by an op has neither): use "
                                 "wrap_as_sharded_tensor() or mark_sharding() to set them")
            devices = torch.arange(xr.global_runtime_device_count()).reshape(tuple(self.mesh_shape))
            meta = TensorMeta(shape=self.global_tensor.shape, stride=self.global_tensor.stride(),
                              dtype=self.global_tensor.dtype)
            self._cached_spec = DTensorSpec(mesh=DeviceMesh("xla", devices),
                                            placements=self._placements(), tensor_meta=meta)
        return self._cached_spec

    def invalidate_spec_cache(self) -> None:
        """Forgets the `_spec` made (the layout changed)."""
        self._cached_spec = None

    def redistribute(self, device_mesh, placements, *, async_op: bool = False):
        """This tensor laid out over `device_mesh` (a `Mesh`) as DTensor `placements` say, by a
        sharding constraint in the graph (its data is not moved now); with `async_op`, on a
        copy."""
        from torch.distributed.tensor.placement_types import Partial, Shard
        if len(placements) != len(device_mesh.mesh_shape):
            raise ValueError(f"Number of placements ({len(placements)}) must match mesh "
                             f"dimensions ({len(device_mesh.mesh_shape)})")
        if any(isinstance(p, Partial) for p in placements):
            raise NotImplementedError("Partial placement is not implemented: use Shard or "
                                      "Replicate placements")
        spec = [None] * self.global_tensor.dim()
        for mesh_dim, placement in enumerate(placements):
            if isinstance(placement, Shard):
                if placement.dim >= len(spec):
                    raise IndexError(f"Shard dimension {placement.dim} is out of bounds for "
                                     f"tensor with {len(spec)} dimensions")
                spec[placement.dim] = mesh_dim
        result = self.global_tensor.clone() if async_op else self.global_tensor
        _sharding.annotate(result, device_mesh._sharding(tuple(spec)))
        return XLAShardedTensor(result, mesh_shape=device_mesh.mesh_shape, partition_spec=tuple(spec))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # Ops run on the global tensors, above autograd and functionalization, so that an
        # XLAShardedTensor meets plain tensors as its global tensor would, gradients
        # included. An op that gives back an argument (in place) gives back that argument
        # as it was passed; other XLA tensors it gives are wrapped.
        with torch._C.DisableTorchFunctionSubclass():
            if any(isinstance(x, XLAShardedTensor) and x.requires_grad
                   and not x.global_tensor.requires_grad for x in tree_flatten((args, kwargs))[0]):
                # autograd tracks the wrapper itself (a leaf made to require gradients, or
                # what ops on one gave): it records the op on it (`__torch_dispatch__` below
                # runs it on the global tensors)
                return func(*args, **(kwargs or {}))
        passed = {}

        def unwrap(x):
            if isinstance(x, XLAShardedTensor):
                passed[id(x.global_tensor)] = x
                return x.global_tensor
            if isinstance(x, torch.Tensor):
                passed[id(x)] = x
            return x

        def wrap(x):
            if not isinstance(x, torch.Tensor):
                return x
            if id(x) in passed:
                return passed[id(x)]
            return XLAShardedTensor(x) if x.device.type == "xla" else x

        args, kwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs or {})
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        leaves, structure = tree_flatten(out)
        if not any(isinstance(x, torch.Tensor) for x in leaves):
            return out  # (sizes, numbers: as they are)
        return tree_unflatten([wrap(x) for x in leaves], structure)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # What reaches the dispatcher without a torch function (autograd's own calls).
        def unwrap(x):
            return x.global_tensor if isinstance(x, XLAShardedTensor) else x

        def wrap(x):
            return XLAShardedTensor(x) if isinstance(x, torch.Tensor) else x

        # The global tensors are functional tensors (as users hold them): their ops must pass
        # functionalization, which PyTorch skips below a subclass's __torch_dispatch__.
        with torch._C._SetExcludeDispatchKeyGuard(torch._C.DispatchKey.Functionalize, False):
            out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        return tree_map(wrap, out)
