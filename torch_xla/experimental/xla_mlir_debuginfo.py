"""`torch.ops.xla.write_mlir_debuginfo(x, data)`: names the op that computes `x` in the
locations of the StableHLO a program exports to (`torch_xla.stablehlo`): the op lowered
from it carries `data` among the scope names of its location. Elsewhere it is `x`.

Importing this module defines the op. (torch_xla's also sets XLA_HLO_DEBUG, for its
lowering to keep the locations; jax's lowering here always keeps them.)
"""
import torch

from torch_xla.core.xla_model import XLA_LIB

XLA_LIB.define("write_mlir_debuginfo(Tensor x, str data) -> Tensor")


@torch.library.impl(XLA_LIB, "write_mlir_debuginfo", "CompositeExplicitAutograd")
def write_mlir_debuginfo(x, data: str):
    return x.clone()


@torch.library.impl(XLA_LIB, "write_mlir_debuginfo", "Meta")
def write_mlir_debuginfo_meta(x, data: str):
    return torch.empty_like(x)
