"""FSDPv2: fully sharded data parallelism written as SPMD shardings.

Every parameter of the wrapped module is sharded over the mesh axis 'fsdp' along its
largest dim, and the module's output along its batch dim; XLA's partitioner then gathers
each parameter where it is used and reduce-scatters its gradient, which is FSDP. Wrapping
submodules (`auto_wrap_policy`) shards their outputs too. Each wrapped module's backward
ends in an optimization barrier on its gradients (against very large fusions while they are
synchronized). Needs `xr.use_spmd()`.
"""
import warnings
from typing import Any, Callable, Optional

import torch
import torch.nn as nn

import torch_xla.distributed.spmd as spmd
from torch_xla._lazy.trace import mark_sharding as _sharding
from torch_xla.distributed.fsdp._wrapper import ForwardsToWrapped, check_wrappable
from torch_xla.distributed.fsdp.wrap import recursive_wrap


def _prepare_spmd_partition_spec(param, extra_data_axis=None, shard_maximal=False):
    """('fsdp' on dim 0, or on the largest dim if `shard_maximal`; `extra_data_axis` joins
    'fsdp' on that dim), None elsewhere; () for a scalar."""
    spec = [None] * param.dim()
    if not spec:
        return ()
    dim = list(param.shape).index(max(param.shape)) if shard_maximal else 0
    spec[dim] = (extra_data_axis, "fsdp") if extra_data_axis else "fsdp"
    return tuple(spec)


class SpmdFullyShardedDataParallel(ForwardsToWrapped, nn.Module):
    """Wraps `module` for FSDP over `mesh` (default: the global mesh), which needs an axis
    named 'fsdp'.

    Args:
      shard_output: `shard_output(output, mesh)` shards the forward's output; by default
        its (first) tensor is sharded over 'fsdp' (and `extra_data_axis`) on dim 0.
      auto_wrap_policy / auto_wrapper_callable: wrap submodules first (as FSDP does), with
        `auto_wrapper_callable` (default this class) in place of the class itself; wrapping
        with `checkpoint_module(m)` there gives gradient checkpointing.
      extra_data_axis: another mesh axis the batch is split over with 'fsdp'.
    """
    wrapped_attribute = "_orig_module"

    def __init__(self, module: nn.Module, *, mesh: Optional[spmd.Mesh] = None,
                 shard_output: Optional[Callable] = None, auto_wrap_policy: Optional[Callable] = None,
                 auto_wrapper_callable: Optional[Callable] = None,
                 extra_data_axis: Optional[str] = None):
        check_wrappable(module, SpmdFullyShardedDataParallel,
                        "The module wrapped by FSDP must define a `forward` method and call it during "
                        "the module's forward pass (do not wrap nn.ModuleList or nn.ModuleDict).")
        mesh = mesh or spmd.get_global_mesh()
        if mesh is None:
            raise ValueError("No mesh is provided and no global mesh is set. Please provide a mesh.")
        if "fsdp" not in (mesh.axis_names or ()):
            raise ValueError("The mesh must have an axis named 'fsdp'.")
        if extra_data_axis and extra_data_axis not in mesh.axis_names:
            raise ValueError(f"The provided {extra_data_axis} axis is not in the mesh.")
        super().__init__()
        if auto_wrap_policy is not None:
            for name, sub in module.named_modules():
                if isinstance(sub, SpmdFullyShardedDataParallel):
                    raise ValueError(f"Expected {name} to NOT be SpmdFullyShardedDataParallel if "
                                     "using an `auto_wrap_policy`")
            recursive_wrap(module, auto_wrap_policy,
                           auto_wrapper_callable or SpmdFullyShardedDataParallel, ignored_modules=set(),
                           ignored_params=set(), only_wrap_children=True, mesh=mesh,
                           shard_output=shard_output)
        self._orig_module = module.to("xla")
        self._mesh = mesh
        for param in module.parameters():  # those a wrapped submodule has not sharded yet
            if _sharding.sharding_of(param) is None:
                spmd.mark_sharding(param, mesh, _prepare_spmd_partition_spec(param, shard_maximal=True))
        spmd.apply_backward_optimization_barrier(module)
        self._shard_output = shard_output or _shard_first_output(extra_data_axis)

    @property
    def module(self) -> nn.Module:
        return self._orig_module

    def forward(self, *args: Any, **kwargs: Any):
        output = self.module(*args, **kwargs)
        self._shard_output(output, self._mesh)
        return output

def _shard_first_output(extra_data_axis):
    def shard_output(output, mesh):
        tensor = output
        if isinstance(output, tuple):
            warnings.warn("The output is a tuple, but only the first element is sharded. If this "
                          "is not intended, please provide your own shard_output callable.")
            tensor = output[0]
        if not isinstance(tensor, torch.Tensor):
            raise RuntimeError(f"The output type is not supported: {type(output)}. Please provide "
                               "your own shard_output callable.")
        spmd.mark_sharding(tensor, mesh, _prepare_spmd_partition_spec(tensor, extra_data_axis))
    return shard_output
