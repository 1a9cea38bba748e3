"""Weight-only int8 quantized linear layers (`XlaQuantizedLinear`, per-channel scales) against
the same stack in bfloat16 and in float32 on the XLA device: the forward pass of a stack of
bias-free linear layers with GELUs between, at a small batch (an inference step, where
reading the weights is most of the work). Each variant is timed in blocks alternating with
the float32 stack's, in this one run: `<variant>/f32` is the median ratio of neighbouring
blocks' step times (below 1: faster than float32). `<variant>_weight_MB` is the weights'
size, `<variant>_rel_err` the largest error of its output relative to float32's.

With upstream torch_xla 2.9.0's venv (--upstream-python, default common.UPSTREAM_PYTHON where
present; --no-upstream: ours alone) the same workload also runs under upstream torch_xla's XlaQuantizedLinear, in a subprocess kept alive for the
run (PJRT_DEVICE=CPU: upstream's wheel has no CUDA plugin; this tree off its path). The
rounds alternate, ours then upstream's, so that a loaded machine weighs on both alike; each
side's ratios are to its own float32 stack measured in the same round, and each figure is
its median over the rounds. `quantized_matmul_ours/upstream` gives the medians over the
rounds of the step times' ratio of the two sides (`<variant>_ms`), measured in different
processes at different moments: noisier than the ratios within a side.

    python benchmarks/quantized_matmul.py [--width 1024] [--layers 4] [--batch 16]
        [--upstream-python PY | --no-upstream] [--rounds N]
"""
import argparse

import torch
import torch.nn.functional as F

import torch_xla
import torch_xla.core.xla_model as xm
from common import against_upstream, alternating_times, parse_with_upstream
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


class Workload:
    """The float32, int8 and bfloat16 stacks and their inputs on this process's XLA device."""

    def __init__(self, a):
        self.a = a
        dev = torch_xla.device()
        torch.manual_seed(0)
        weights = [torch.randn(a.width, a.width) / a.width ** 0.5 for _ in range(a.layers)]
        x = torch.randn(a.batch, a.width)
        f32 = float_stack(weights, torch.float32).to(dev)
        self.baseline, self.f32_out = timed(f32, x.to(dev))
        self.fixed = {"device": xm.xla_device_hw(dev), "f32_weight_MB": weight_megabytes(f32)}
        self.variants = {}
        for name, model, dtype in (
                ("int8", int8_stack(weights).to(dev), torch.float32),
                ("bf16", float_stack(weights, torch.bfloat16).to(dev), torch.bfloat16)):
            self.variants[name] = (*timed(model, x.to(dev, dtype)), weight_megabytes(model))

    def round(self):
        """One round's figures: each variant in blocks alternating with the float32 stack."""
        figures = dict(self.fixed)
        for name, (variant, out, megabytes) in self.variants.items():
            variant_t, f32_t, ratio = alternating_times(variant, self.baseline,
                                                        blocks=self.a.blocks,
                                                        steps_per_block=self.a.steps_per_block)
            expected = self.f32_out[0].cpu()
            error = (out[0].cpu().float() - expected).abs().max() / expected.abs().max()
            figures.update({f"{name}_ms": variant_t * 1e3, f"{name}/f32": ratio,
                            f"{name}_weight_MB": megabytes, f"{name}_rel_err": float(error)})
            figures["f32_ms"] = min(figures.get("f32_ms", float("inf")), f32_t * 1e3)
        return figures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--steps-per-block", type=int, default=10)
    # the upstream side gets the workload's arguments only
    a, upstream = parse_with_upstream(
        p, lambda a: Workload(a).round, __file__,
        lambda a: [x for k in ("width", "layers", "batch", "blocks", "steps_per_block")
                   for x in (f"--{k.replace('_', '-')}", str(getattr(a, k)))])
    work = Workload(a)
    against_upstream("quantized_matmul", work.round, upstream, a.rounds,
                     compared=("f32_ms", *(f"{name}_ms" for name in work.variants)))


if __name__ == "__main__":
    main()
