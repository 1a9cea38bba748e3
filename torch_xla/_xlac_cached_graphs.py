"""`torch_xla._XLAC`'s helpers for running a traced graph again on other inputs (what
torch_xla's first dynamo bridge, `dynamo_bridge.GraphInputMatcher`, builds on): tensor ids,
a graph's device-data inputs, programs kept by graph hash (`_lazy/launch/cached_graphs`), the seed.
"""
import itertools
import weakref

import torch

from torch_xla._lazy.launch import cached_graphs as _cached
from torch_xla._lazy.hooks import device as _device
from torch_xla._lazy.inspect import graph_dump as _graph_dump
from torch_xla._lazy.graph import rng as _rng
from torch_xla._lazy.graph import tensor as _tensor
from torch_xla._lazy.step import execution as _execution

# id(tensor) -> (weak reference to it, its number), given on first ask; dropped with the
# tensor (tensors compare by value, so no WeakKeyDictionary). A buffer's value gets the
# number of the first tensor asked that held it, so that a graph's input found from its
# buffer (`_get_tensors_xla_device_data_node`) has the number of the tensor it came from.
_tensor_ids = {}
_data_ids = weakref.WeakKeyDictionary()  # Value with a buffer -> number
_next_id = itertools.count(1)
# The id torch_xla gives the seed among a graph's inputs. The seed here is a scalar
# parameter of every program, never a device-data input, so no input has it.
_SEED_INFO_ID = -127389


def _known_id(t):
    entry = _tensor_ids.get(id(t))
    return None if entry is None or entry[0]() is not t else entry[1]


def _remember_id(t, number) -> None:
    key = id(t)
    _tensor_ids[key] = (weakref.ref(t, lambda _, key=key: _tensor_ids.pop(key, None)), number)


def _xla_get_tensor_id(t) -> int:
    """A number naming tensor `t` for as long as it lives, the same after in-place updates
    (torch_xla's TensorID); the engine's tensor behind it gets the same number (the live
    tensors `_xla_tensors_report` lists)."""
    number = _known_id(t)
    if number is not None:
        return number
    inner = _tensor.unwrap(t) if t.device.type == "xla" else None
    number = None if inner is None else _known_id(inner)
    if number is None:
        value = None if inner is None else inner._value
        number = _data_ids.get(value) if value is not None and not value.pending else None
        if number is None:
            number = next(_next_id)
            if value is not None and not value.pending:
                _data_ids[value] = number
    _remember_id(t, number)
    if inner is not None and inner is not t:
        _remember_id(inner, number)
    return number


def _values(tensors):
    return [_tensor.unwrap(t)._value for t in tensors]


def _get_tensors_xla_device_data_node(tensors):
    """(ids, tensors): the device data the pending graph behind `tensors` reads, in the
    order its program takes them, each as an XLA tensor on that buffer and its number (that
    of the tensor the buffer came from, as `_xla_get_tensor_id` gives it)."""
    ids, inputs = [], []
    for value in _cached.leaves(_values(tensors)):
        if value not in _data_ids:
            _data_ids[value] = next(_next_id)
        ids.append(_data_ids[value])
        inputs.append(_tensor.to_functional(_tensor.wrap(value)))
    return ids, inputs


def _xla_warm_up_cache(tensors, devices) -> None:
    """Compiles the program of the pending graph behind `tensors` (not run; they stay
    pending) and keeps it under the graph's hash (`_XLAC._get_graph_hash`)."""
    tensors = list(tensors)
    _cached.warm_up(_graph_dump.graph_hash(tensors), _values(tensors))


def _run_cached_graph(graph_hash, inputs) -> list:
    """The program `_xla_warm_up_cache` kept under `graph_hash`, run on `inputs` (tensors
    in the order `_get_tensors_xla_device_data_node` gives; CPU ones are copied to the
    device): its outputs, one tensor for each root of the graph that is not an input."""
    values = []
    for t in inputs:
        t = t if t.device.type == "xla" else _device.transfer(t, "xla:0")
        values.append(_tensor.unwrap(t)._value)
    _execution.materialize(values)
    return [_tensor.to_functional(_tensor.wrap(v)) for v in _cached.run(graph_hash, values)]


def _get_seed_info_id() -> int:
    return _SEED_INFO_ID


def _xla_get_rng_seed(device: str = "") -> int:
    """The random state of `device` (default xla:0): the seed its next random op uses."""
    return _rng.get_state(torch.device(device or "xla:0").index or 0)


def _get_base_seed_as_tensor(device: str = "") -> torch.Tensor:
    """`_xla_get_rng_seed(device)` as an int64 tensor on `device`."""
    return torch.tensor(_xla_get_rng_seed(device), dtype=torch.int64, device=device or "xla:0")
