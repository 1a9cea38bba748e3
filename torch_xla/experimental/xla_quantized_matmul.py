"""Weight-only quantized linear layers, as torch_xla's: `torch.ops.xla.quantized_matmul` and
the module `XlaQuantizedLinear` holding int8 (or int4, in int8) weights with their scales.

    torch.ops.xla.quantized_matmul(x, w, scaler, zero_point=None, block_size=-1,
                                   int4_weight=False, quantize_activation=False)

- per-channel (`block_size` -1): `w` [out_channel, in_channel] int8, `scaler` and
  `zero_point` [out_channel]; the result is `x @ wᵀ * scaler - sum(x) * zero_point`
  (`zero_point` is the scaled offset: the zero point times the scale).
- blockwise (`block_size` > 0): `w` [in_channel / block_size, block_size, out_channel] int8,
  `scaler` and `zero_point` [in_channel / block_size, out_channel]: each block of `x`'s last
  dim meets its block of `w`, and the blocks' products are summed weighted by `scaler`.
- `int4_weight`: `w`'s values lie in -8..7 (unpacked int8); on XLA the product reads them
  as s4 (a dot over s4 runs on TPU; other backends widen the weight first).
- `quantize_activation` (per-channel only): each row of `x` is quantized to int8 (scale
  max|x| / 127) and the product is an s32 dot of int8 values, scaled back after.

On XLA tensors the op is one node of the graph, lowered by the engine as XLA dots over the
integer weights (`torch_xla._lazy.lowering.quantized`): a bfloat16 activation and an int8
weight make `dot(bf16, s8)`: the weight is held as int8, widened only inside the program. On
other devices it runs the same arithmetic with PyTorch's ops (the weight converted to the
activation's dtype). The result has the dtype PyTorch promotes `x` and `scaler` to, computed
in float32 for half types and rounded once. No autograd: the layers are for inference, as
torch_xla's.

Importing this module defines the op.
"""
import torch
# PyTorch's quantize/dequantize ops (torch.ops.quantized_decomposed.*), with which weights for
# these layers are made (upstream's tests make them so): with torch 2.9, `import torch_xla`
# defines them through the torch modules it imports; on later torch releases only importing
# this module of torch's does.
import torch.ao.quantization.fx._decomposed  # noqa: F401
import torch.nn.functional as F

from torch_xla.core.xla_model import XLA_LIB

XLA_LIB.define(
    "quantized_matmul(Tensor x, Tensor w, Tensor scale, Tensor? zero_point=None, "
    "int? block_size=-1, bool? int4_weight=False, bool? quantize_activation=False) -> Tensor")


def _require(condition, message):
    """torch_xla's checks are assertions: the same exception, kept under `python -O`."""
    if not condition:
        raise AssertionError(message)


def _check_per_channel_weight(input_dim, output_dim, w, scaler, zero_point):
    _require(w.dtype == torch.int8, f"Weight dtype is expected to be torch.int8, got {w.dtype}.")
    _require(w.dim() == 2, f"Weight tensor is expected to be 2D, got {w.dim()}D Tensor.")
    _require(list(w.shape) == [output_dim, input_dim],
             f"Weight shape is expected to be [output_dim, input_dim], output_dim: "
             f"{output_dim}, input_dim: {input_dim}, but got {list(w.shape)}.")
    _require(scaler.dim() == 1 and scaler.shape[0] == w.shape[0],
             f"weight scaler shape is expect to be [out_channel,], got {scaler.shape}, weight "
             f"shape {list(w.shape)}.")
    if zero_point is not None:
        _require(zero_point.dim() == 1 and zero_point.shape[0] == w.shape[0],
                 f"zero point shape is expect to be [out_channel,], got {zero_point.shape}, "
                 f"weight shape {list(w.shape)}.")


