"""torch_xla's `LoweringContext`: the HLO module of the program behind some tensors, without
running it, and the values its parameters take.

The module is jax's lowering of the very program a sync would run for the tensors (a
tensor that holds a buffer is a parameter returned as it is). Its parameters are the
buffers the graph reads, then the Python scalars it takes (torch_xla uploads a scalar as
device data, a parameter too), numbered as the HLO numbers them; an argument the program
does not use is no parameter, as in torch_xla, whose lowering never reaches it.
"""
import jax
import numpy as np
import torch

from . import graph_dump, hlo_proto
from ..launch import transfers
from ..graph.tensor import to_functional, unwrap, wrap


class _Parameter:
    """One parameter of a built module: a buffer (`value`) or a scalar (`scalar`) of the
    program on XLA device `device`."""
    __slots__ = ("value", "scalar", "device")

    def __init__(self, device: int, value=None, scalar=None):
        self.device, self.value, self.scalar = device, value, scalar

    def host(self) -> torch.Tensor:
        if self.value is not None:
            return transfers.read(self.value)
        return torch.from_numpy(np.array(self.scalar))

    def on_device(self) -> torch.Tensor:
        return to_functional(wrap(self.value if self.value is not None else
                                  transfers.from_cpu(self.host(), self.device)))


def _kept_arguments(lowered) -> list:
    """Positions, among the program's flat arguments, of those that are parameters of its
    HLO (jax leaves out the ones the program does not use)."""
    kept = getattr(lowered, "_lowering", None)
    kept = None if kept is None else kept.compile_args.get("kept_var_idx")
    if kept is None:
        raise RuntimeError(f"jax {jax.__version__} does not say which arguments its lowering kept")
    return sorted(kept)


class LoweringContext:
    """`torch_xla._XLAC.lowering.LoweringContext(name)`: `build(tensors)` lowers the pending
    graph behind `tensors`; `hlo()`, `hlo_text()` and `hlo_json()` give its `HloModuleProto`
    (serialized, protobuf text, JSON), the parameter mappings the values its parameters
    take."""

    def __init__(self, name: str = "PyLoweringContext"):
        self._name, self._name_string = name, ""
        self._module, self._parameters = None, ()

    def build(self, tensors) -> None:
        w = graph_dump.tensors_walk(list(tensors))
        if w is None:
            raise ValueError("LoweringContext.build() needs at least one XLA tensor")
        lowered = graph_dump.walk_lowered(w)
        module = hlo_proto.lowered_module(lowered)
        module.name = self._name
        flat = [_Parameter(w.device, value=v) for v in w.leaves]
        flat += [_Parameter(w.device, scalar=s) for s in jax.tree.leaves(graph_dump.walk_scalars(w))]
        self._module = module
        self._parameters = [flat[i] for i in _kept_arguments(lowered)]

    def _built(self):
        if self._module is None:
            raise RuntimeError("LoweringContext: call build() first")
        return self._module

    def hlo(self) -> bytes:
        """The serialized `HloModuleProto` (deterministic bytes)."""
        return self._built().SerializeToString(deterministic=True)

    def hlo_text(self) -> str:
        return hlo_proto.text(self._built())

    def hlo_json(self) -> str:
        return hlo_proto.json(self._built())

    def parameter_id_tensor_mapping(self) -> dict:
        """{parameter number: its value as a CPU tensor} (copied from the device)."""
        self._built()
        return {i: p.host() for i, p in enumerate(self._parameters)}

    def device_parameter_id_tensor_mapping(self) -> dict:
        """{parameter number: an XLA tensor of its value}, without copying a buffer to the host."""
        self._built()
        return {i: p.on_device() for i, p in enumerate(self._parameters)}

    def tensor_parameter_id(self, tensor: torch.Tensor) -> int:
        """The parameter number of the buffer `tensor` holds, or -1 (pending, or not read)."""
        value = unwrap(tensor)._value
        if value.node is None:
            for i, p in enumerate(self._parameters):
                if p.value is value or (p.value is not None and value.data is not None
                                        and p.value.data is value.data):
                    return i
        return -1

    def set_name_string(self, name: str) -> None:
        self._name_string = name

    def get_name_string(self) -> str:
        return self._name_string
