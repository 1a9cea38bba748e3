"""Meshes, partition specs and `mark_sharding`: how tensors are laid out over the devices.

A `Mesh` arranges the runtime's devices (by global id) in a named N-d grid; a partition
spec names, for each tensor dim, the mesh axes it is split over (an axis name or index, a
tuple of them, or None for replicated). Both become jax's `Mesh` and `NamedSharding`
(`torch_xla._lazy.graph.spmd_layout`), and XLA's partitioner does the rest.
"""
import ast
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._pytree import tree_flatten, tree_unflatten

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from torch_xla._lazy.trace import op_rules as _op_rules
from torch_xla._lazy.trace import mark_sharding as _sharding
from torch_xla._lazy.graph import spmd_layout as _spmd
from torch_xla._lazy.trace import op_sharding as _op_sharding

from .einsum_linear import (EinsumLinear, XLAPatchedLinear,  # noqa: F401  (upstream's home
                            apply_xla_patch_to_nn_linear, xla_patched_nn_linear_forward)  # of them)
from .xla_sharded_tensor import ShardingType, XLAShardedTensor  # noqa: F401  (ShardingType lives here too)

PartitionSpec = Tuple[Union[Tuple[Union[int, str], ...], int, str, None], ...]


def _check(condition, message):
    if not condition:
        raise AssertionError(message)


class Mesh:
    """The runtime's devices arranged as a logical N-d mesh.

    `device_ids` (global device ids, each once) fill a grid of shape `mesh_shape` in row-major
    order; `axis_names` name its axes. Example: 8 devices as 4 (data) x 2 (model):
    `Mesh(np.arange(8), (4, 2), ('data', 'model'))`.
    """

    def __init__(self, device_ids, mesh_shape, axis_names=None):
        ids = np.asarray(device_ids).reshape(-1)
        count = xr.global_runtime_device_count()
        _check(count == len(ids), f"Number of device IDs ({len(ids)}) must match the global "
                                  f"number of devices ({count})")
        if axis_names is not None:
            _check(len(mesh_shape) == len(axis_names), f"Number of axis names ({len(axis_names)}) "
                                                       f"must match mesh dimensions ({len(mesh_shape)})")
            _check(len(set(axis_names)) == len(axis_names), f"Axis names must be unique, got: {axis_names}")
        _check(len(ids) == int(np.prod(mesh_shape)),
               f"Number of device IDs ({len(ids)}) must match mesh size ({int(np.prod(mesh_shape))})")
        _check(len(np.unique(ids)) == len(ids), f"Device IDs must be unique, got: {ids}")
        _check(all(0 <= d < len(ids) for d in ids),
               f"Device IDs must be less than mesh size ({len(ids)}), got: {ids}")
        self.device_ids = ids
        # also as Python ints, which code dynamo traces reads (`_mark`): torch 2.9's dynamo
        # makes a numpy array read in an autograd.Function's forward a tensor, and fails on
        # its `.tolist()`
        self._device_id_list = [int(i) for i in ids]
        self.mesh_shape = tuple(int(d) for d in mesh_shape)
        self.axis_names = None if axis_names is None else tuple(axis_names)

    def size(self) -> int:
        return int(np.prod(self.mesh_shape))

    def shape(self) -> OrderedDict:
        names = self.axis_names if self.axis_names is not None else range(len(self.mesh_shape))
        return OrderedDict(zip(names, self.mesh_shape))

    def get_logical_mesh(self) -> np.ndarray:
        return self.device_ids.reshape(self.mesh_shape)

    def get_axis_name_idx(self, name: str) -> Optional[int]:
        if self.axis_names is None or name not in self.axis_names:
            return None
        return self.axis_names.index(name)

    def _jax_axis_names(self):
        return self.axis_names if self.axis_names is not None else tuple(
            str(i) for i in range(len(self.mesh_shape)))

    def _jax_mesh_args(self) -> tuple:
        """(device ids, shape, axis names): the jax mesh this mesh is, as `_spmd` takes it."""
        return tuple(int(i) for i in self.device_ids), self.mesh_shape, self._jax_axis_names()

    def get_jax_mesh(self):
        """The jax `Mesh` of the same devices in the same order."""
        return _spmd.mesh(*self._jax_mesh_args())

    def _axis(self, p):
        if type(p) is int:
            _check(0 <= p < len(self.mesh_shape),
                   f"partition_spec contains out of bound index {p} into mesh_shape {self.mesh_shape}.")
            return self._jax_axis_names()[p]
        if type(p) is str:
            if self.get_axis_name_idx(p) is None:
                raise ValueError(f"Axis name {p} is not defined in the given mesh")
            return p
        raise ValueError(f"Spec type {type(p)} is not supported in partition spec")

    def _jax_spec(self, partition_spec) -> tuple:
        """The partition spec in jax's terms (axis names), checked."""
        out = []
        for p in partition_spec:
            if p is None:
                out.append(None)
            elif type(p) is tuple:
                if any(type(x) is tuple for x in p):
                    raise AssertionError("Partition spec cannot contain nested tuples")
                out.append(tuple(self._axis(x) for x in p))
            else:
                out.append(self._axis(p))
        used = [a for p in out if p is not None for a in (p if type(p) is tuple else (p,))]
        _check(len(used) == len(set(used)), "Each device mesh dimension should appear at most once "
                                            f"in partition_spec {partition_spec}.")
        return tuple(out)

    def _sharding(self, partition_spec):
        return _spmd.mesh_sharding(*self._jax_mesh_args(), self._jax_spec(partition_spec))

    def get_op_sharding(self, partition_spec: PartitionSpec) -> "_op_sharding.OpSharding":
        """The OpSharding of `partition_spec` over this mesh (what `_xla_mark_sharding`
        takes)."""
        return _op_sharding.OpSharding.of(self._sharding(tuple(partition_spec)),
                                             len(partition_spec))

    def __str__(self):
        return (f"{{'device_ids': {self.device_ids.tolist()}, 'mesh_shape': {self.mesh_shape}, "
                f"'axis_names': {self.axis_names}}}")

    @classmethod
    def from_str(cls, mesh_str: str) -> Optional["Mesh"]:
        """The Mesh `str(mesh)` describes, or None if `mesh_str` is not such a description."""
        try:
            d = ast.literal_eval(mesh_str.replace("Mesh", ""))
            return cls(np.array(d["device_ids"]), d["mesh_shape"], d["axis_names"])
        except (ValueError, SyntaxError, KeyError, TypeError):
            return None


