"""Training steps on a GPU: ours (PJRT_DEVICE=CUDA) against the same model as a JAX program and
against torch's own CUDA eager and `torch.compile` (inductor) steps on the same GPU, timed in
one run in alternating blocks (so that clocks and the machine weigh on all alike), with each
step's achieved TFLOP/s against the GPU's bf16 and fp32 matmul peak measured in the same run
(XLA's `jnp.dot` and `torch.mm` of 8192², the faster of the two).

    python benchmarks/gpu_training.py               # the GPU sizes (scripts/gpu-check)
    python benchmarks/gpu_training.py --size tiny --device cpu   # a smoke run on the CPU

Workloads: the transformer LM of benchmarks/transformer.py at a GPU size in bfloat16 (weights,
activations, AdamW) and the MLP of benchmarks/mlp.py in float32. Each line: per-step ms of
each contestant, ratios to JAX (median of neighbouring blocks), TFLOP/s (XLA's cost analysis
of our step's program, the same model's count for every contestant) and its share of peak.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch's CUDA shares the GPU

SIZES = {  # transformer: V, D, H, T, B, LAYERS; mlp: batch, width, depth
    "gpu": {"transformer": (32000, 1024, 16, 512, 16, 8), "mlp": (4096, 4096, 4)},
    "tiny": {"transformer": (256, 64, 4, 32, 4, 2), "mlp": (64, 128, 2)},
}


def _args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="gpu")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5, help="steps per block")
    return parser.parse_args()


ARGS = _args()
os.environ.setdefault("PJRT_DEVICE", "CUDA" if ARGS.device == "cuda" else "CPU")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_xla.core.xla_model as xm  # noqa: E402
import mlp  # noqa: E402
import transformer  # noqa: E402
from common import best_of, last_torch_xla_program, program_flops, report  # noqa: E402


def _matmul_peak(dtype):
    """FLOP/s of an 8192² (tiny: 1024²) matrix product in `dtype` on the device, the faster of
    XLA's and torch's."""
    n = 1024 if ARGS.size == "tiny" else 8192
    a = jnp.ones((n, n), getattr(jnp, dtype))
    dot = jax.jit(jnp.dot)
    xla = _best(lambda: dot(a, a).block_until_ready())
    t = torch.ones(n, n, dtype=getattr(torch, dtype), device=ARGS.device)
    sync = torch.cuda.synchronize if ARGS.device == "cuda" else (lambda: None)
    torch_t = _best(lambda: (torch.mm(t, t), sync()))
    return 2 * n ** 3 / min(xla, torch_t)


def _best(fn, repeat=5):
    """`common.best_of` after one warm-up call (the first compiles)."""
    fn()
    return best_of(fn, repeat)


def alternate(contestants, blocks, steps):
    """{name: (best seconds per step, median ratio to the first contestant's neighbouring
    block)} of `contestants` ({name: (step, sync)}), timed in alternating blocks."""
    for step, sync in contestants.values():
        for _ in range(3):
            step()
        sync()
    times = {name: [] for name in contestants}
    for _ in range(blocks):
        for name, (step, sync) in contestants.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync()
            times[name].append((time.perf_counter() - start) / steps)
    first = next(iter(times.values()))
    return {name: (min(ts), sorted(t / f for t, f in zip(ts, first))[len(ts) // 2])
            for name, ts in times.items()}


def _transformer_steps(dtype):
    """(ours, jax, torch eager, torch compiled) steps of the transformer in `dtype`."""
    transformer.V, transformer.D, transformer.H, transformer.T, transformer.B, transformer.LAYERS = \
        SIZES[ARGS.size]["transformer"]
    V, B, T = transformer.V, transformer.B, transformer.T  # noqa: N806

    def torch_step(device, xla, compiled=False):
        torch.manual_seed(0)
        model = transformer.LM().to(device, getattr(torch, dtype))
        opt = torch.optim.AdamW(model.parameters(), lr=transformer.LR)
        tokens = torch.randint(0, V, (B, T + 1)).to(device)
        x, y = tokens[:, :-1], tokens[:, 1:]

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x).reshape(-1, V).float(), y.reshape(-1)).backward()
            xm.optimizer_step(opt, barrier=True) if xla else opt.step()
        return torch.compile(step) if compiled else step

    key = jax.random.PRNGKey(0)
    params = jax.tree.map(lambda a: a.astype(getattr(jnp, dtype)), transformer.jax_params(key))
    zeros = lambda: jax.tree.map(jnp.zeros_like, params)  # noqa: E731
    state = [params, zeros(), zeros(), jnp.zeros((), jnp.float32)]
    tokens = jax.random.randint(key, (B, T + 1), 0, V)

    def train(p, m, v, t, tokens):
        loss, g = jax.value_and_grad(lambda p: transformer.jax_loss(p, tokens[:, :-1], tokens[:, 1:])
                                     .astype(jnp.float32))(p)
        return (*transformer._adamw(p, m, v, t, g), loss)
    train = jax.jit(train, donate_argnums=(0, 1, 2))

    def jax_step():
        state[:] = train(*state[:4], tokens)
    return torch_step, (jax_step, lambda: jax.block_until_ready(state))


def _mlp_steps(dtype):
    """(ours, jax, torch eager, torch compiled) steps of the MLP (float32)."""
    batch, width, depth = SIZES[ARGS.size]["mlp"]
    mlp.SIZES, mlp.BATCH = [width] * (depth + 1) + [10], batch

    def torch_step(device, xla, compiled=False):
        step = mlp.torch_step_fn(device, xla, sizes=mlp.SIZES, batch=mlp.BATCH)
        return torch.compile(step) if compiled else step
    step, sync, _ = mlp.jax_step_fn()
    return torch_step, (step, sync)


def run(name, steps_of, dtype, peaks):
    torch_step, jax_contestant = steps_of(dtype)
    device = xm.xla_device()
    ours = torch_step(device, True)
    ours()
    xm.wait_device_ops()
    flops = program_flops(last_torch_xla_program())
    sync = torch.cuda.synchronize if ARGS.device == "cuda" else (lambda: None)
    contestants = {"jax": jax_contestant, "ours": (ours, xm.wait_device_ops),
                   "torch_eager": (torch_step(ARGS.device, False), sync),
                   "torch_compile": (torch_step(ARGS.device, False, compiled=True), sync)}
    timed = alternate(contestants, ARGS.blocks, ARGS.steps)
    figures = {}
    for who, (best, ratio) in timed.items():
        figures[f"{who}_ms"] = best * 1e3
        if who != "jax":
            figures[f"{who}/jax"] = ratio
        figures[f"{who}_tflops"] = flops / best / 1e12
    figures["of_peak_ours"] = flops / timed["ours"][0] / peaks[dtype]
    figures["peak_tflops"] = peaks[dtype] / 1e12
    figures["ours/torch_eager"] = timed["ours"][0] / timed["torch_eager"][0]
    report(f"gpu_{name}_{dtype}", figures)


def main():
    peaks = {d: _matmul_peak(d) for d in ("bfloat16", "float32")}
    devices = jax.devices()
    print(f"device: {devices[0].device_kind}; torch {torch.__version__}, jax {jax.__version__}; "
          f"matmul peak bf16 {peaks['bfloat16'] / 1e12:.1f} TFLOP/s, fp32 {peaks['float32'] / 1e12:.1f}",
          flush=True)
    run("transformer", _transformer_steps, "bfloat16", peaks)
    run("mlp", _mlp_steps, "float32", peaks)


if __name__ == "__main__":
    main()
