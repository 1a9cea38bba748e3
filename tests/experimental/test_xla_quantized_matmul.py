"""torch.ops.xla.quantized_matmul and XlaQuantizedLinear: on XLA tensors, per channel and
blockwise, int8 and int4 weights, symmetric and with zero points, with quantized activations,
as PyTorch's dequantize-then-matmul in float32 on the CPU; the weights stay integers in the
program's dots; eager, lazy loops and torch.compile compile once."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_xla
import torch_xla.debug.metrics as met
from tests.compare import assert_lowered, assert_same, compiles
from torch_xla.experimental.xla_quantized_matmul import XlaQuantizedLinear, quantized_matmul_xla

IN, OUT, BLOCK = 32, 16, 8
ABOUT_FLOAT32 = dict(rtol=1e-5, atol=1e-5)  # a sum reassociated: the dot scales after it


def _per_channel(bits=8, symmetric=True):
    """An integer weight [OUT, IN] of `bits` bits with its scales and scaled zero points."""
    top = 2 ** (bits - 1)
    w = torch.randint(-top, top, (OUT, IN), dtype=torch.int8)
    scale = torch.rand(OUT) / 50 + 1e-3
    zero_point = None if symmetric else torch.randn(OUT) / 10
    return w, scale, zero_point


def _blockwise(bits=8, symmetric=True):
    top = 2 ** (bits - 1)
    w = torch.randint(-top, top, (IN // BLOCK, BLOCK, OUT), dtype=torch.int8)
    scale = torch.rand(IN // BLOCK, OUT) / 50 + 1e-3
    zero_point = None if symmetric else torch.randn(IN // BLOCK, OUT) / 10
    return w, scale, zero_point


def _dequantized(w, scale, zero_point):
    """The float32 weight [IN, OUT] the quantized one stands for."""
    if w.dim() == 2:
        dq = w.float() * scale[:, None] - (0 if zero_point is None else zero_point[:, None])
        return dq.t()
    dq = w.float() * scale[:, None, :] - (0 if zero_point is None else zero_point[:, None, :])
    return dq.reshape(IN, OUT)


def _on(dev, *tensors):
    return [None if t is None else t.to(dev) for t in tensors]


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("layout", ["per_channel", "blockwise"])
@pytest.mark.parametrize("bits", [8, 4])
def test_float32_activations_match_the_dequantized_matmul(dev, symmetric, layout, bits):
    w, scale, zero_point = (_per_channel if layout == "per_channel" else _blockwise)(bits, symmetric)
    x = torch.randn(2, 3, IN)
    block_size = -1 if layout == "per_channel" else BLOCK
    met.clear_counters()
    y = torch.ops.xla.quantized_matmul(*_on(dev, x, w, scale, zero_point), block_size=block_size,
                                       int4_weight=bits == 4)
    assert_same(y, x @ _dequantized(w, scale, zero_point), **ABOUT_FLOAT32)
    assert_lowered()


@pytest.mark.parametrize("layout", ["per_channel", "blockwise"])
def test_bfloat16_activations_round_once(dev, layout):
    w, scale, zero_point = (_per_channel if layout == "per_channel" else _blockwise)(symmetric=False)
    x = torch.randn(4, IN).bfloat16()
    scale, zero_point = scale.bfloat16(), zero_point.bfloat16()
    block_size = -1 if layout == "per_channel" else BLOCK
    y = torch.ops.xla.quantized_matmul(*_on(dev, x, w, scale, zero_point), block_size=block_size)
    expected = x.float() @ _dequantized(w, scale.float(), zero_point.float())
    assert_same(y, expected.bfloat16(), rtol=1.6e-2, atol=1e-2,
                reference=x.double() @ _dequantized(w, scale.float(), zero_point.float()).double())


@pytest.mark.parametrize("symmetric", [True, False])
def test_quantized_activations_match_the_dequantized_matmul(dev, symmetric):
    w, scale, zero_point = _per_channel(symmetric=symmetric)
    x = torch.randn(5, IN)
    row_scale = x.abs().amax(dim=-1, keepdim=True) / 127
    x_dequantized = torch.round(x / row_scale) * row_scale
    y = torch.ops.xla.quantized_matmul(*_on(dev, x, w, scale, zero_point),
                                       quantize_activation=True)
    assert_same(y, x_dequantized @ _dequantized(w, scale, zero_point), **ABOUT_FLOAT32)


def test_the_cpu_kernel_is_the_dequantized_matmul():
    for layout, make, block_size in (("per_channel", _per_channel, -1), ("blockwise", _blockwise, BLOCK)):
        w, scale, zero_point = make(symmetric=False)
        x = torch.randn(3, IN)
        y = torch.ops.xla.quantized_matmul(x, w, scale, zero_point, block_size=block_size)
        assert_same(y, x @ _dequantized(w, scale, zero_point), **ABOUT_FLOAT32, path=layout,
                    device="cpu")


def _dot_lines(hlo):
    return [line for line in hlo.splitlines() if " dot(" in line]


def test_the_weight_stays_int8_in_the_dot(dev):
    w, scale, _ = _per_channel()
    x = torch.randn(3, IN).bfloat16()
    y = torch.ops.xla.quantized_matmul(*_on(dev, x, w, scale.bfloat16()))
    dots = _dot_lines(torch_xla._XLAC._get_xla_tensors_hlo([y]))
    # (its result in float32, bfloat16's opmath: the scale and offset apply before the one rounding)
    assert len(dots) == 1 and re.search(r"f32\[3,16\].* dot\(bf16\[3,32\].*, s8\[16,32\]", dots[0]), dots


def test_quantized_activations_make_an_s32_dot_of_int8_values(dev):
    w, scale, _ = _per_channel()
    y = torch.ops.xla.quantized_matmul(*_on(dev, torch.randn(3, IN), w, scale),
                                       quantize_activation=True)
    dots = _dot_lines(torch_xla._XLAC._get_xla_tensors_hlo([y]))
    assert len(dots) == 1 and re.search(r"s32\[3,16\].* dot\(s8\[3,32\].*, s8\[16,32\]", dots[0]), dots


def test_blockwise_is_one_batched_dot_over_the_blocks(dev):
    w, scale, _ = _blockwise()
    y = torch.ops.xla.quantized_matmul(*_on(dev, torch.randn(3, IN), w, scale), block_size=BLOCK)
    dots = _dot_lines(torch_xla._XLAC._get_xla_tensors_hlo([y]))
    assert len(dots) == 2  # the blocks' products, then their sum weighted by the scales
    assert re.search(r"dot\(f32\[3,4,8\].*, s8\[4,8,16\]", dots[0]), dots


def test_linear_layers_load_weights_and_move_their_buffers(dev):
    layer = XlaQuantizedLinear(IN, OUT, is_symmetric=False)
    w, scale, zero_point = _per_channel(symmetric=False)
    layer.load_quantized_weight(w, scale, zero_point)
    layer.to(dev)
    assert {name: b.device.type for name, b in layer.named_buffers()} == {
        "weight": "xla", "weight_scaler": "xla", "zero_point": "xla"}
    x = torch.randn(2, IN)
    assert_same(layer(x.to(dev)), x @ _dequantized(w, scale, zero_point), **ABOUT_FLOAT32)
    symmetric = XlaQuantizedLinear(IN, OUT, is_symmetric=True)
    assert symmetric.zero_point is None and "zero_point" not in symmetric.state_dict()


def test_loading_a_weight_of_another_shape_or_dtype_raises():
    layer = XlaQuantizedLinear(IN, OUT)
    w, scale, _ = _per_channel()
    with pytest.raises(AssertionError, match="Weight shape is expected to be"):
        layer.load_quantized_weight(w.t(), scale)
    with pytest.raises(AssertionError, match="Weight dtype is expected to be torch.int8"):
        layer.load_quantized_weight(w.float(), scale)
    blockwise = XlaQuantizedLinear(IN, OUT, block_size=BLOCK)
    with pytest.raises(AssertionError, match="weight scaler shape"):
        blockwise.load_quantized_weight(_blockwise()[0], scale)


def test_the_op_checks_its_arguments_on_both_devices(dev):
    w, scale, _ = _blockwise()
    for args in ((torch.randn(2, IN), w, scale), _on(dev, torch.randn(2, IN), w, scale)):
        with pytest.raises(AssertionError, match="does not support activation quantization"):
            torch.ops.xla.quantized_matmul(*args, block_size=BLOCK, quantize_activation=True)


def test_quantized_matmul_xla_is_the_op(dev):
    w, scale, zero_point = _per_channel(symmetric=False)
    x = torch.randn(2, IN)
    y = quantized_matmul_xla(*_on(dev, x, w, scale, zero_point))
    assert_same(y, x @ _dequantized(w, scale, zero_point), **ABOUT_FLOAT32)


def _weights(*specs):
    """A quantized layer per (input dim, output dim) of `specs`, with its dequantized weight."""
    out = []
    for n_in, n_out in specs:
        layer = XlaQuantizedLinear(n_in, n_out, is_symmetric=False)
        w = torch.randint(-128, 128, (n_out, n_in), dtype=torch.int8)
        scale, zero_point = torch.rand(n_out) / 50 + 1e-3, torch.randn(n_out) / 10
        layer.load_quantized_weight(w, scale, zero_point)
        dq = w.float() * scale[:, None] - zero_point[:, None]
        out.append((layer, dq))
    return out


def test_a_loop_over_a_quantized_stack_compiles_once(dev):
    layers = _weights((IN, OUT), (OUT, OUT))
    model = torch.nn.Sequential(layers[0][0], torch.nn.GELU(), layers[1][0]).to(dev)
    counts = []
    for _ in range(3):
        x = torch.randn(4, IN)
        y = model(x.to(dev))
        assert_same(y, F.linear(F.gelu(F.linear(x, layers[0][1])), layers[1][1]), **ABOUT_FLOAT32)
        counts.append(compiles())
    assert counts[1] == counts[2]


def test_torch_compile_lowers_the_op_and_compiles_once(dev):
    layers = _weights((IN, OUT), (OUT, OUT))
    model = torch.nn.Sequential(layers[0][0], torch.nn.GELU(), layers[1][0]).to(dev)
    compiled = torch.compile(model, backend="openxla")
    met.clear_counters()
    counts = []
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, IN)
            y = compiled(x.to(dev))
            assert_same(y, F.linear(F.gelu(F.linear(x, layers[0][1])), layers[1][1]), **ABOUT_FLOAT32)
            counts.append(compiles())
    assert counts[1] == counts[2]
    assert_lowered()