class HybridMesh(Mesh):
    """A mesh whose `dcn_mesh_shape` axes run across slices (on this runtime: across
    processes where devices have no slice) and `ici_mesh_shape` axes within one, each axis
    of size ici * dcn, devices ordered as jax's mesh_utils orders them."""

    def __init__(self, *, ici_mesh_shape, dcn_mesh_shape=None, axis_names=None):
        if dcn_mesh_shape is None:
            dcn_mesh_shape = (1,) * len(ici_mesh_shape)
        _check(len(ici_mesh_shape) == len(dcn_mesh_shape),
               "ici_mesh_shape and dcn_mesh_shape must have the same length")
        self.ici_mesh_shape = tuple(ici_mesh_shape)
        self.dcn_mesh_shape = tuple(dcn_mesh_shape)
        shape = tuple(i * d for i, d in zip(ici_mesh_shape, dcn_mesh_shape))
        super().__init__(np.array(_spmd.hybrid_device_ids(
            ici_mesh_shape, dcn_mesh_shape, xr.global_runtime_device_attributes())),
                         shape, axis_names)


_GLOBAL_MESH = [None]


def set_global_mesh(mesh: Mesh) -> None:
    _GLOBAL_MESH[0] = mesh


def get_global_mesh() -> Optional[Mesh]:
    return _GLOBAL_MESH[0]


def get_1d_mesh(axis_name: Optional[str] = None) -> Mesh:
    """Every device of the runtime on one axis."""
    n = xr.global_runtime_device_count()
    return Mesh(np.arange(n), (n,), None if axis_name is None else (axis_name,))


def _global(t):
    return t.global_tensor if isinstance(t, XLAShardedTensor) else t