def _check_blockwise_weight(input_dim, output_dim, block_size, w, scaler, zero_point):
    _require(w.dtype == torch.int8, f"Weight dtype is expected to be torch.int8, got {w.dtype}.")
    _require(w.dim() == 3, f"Weight tensor is expected to be 3D, got {w.dim()}D Tensor.")
    _require(input_dim % block_size == 0,
             f"input_dim should be divisible by block_size, got input_dim: {input_dim}, "
             f"block_size: {block_size}.")
    _require(list(w.shape) == [input_dim // block_size, block_size, output_dim],
             f"Weight shape is expected to be [input_dim / block_size, block_size, output_dim], "
             f"input_dim: {input_dim}, block_size: {block_size}, output_dim: {output_dim}, "
             f"but got {list(w.shape)}.")
    for name, t in (("weight scaler", scaler), ("zero_point", zero_point)):
        if t is not None:
            _require(list(t.shape) == [w.shape[0], w.shape[-1]],
                     f"{name} shape is expect to be [in_channel / block_size, out_channel], got "
                     f"{t.shape}, weight shape {list(w.shape)}.")


def _is_per_channel(block_size):
    return block_size is None or block_size == -1


def _check_call(x, w, scaler, zero_point, block_size, quantize_activation):
    """The op's arguments as torch_xla's kernels check them."""
    if _is_per_channel(block_size):
        _check_per_channel_weight(x.shape[-1], scaler.shape[0], w, scaler, zero_point)
    else:
        _require(not quantize_activation,
                 "Blockwise quantization does not support activation quantization.")
        _check_blockwise_weight(x.shape[-1], w.shape[-1], block_size, w, scaler, zero_point)


def _quantize_rows(x):
    """`x` as int8 values with one scale per row (its last dim), both as torch_xla's
    `_quantize_tensor` makes them: scale = max|x| / 127 in x's dtype."""
    scale = torch.amax(torch.abs(x), dim=-1, keepdim=True) / 127
    return torch.round(x / scale).to(torch.int8), scale


@torch.library.impl(XLA_LIB, "quantized_matmul", "CompositeExplicitAutograd")
def quantized_matmul(x: torch.Tensor, w: torch.Tensor, scaler: torch.Tensor,
                     zero_point: torch.Tensor = None, block_size: int = -1,
                     int4_weight: bool = False, quantize_activation: bool = False):
    """The op on tensors of other devices (the CPU's reference): the arithmetic of the
    engine's lowering in PyTorch's ops. `int4_weight` changes nothing here: the values are
    already those of `w`."""
    _check_call(x, w, scaler, zero_point, block_size, quantize_activation)
    out_dtype = torch.promote_types(x.dtype, scaler.dtype)
    compute = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    if _is_per_channel(block_size):
        row_scale = None
        if quantize_activation:
            x, row_scale = _quantize_rows(x)
            product = F.linear(x.to(torch.int32), w.to(torch.int32))  # exact, as an s32 dot
        else:
            product = F.linear(x, w.to(x.dtype))
        out = product.to(compute) * scaler.to(compute)
        if zero_point is not None:
            out = out - x.sum(dim=-1, keepdim=True, dtype=compute) * zero_point.to(compute)
        if row_scale is not None:
            out = out * row_scale.to(compute)
        return out.to(out_dtype)
    blocks = x.reshape(*x.shape[:-1], w.shape[0], block_size)
    per_block = torch.einsum("scn,...sc->...sn", w.to(x.dtype), blocks)
    out = torch.einsum("...sn,sn->...n", per_block.to(compute), scaler.to(compute))
    if zero_point is not None:
        out = out - blocks.sum(dim=-1, dtype=compute) @ zero_point.to(compute)
    return out.to(out_dtype)


@torch.library.register_fake("xla::quantized_matmul", lib=XLA_LIB)
def _quantized_matmul_fake(x, w, scaler, zero_point=None, block_size=-1, int4_weight=False,
                           quantize_activation=False):
    _check_call(x, w, scaler, zero_point, block_size, quantize_activation)
    out_channels = scaler.shape[0] if _is_per_channel(block_size) else w.shape[-1]
    return x.new_empty((*x.shape[:-1], out_channels),
                       dtype=torch.promote_types(x.dtype, scaler.dtype))


def quantized_matmul_xla(x: torch.Tensor, w: torch.Tensor, scaler: torch.Tensor,
                         zero_point: torch.Tensor = None, block_size: int = -1,
                         int4_weight: bool = False, quantize_activation: bool = False):
    """torch_xla's name of the op's kernel for XLA tensors: the op, which the engine lowers
    on XLA tensors."""
    return torch.ops.xla.quantized_matmul(x, w, scaler, zero_point, block_size=block_size,
                                          int4_weight=int4_weight,
                                          quantize_activation=quantize_activation)


class XlaQuantizedLinear(torch.nn.Module):
    """A bias-free linear layer of quantized weights: `forward(x)` is
    `torch.ops.xla.quantized_matmul` with its buffers `weight`, `weight_scaler` and
    `zero_point` (None when `is_symmetric`). The buffers start as per-channel zeros;
    `load_quantized_weight` gives the real ones (blockwise ones in their own shapes)."""

    def __init__(self, input_dim, output_dim, is_symmetric: bool = False, block_size: int = -1,
                 int4_weight: bool = False, quantize_activation: bool = False):
        super().__init__()
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.is_symmetric = is_symmetric
        self.block_size = block_size
        self.int4_weight = int4_weight
        self.quantize_activation = quantize_activation
        self.register_buffer("weight", torch.zeros(output_dim, input_dim, dtype=torch.int8))
        self.register_buffer("weight_scaler", torch.zeros(output_dim))
        self.register_buffer("zero_point", None if is_symmetric else torch.zeros(output_dim))

    def load_quantized_weight(self, weight, weight_scaler, zero_point=None):
        """weight: [out_channel, in_channel] per channel, [in_channel / block_size,
        block_size, out_channel] blockwise; weight_scaler (and zero_point): [out_channel]
        per channel, [in_channel / block_size, out_channel] blockwise."""
        if _is_per_channel(self.block_size):
            _check_per_channel_weight(self.input_dim, self.output_dim, weight, weight_scaler,
                                      zero_point)
        else:
            _check_blockwise_weight(self.input_dim, self.output_dim, self.block_size, weight,
                                    weight_scaler, zero_point)
        self.weight = weight
        self.weight_scaler = weight_scaler
        self.zero_point = zero_point

    def forward(self, x):
        return torch.ops.xla.quantized_matmul(x, self.weight, self.weight_scaler, self.zero_point,
                                              block_size=self.block_size,
                                              int4_weight=self.int4_weight,
                                              quantize_activation=self.quantize_activation)
