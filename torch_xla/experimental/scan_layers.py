"""torch_xla.experimental.scan_layers: identical layers run as one XLA loop.

`scan_layers(layers, x)` is `nn.Sequential(*layers)(x)` with the layers' parameters and
buffers stacked along a new leading dim and one layer's forward scanned over them
(`experimental.scan`): the program holds one layer, so tracing and compiling cost what
one layer costs, whatever the depth. Gradients reach every layer's own parameters.
"""
from copy import deepcopy
from typing import Dict, Iterable, Mapping, Sequence, Tuple

import torch
import torch.nn as nn
from functorch.compile import default_partition  # type: ignore
from jax.sharding import NamedSharding
from torch.utils._pytree import tree_map

import torch_xla.distributed.spmd as xs
from torch_xla._lazy.runtime import pjrt as _pjrt
from torch_xla._lazy.graph import spmd_layout as _spmd
from torch_xla._lazy.trace import mark_sharding as _sharding

from .scan import scan

_ONE_LAYER_CACHE = {}


def _one_layer_fn(first_layer, partition_fn, is_layer_pure):
    key = (id(partition_fn), id(first_layer))
    if is_layer_pure and key in _ONE_LAYER_CACHE:
        return _ONE_LAYER_CACHE[key]
    example = deepcopy(first_layer)

    def one_layer(carry, params_buffers):
        return torch.func.functional_call(example, params_buffers, carry, strict=True), None
    if is_layer_pure:
        _ONE_LAYER_CACHE[key] = one_layer
    return one_layer


def _stacked(ts):
    """The layers' parameters `ts` stacked along a new leading dim; under SPMD, one sharded
    over the mesh is laid out along the others as it is (its gradient too), so that the
    stack and the gradients unstacked from it stay sharded."""
    out = torch.stack(ts, dim=0)
    s = _sharding.sharding_of(ts[0]) if _pjrt.is_spmd() and ts[0].device.type == "xla" else None
    if not isinstance(s, NamedSharding) or s.is_fully_replicated:
        return out
    jax_mesh = s.mesh
    mesh = xs.Mesh([_spmd.device_index(d) for d in jax_mesh.devices.flat], jax_mesh.devices.shape,
                   tuple(jax_mesh.axis_names))
    spec = tuple(s.spec) + (None,) * (ts[0].dim() - len(s.spec))
    return xs.mark_sharding_with_gradients(out, mesh, (None, *spec))


def _weights_and_buffers(module: nn.Module) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
    return dict(module.named_parameters()), dict(module.named_buffers())


def _ensure_same_structure(dicts: Sequence[Mapping[str, torch.Tensor]]) -> None:
    if not dicts:
        return
    keys = set(dicts[0])
    shapes = {k: dicts[0][k].shape for k in keys}
    for idx, d in enumerate(dicts[1:], start=1):
        if set(d) != keys:
            missing, extra = keys - set(d), set(d) - keys
            raise ValueError(f"Layer {idx} has mismatched keys. Missing keys: {missing}. "
                             f"Extra keys: {extra}.")
        for k in keys:
            if d[k].shape != shapes[k]:
                raise ValueError(f"Shape mismatch for key '{k}' in layer {idx}. Expected "
                                 f"shape {shapes[k]}, but got shape {d[k].shape}.")


def scan_layers(layers: Iterable[torch.nn.Module], input_data, partition_fn=default_partition,
                is_layer_pure=False):
    """Runs each of `layers` (modules of one structure) in turn from `input_data`, as one
    loop over their stacked parameters; returns the last layer's output."""
    layers = list(layers)
    if not layers:
        return input_data
    pairs = [_weights_and_buffers(layer) for layer in layers]
    params, buffers = [p for p, _ in pairs], [b for _, b in pairs]
    _ensure_same_structure(params)
    _ensure_same_structure(buffers)
    stacked = (tree_map(lambda *ts: _stacked(ts), *params),
               tree_map(lambda *ts: torch.stack(ts, dim=0), *buffers))
    one_layer = _one_layer_fn(layers[0], partition_fn, is_layer_pure)
    carry, _ = scan(one_layer, input_data, stacked, partition_fn=partition_fn,
                    is_fn_pure=is_layer_pure)
    return carry