def wrap_as_sharded_tensor(t, mesh_shape=None, partition_spec=None) -> XLAShardedTensor:
    if not isinstance(t, XLAShardedTensor):
        return XLAShardedTensor(t, mesh_shape=mesh_shape, partition_spec=partition_spec)
    if mesh_shape is not None:
        t.mesh_shape = mesh_shape
    if partition_spec is not None:
        t.partition_spec = partition_spec
    if mesh_shape is not None or partition_spec is not None:
        t.invalidate_spec_cache()
    return t


def mark_sharding(t: Union[torch.Tensor, XLAShardedTensor], mesh: Mesh,
                  partition_spec: PartitionSpec) -> XLAShardedTensor:
    """Lays `t` out over `mesh` as `partition_spec` says, in place: data already on the
    device is resharded now; a tensor still to be computed (an intermediate) gets a sharding
    constraint that XLA's partitioner honours. Returns `t` as an XLAShardedTensor (inside a
    graph torch.compile captures, `t` itself: the mark is an op of the graph).

    Each entry of `partition_spec` (one per dim of `t`) is a mesh axis (name or index), a
    tuple of axes (the dim is split over all of them), or None (replicated).
    """
    _check(len(t.shape) == len(partition_spec), f"Partition spec length ({len(partition_spec)}) "
                                                f"should be equal to the input rank ({len(t.shape)}).")
    if _mark(_global(t), mesh, partition_spec):
        return t  # (in a graph being captured: no XLAShardedTensor, a DTensor, is made there)
    return wrap_as_sharded_tensor(t, mesh_shape=mesh.mesh_shape, partition_spec=partition_spec)


def _mark(t, mesh, partition_spec) -> bool:
    """mark_sharding of XLA tensor `t`; of a tensor being captured (torch.compile,
    AOTAutograd), the op `xla::dynamo_mark_sharding` in its graph (then True)."""
    captured = torch.compiler.is_compiling() or isinstance(t, (FakeTensor, FunctionalTensor))
    if captured:
        torch.ops.xla.dynamo_mark_sharding(t, mesh._device_id_list,
                                           list(mesh.mesh_shape), repr(mesh.axis_names),
                                           repr(tuple(partition_spec)))
    else:
        _sharding.mark(t, mesh._sharding(tuple(partition_spec)))
    return captured


def annotate_custom_sharding(t: Union[torch.Tensor, XLAShardedTensor], mesh: Mesh,
                             partition_spec: PartitionSpec) -> XLAShardedTensor:
    """Adds a sharding constraint for XLA's partitioner on `t` (in place), leaving its data
    as it is laid out now: the next program lays the value out by `partition_spec`. Unlike
    `mark_sharding`, data already on the devices is not resharded here."""
    _check(len(t.shape) == len(partition_spec), f"Partition spec length ({len(partition_spec)}) "
                                                f"should be equal to the input rank ({len(t.shape)}).")
    _sharding.annotate(_global(t), mesh._sharding(tuple(partition_spec)))
    return wrap_as_sharded_tensor(t, mesh_shape=mesh.mesh_shape, partition_spec=partition_spec)


class _ShardAs(torch.autograd.Function):
    """Two tensors laid out alike; their gradients are laid out alike too."""

    @staticmethod
    def forward(ctx, x, y):
        return _sharding.shard_alike(x, y)

    @staticmethod
    def backward(ctx, gx, gy):
        if gx is None or gy is None:
            return gx, gy
        return _sharding.shard_alike(gx, gy)


def shard_as(a, b):
    """`a` and `b` (pytrees of the same structure) again, each pair of tensors laid out
    alike by XLA's partitioner, whichever layout it picks (jax's `shard_alike`): use at
    least one of the results. None leaves must be None in both."""
    a_flat, a_structure = tree_flatten(a)
    b_flat, b_structure = tree_flatten(b)
    _check(a_structure == b_structure,
           f"a and b must have the same structure. got {a_structure} and {b_structure}")
    a_out, b_out = [], []
    for x, y in zip(a_flat, b_flat):
        if x is None or y is None:
            _check(x is None and y is None, "a None leaf of a must be None in b, and back")
        else:
            x, y = _ShardAs.apply(_global(x), _global(y))
        a_out.append(x)
        b_out.append(y)
    return tree_unflatten(a_out, a_structure), tree_unflatten(b_out, b_structure)


