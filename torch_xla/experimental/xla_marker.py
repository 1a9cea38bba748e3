"""`torch.ops.xla.mark_tensor`: marks a tensor as an input or output of a pattern, which the
StableHLO of a program holding it shows as one `stablehlo.composite` op named after the
pattern (`mark_pattern_utils.StableHLOCompositeBuilder` marks a pattern's tensors for you).
On a CPU tensor (or in a graph torch.export traces) a mark is a copy of its tensor; on an XLA
tensor the engine records it and lowers the marked region as a composite
(`_lazy/lowering/composite`).
"""
import dataclasses
import json
from dataclasses import dataclass
from typing import Dict

import torch
import torch._dynamo as torchdynamo

from torch_xla.core.xla_model import XLA_LIB

XLA_LIB.define(
    "mark_tensor(Tensor x, str name, int pos, str id, bool is_input, Any? attr=None) -> Tensor")


@dataclass
class BoundaryMetadata:
    name: str              # the pattern's name: the composite op's
    pos: int               # the tensor's position among the pattern's inputs or outputs
    id: str                # the pattern instance's id
    is_input: bool = True  # whether the tensor is one of its inputs (else one of its outputs)
    attr: dict = None      # the pattern's attributes, given on its outputs


class BoundaryMetadataSerializer(json.JSONEncoder):

    def default(self, obj):
        if dataclasses.is_dataclass(obj):
            return dataclasses.asdict(obj)
        return super().default(obj)


def _assert_valid_composite_attr(attr):
    if attr is None:
        return
    if not isinstance(attr, dict):
        raise ValueError("Composite attr must be a Python dictionary.")
    invalid = ValueError("Composite attr value must be either Python str, float, int, bool, "
                         "list[int], list[float], list[bool].")
    for k, v in attr.items():
        if not isinstance(k, str):
            raise ValueError("Composite attr name must be a Python str.")
        if isinstance(v, (list, tuple)):
            kinds = {type(e) for e in v}
            if len(kinds) != 1 or next(iter(kinds)) not in (int, float, bool):
                raise invalid
        elif type(v) not in (str, float, int, bool):
            raise invalid


@torchdynamo.assume_constant_result
def serialize_composite_attr(attr: Dict):
    """`attr` as `mark_tensor` takes it (a tuple of its items), checked."""
    if attr is None:
        return None
    _assert_valid_composite_attr(attr)
    return tuple(attr.items())


@torchdynamo.assume_constant_result
def deserialize_composite_attr(attr) -> Dict:
    return None if attr is None else dict(attr)


@torch.library.impl(XLA_LIB, "mark_tensor", "CompositeExplicitAutograd")
def mark_tensor(x: torch.Tensor, name: str, pos: int, id: str, is_input: bool, attr=None):
    """Attaches a pattern's boundary to `x` (on a CPU tensor: a copy of it).

    Args:
        x: the marked tensor.
        name: the pattern's name, the name of its StableHLO composite op.
        pos: the tensor's position among the pattern's inputs (or outputs).
        id: the id of the pattern instance (marks of one instance share it).
        is_input: whether `x` is an input of the pattern (else an output).
        attr: the pattern's attributes, made by `serialize_composite_attr` (on outputs).
    """
    _assert_valid_composite_attr(deserialize_composite_attr(attr))
    return x.clone()


@torch.library.register_fake("xla::mark_tensor", lib=XLA_LIB)
def _mark_tensor_fake(x, name, pos, id, is_input, attr=None):
    _assert_valid_composite_attr(deserialize_composite_attr(attr))
    return torch.empty_like(x)
