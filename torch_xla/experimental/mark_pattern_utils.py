"""`StableHLOCompositeBuilder`: marks the inputs and outputs of a pattern so that the
StableHLO of the program (`xm.get_stablehlo`, `torch_xla.stablehlo`'s export) holds it as one
`stablehlo.composite` op with the builder's name and attributes."""
import uuid
from typing import Dict, Union

import torch
import torch._dynamo as torchdynamo

from torch_xla.experimental import xla_marker


@torchdynamo.assume_constant_result
def _get_uuid() -> str:
    return uuid.uuid4().hex


class StableHLOCompositeBuilder:
    """Builds a StableHLO composite named `name` with attributes `attr` (str, int, float,
    bool, or lists of int, float or bool) from the tensors marked by `mark_inputs` and
    `mark_outputs`, each called once."""

    def __init__(self, name: str, attr: Dict[str, Union[int, float, str]] = None):
        self.attr = attr
        self.name = name
        self.id = _get_uuid()

    def _mark_tensor(self, *tensors: torch.Tensor, is_input: bool):
        attr = None if is_input else xla_marker.serialize_composite_attr(self.attr)
        marked = []
        for pos, tensor in enumerate(tensors):
            if not isinstance(tensor, torch.Tensor):
                raise ValueError(f"input must be a torch tensor. Got {type(tensor)}.")
            marked.append(torch.ops.xla.mark_tensor(tensor, name=self.name, pos=pos, id=self.id,
                                                    is_input=is_input, attr=attr))
        return marked[0] if len(marked) == 1 else tuple(marked)

    def mark_inputs(self, *tensors: torch.Tensor):
        """The tensors marked as the composite's inputs: use them in place of `tensors`."""
        return self._mark_tensor(*tensors, is_input=True)

    def mark_outputs(self, *tensors: torch.Tensor):
        """The tensors marked as the composite's outputs: use them in place of `tensors`."""
        return self._mark_tensor(*tensors, is_input=False)