def clear_sharding(t: Union[torch.Tensor, XLAShardedTensor]) -> torch.Tensor:
    """Removes `t`'s sharding annotation (in place); returns the plain tensor."""
    _sharding.clear(_global(t))
    return _global(t)


def wrap_if_sharded(x):
    """`x` as an XLAShardedTensor if it is an XLA tensor with a sharding, else `x`."""
    if (isinstance(x, torch.Tensor) and not isinstance(x, XLAShardedTensor)
            and x.device.type == "xla" and _sharding.spec_kind(x) is not None):
        return XLAShardedTensor(x)
    return x


class MarkShardingFunction(torch.autograd.Function):
    """`mark_sharding` of an intermediate and of its gradient, on a new tensor (the input is
    left alone): `MarkShardingFunction.apply(t, mesh, partition_spec)`."""

    @staticmethod
    def forward(ctx, t, mesh, partition_spec):
        ctx.mesh, ctx.partition_spec = mesh, partition_spec
        out = t.clone()
        _mark(out, mesh, partition_spec)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.clone()
        _mark(out, ctx.mesh, ctx.partition_spec)
        return out, None, None


def mark_sharding_with_gradients(t, mesh: Mesh, partition_spec: PartitionSpec) -> torch.Tensor:
    """A new tensor equal to `t` with `partition_spec` on it and on its gradient."""
    _check(len(t.shape) == len(partition_spec), f"Partition spec length ({len(partition_spec)}) "
                                                f"should be equal to the input rank ({len(t.shape)}).")
    return MarkShardingFunction.apply(t, mesh, partition_spec)


@dataclass
class ShardingSpec:
    """A mesh and partition spec to apply to tensors of the matching rank (the data loader's
    `input_sharding`). `minibatch`: each process holds its own part of the batch dim."""
    mesh: Mesh
    partition_spec: PartitionSpec
    minibatch: Optional[bool] = False

    def can_apply(self, t: torch.Tensor) -> bool:
        return len(t.shape) == len(self.partition_spec)

    def xla_spec(self, t: torch.Tensor):
        """The jax sharding for `t`, or None if this spec does not fit its rank."""
        if not self.can_apply(t):
            return None
        return self.mesh._sharding(tuple(self.partition_spec))

    def apply(self, t: torch.Tensor) -> None:
        mark_sharding(t, self.mesh, self.partition_spec)


def apply_backward_optimization_barrier(m: torch.nn.Module) -> None:
    """Puts the gradients of `m`'s parameters and of its inputs behind an optimization
    barrier when its backward has run (a full backward hook), so that XLA does not fuse
    that backward with the rest: keeps the buffers of gradient synchronization small."""
    def barrier(module, grad_input, grad_output):
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        grads += [g for g in grad_input if isinstance(g, torch.Tensor)]
        xm.optimization_barrier_(grads)
    m.register_full_backward_hook(barrier)


class _EnterManual(torch.autograd.Function):
    """The shard view of a global tensor; its gradient leaves the manual region again."""

    @staticmethod
    def forward(ctx, t, sharding):
        ctx.sharding, ctx.full_shape = sharding, tuple(t.shape)
        return _sharding.enter_manual(t, sharding)

    @staticmethod
    def backward(ctx, grad):
        return _sharding.leave_manual(grad, ctx.sharding, ctx.full_shape), None


class _LeaveManual(torch.autograd.Function):
    """The global tensor of a shard view; its gradient enters the manual region."""

    @staticmethod
    def forward(ctx, t, sharding, full_shape):
        ctx.sharding = sharding
        return _sharding.leave_manual(t, sharding, full_shape)

    @staticmethod
    def backward(ctx, grad):
        return _sharding.enter_manual(grad, ctx.sharding), None, None


