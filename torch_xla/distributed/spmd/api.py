"""PyTorch's DTensor API on SPMD: what `torch.distributed.tensor.distribute_tensor` and
`distribute_module` call for a `DeviceMesh` of device type 'xla'.

A DeviceMesh becomes a `Mesh` of the same device ids and axis names, its placements a
partition spec (`Shard(d)` on mesh dim i splits tensor dim d over axis i, `Replicate()`
splits nothing), and the tensor is given that sharding with `mark_sharding`.
"""
import inspect
from typing import Callable, Optional, Sequence

import torch

import torch_xla.runtime as xr

from .xla_sharded_tensor import ShardingType, XLAShardedTensor
from .xla_sharding import Mesh, mark_sharding


def auto_policy(mod_name, mod, mesh):
    """The `partition_fn` that asks for auto-sharding (`xla_distribute_module`)."""


def convert_to_xla_mesh(dt_mesh) -> Mesh:
    """The `Mesh` of DeviceMesh `dt_mesh`: its device ids, shape and axis names."""
    xr.use_spmd()
    if dt_mesh.size() != xr.global_runtime_device_count():
        raise AssertionError(f"the DeviceMesh has {dt_mesh.size()} devices, the runtime "
                             f"{xr.global_runtime_device_count()}")
    return Mesh(dt_mesh.mesh.flatten().numpy(), tuple(dt_mesh.mesh.size()), dt_mesh.mesh_dim_names)


def convert_to_xla_partition_spec(tensor: torch.Tensor, placements: Sequence) -> tuple:
    """The partition spec of DTensor `placements` for `tensor`: for each tensor dim, the
    mesh dims (indices) that shard it."""
    spec = [()] * len(tensor.shape)
    for mesh_dim, placement in enumerate(placements):
        if placement.is_shard():
            spec[placement.dim] = spec[placement.dim] + (mesh_dim,)
        elif not placement.is_replicate():
            raise ValueError(f"Unsupported placement type: {type(placement).__name__}")
    return tuple(None if not axes else axes[0] if len(axes) == 1 else axes for axes in spec)


def xla_distribute_tensor(tensor: torch.Tensor, device_mesh,
                          placements: Optional[Sequence] = None) -> XLAShardedTensor:
    """`tensor` (moved to the XLA device) laid out over `device_mesh` as `placements` say
    (all replicated if None): an XLAShardedTensor whose global tensor is `tensor`."""
    if device_mesh.device_type != "xla":
        raise AssertionError(f"a DeviceMesh of device type 'xla' is needed, got "
                             f"'{device_mesh.device_type}'")
    mesh = convert_to_xla_mesh(device_mesh)
    if placements is None:
        from torch.distributed.tensor import Replicate
        placements = [Replicate() for _ in range(device_mesh.ndim)]
    if len(placements) != device_mesh.ndim:
        raise AssertionError(f"`placements` must have the same length as `device_mesh.ndim`! "
                             f"Found placements length: {len(placements)}, and "
                             f"device_mesh.ndim: {device_mesh.ndim}.")
    if type(tensor).__name__ == "DTensor":
        raise ValueError("Cannot distribute a DTensor with local tensor on xla devices. "
                         "The input tensor must be global.")
    if isinstance(tensor, XLAShardedTensor):
        if tensor.sharding_type not in (None, ShardingType.REPLICATED):
            raise AssertionError("XLAShardedTensor `tensor` is already annotated with "
                                 "non-replication sharding. Clear the existing sharding "
                                 "annotation first, by calling "
                                 "torch_xla.distributed.spmd.clear_sharding API.")
        tensor = tensor.global_tensor
    elif not tensor.is_meta and tensor.device.type != "xla":
        tensor = tensor.to("xla")
    return mark_sharding(tensor, mesh, convert_to_xla_partition_spec(tensor, placements))


def _hook(fn, what: str):
    """`fn(module, values, device_mesh)` as a hook's function; `fn(values, device_mesh)`,
    the older form, is accepted too."""
    n = len(inspect.signature(fn).parameters)
    if n == 3:
        return lambda module, values, mesh: fn(module, values, mesh)
    if n == 2:
        return lambda module, values, mesh: fn(values, mesh)
    raise ValueError(f"{what} should take in 3 arguments, but got {n} arguments!")


def xla_distribute_module(module: torch.nn.Module, device_mesh=None,
                          partition_fn: Optional[Callable] = None,
                          input_fn: Optional[Callable] = None,
                          output_fn: Optional[Callable] = None) -> torch.nn.Module:
    """Lays `module` out over `device_mesh`: `partition_fn(name, submodule, device_mesh)` is
    called on each submodule (to distribute its parameters; `auto_policy` asks for
    auto-sharding), `input_fn` runs as a forward pre-hook on the inputs and `output_fn` as
    a forward hook on the outputs, each given the module, the values and the mesh."""
    xr.use_spmd()
    if partition_fn is auto_policy:
        xr.use_spmd(auto=True)  # (raises here: auto-sharding is not available)
    elif partition_fn is not None:
        for name, submodule in module.named_modules():
            partition_fn(name, submodule, device_mesh)
    if input_fn is not None:
        pre = _hook(input_fn, "input_fn")
        module.register_forward_pre_hook(lambda m, inputs: pre(m, inputs, device_mesh))
    if output_fn is not None:
        post = _hook(output_fn, "output_fn")
        module.register_forward_hook(lambda m, inputs, outputs: post(m, outputs, device_mesh))
    return module
