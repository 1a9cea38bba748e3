"""Weight-only int8 quantized linear layers (`XlaQuantizedLinear`, per-channel scales) against
the same stack in bfloat16 and in float32 on the XLA device: the forward pass of a stack of
bias-free linear layers with GELUs between, at a small batch (an inference step, where
reading the weights is most of the work). Each variant is timed in blocks alternating with
the float32 stack's, in this one run: `<variant>/f32` is the median ratio of neighbouring
blocks' step times (below 1: faster than float32). `<variant>_weight_MB` is the weights'
size, `<variant>_rel_err` the largest error of its output relative to float32's.

    python benchmarks/quantized_matmul.py [--width 1024] [--layers 4] [--batch 16]
"""
import argparse

import torch
import torch.nn.functional as F

import torch_xla
import torch_xla.core.xla_model as xm
from common import alternating_times, report
from torch_xla.experimental.xla_quantized_matmul import XlaQuantizedLinear


class Stack(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == 0 else layer(F.gelu(x))
        return x


def float_stack(weights, dtype):
    layers = []
    for w in weights:
        layer = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
        layer.weight.data = w.to(dtype)
        layers.append(layer)
    return Stack(layers)


def int8_stack(weights):
    """The float32 weights rounded to int8 per output channel (symmetric: scale max|w| / 127)."""
    layers = []
    for w in weights:
        scale = w.abs().amax(dim=1) / 127
        layer = XlaQuantizedLinear(w.shape[1], w.shape[0], is_symmetric=True)
        layer.load_quantized_weight(torch.round(w / scale[:, None]).to(torch.int8), scale)
        layers.append(layer)
    return Stack(layers)


def timed(model, x):
    """(step, sync) of the model's forward: one program per step, synced at a block's end."""
    out = [None]

    @torch.no_grad()
    def step():
        out[0] = model(x)
        torch_xla.sync()
    return (step, xm.wait_device_ops), out


def weight_megabytes(model):
    return sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 2 ** 20


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--steps-per-block", type=int, default=10)
    a = p.parse_args()
    dev = torch_xla.device()
    torch.manual_seed(0)
    weights = [torch.randn(a.width, a.width) / a.width ** 0.5 for _ in range(a.layers)]
    x = torch.randn(a.batch, a.width)
    f32 = float_stack(weights, torch.float32).to(dev)
    baseline, f32_out = timed(f32, x.to(dev))
    figures = {"f32_weight_MB": weight_megabytes(f32)}
    for name, model, dtype in (("int8", int8_stack(weights).to(dev), torch.float32),
                               ("bf16", float_stack(weights, torch.bfloat16).to(dev), torch.bfloat16)):
        variant, out = timed(model, x.to(dev, dtype))
        variant_t, f32_t, ratio = alternating_times(variant, baseline, blocks=a.blocks,
                                                    steps_per_block=a.steps_per_block)
        expected = f32_out[0].cpu()
        error = (out[0].cpu().float() - expected).abs().max() / expected.abs().max()
        figures.update({f"{name}_ms": variant_t * 1e3, f"{name}/f32": ratio,
                        f"{name}_weight_MB": weight_megabytes(model),
                        f"{name}_rel_err": float(error)})
        figures["f32_ms"] = min(figures.get("f32_ms", float("inf")), f32_t * 1e3)
    report("quantized_matmul", figures)


if __name__ == "__main__":
    main()