def _mark_manual_sharding(t: Union[torch.Tensor, XLAShardedTensor]) -> XLAShardedTensor:
    """Asserts that `t` is in manual sharding mode (computed inside a manual region)."""
    manual = _op_sharding.OpSharding([], [], [], ShardingType.MANUAL)
    _op_sharding.mark_manual(_global(t), manual)
    return wrap_as_sharded_tensor(t)


def _mesh_or_global(mesh, name) -> Mesh:
    mesh = get_global_mesh() if mesh is None else mesh
    _check(mesh is not None, f"{name}: no mesh given and no global mesh set (set_global_mesh)")
    return mesh


def enable_manual_sharding(t: Union[torch.Tensor, XLAShardedTensor], partition_spec: PartitionSpec,
                           *, mesh: Optional[Mesh] = None) -> XLAShardedTensor:
    """`t` laid out by `partition_spec` over `mesh` (the global mesh if None), seen as one
    shard per device: the result has a shard's shape, and ops on it and on what is computed
    from it run per shard, with no partitioning and no collectives (XLA's manual sharding;
    a dim that does not divide is padded at its end). Pass the results to
    `disable_manual_sharding` before reading them or ending the step."""
    mesh = _mesh_or_global(mesh, "enable_manual_sharding")
    g = _global(t)
    _check(len(g.shape) == len(partition_spec), f"Partition spec length ({len(partition_spec)}) "
                                                f"should be equal to the input rank ({len(g.shape)}).")
    sharding = mesh._sharding(tuple(partition_spec))
    _sharding.mark(g, sharding)
    view = _EnterManual.apply(g, sharding)
    return wrap_as_sharded_tensor(view, mesh_shape=mesh.mesh_shape, partition_spec=partition_spec)


def disable_manual_sharding(t: Union[torch.Tensor, XLAShardedTensor], partition_spec: PartitionSpec,
                            full_shape: torch.Size, *, mesh: Optional[Mesh] = None) -> XLAShardedTensor:
    """The global tensor of `full_shape` whose shards, laid out by `partition_spec` over
    `mesh` (the global mesh if None), are those of `t`, a tensor in manual sharding mode:
    ends the manual region."""
    mesh = _mesh_or_global(mesh, "disable_manual_sharding")
    g = _global(t)
    _check(len(g.shape) == len(partition_spec), f"Partition spec length ({len(partition_spec)}) "
                                                f"should be equal to the input rank ({len(g.shape)}).")
    out = _LeaveManual.apply(g, mesh._sharding(tuple(partition_spec)), tuple(full_shape))
    return wrap_as_sharded_tensor(out, mesh_shape=mesh.mesh_shape, partition_spec=partition_spec)


@torch.library.custom_op("xla::dynamo_mark_sharding", mutates_args=())
def dynamo_mark_sharding(t: torch.Tensor, device_ids: list[int], mesh_shape: list[int],
                         axis_names: str, partition_spec: str) -> None:
    """`mark_sharding` as an op `torch.compile` can capture (`torch.ops.xla.
    dynamo_mark_sharding`): the mesh and the partition spec given as lists and the text of
    Python literals (`axis_names` "None" or "('x', 'y')", `partition_spec` "(1, 0)")."""
    mesh = Mesh(np.array(device_ids), tuple(mesh_shape), ast.literal_eval(axis_names))
    mark_sharding(t, mesh, ast.literal_eval(partition_spec))


@dynamo_mark_sharding.register_fake
def _(t, device_ids, mesh_shape, axis_names, partition_spec) -> None:
    return None


def _annotated_sharding(device_ids, mesh_shape, axis_names, partition_spec):
    """The sharding a captured `dynamo_mark_sharding` gives its tensor."""
    mesh = Mesh(np.array(device_ids), tuple(mesh_shape), ast.literal_eval(axis_names))
    return mesh._sharding(tuple(ast.literal_eval(partition_spec)))


# A graph keeps the op (it returns nothing: dead code otherwise), and lowers it as the
# sharding constraint it stands for.
torch.fx.node.has_side_effect(torch.ops.xla.dynamo_mark_sharding.default)
_op_rules.SHARDING_ANNOTATIONS[torch.ops.xla.dynamo_mark_sharding.default] = _annotated_sharding
