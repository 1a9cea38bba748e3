"""Shared timing and memory helpers for the benchmarks (steady state = whole blocks of steps
that end in a sync, after warm-up)."""
import json
import os
import time

import jax


def steady_time(step, sync, warmup=5, blocks=5, steps_per_block=10):
    """Best time per step over `blocks` blocks of `steps_per_block` steps, each ending in sync()."""
    for _ in range(warmup):
        step()
    sync()
    best = float("inf")
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(steps_per_block):
            step()
        sync()
        best = min(best, (time.perf_counter() - start) / steps_per_block)
    return best


def first_step_time(step, sync):
    start = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - start


def live_device_bytes():
    return sum(a.nbytes for a in jax.live_arrays())


def peak_step_bytes(compiled):
    """Peak bytes of a step: what lives between steps plus what the program allocates on top
    (its temporaries and outputs, less outputs written into donated inputs)."""
    m = compiled.memory_analysis()
    extra = m.temp_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
    return live_device_bytes() + extra


def last_torch_xla_program():
    from torch_xla._lazy import compiler
    return list(compiler._cache.values())[-1].compiled


def report(name, figures):
    """Prints one line and appends it as JSON to $BENCH_OUT (used by run_all.py)."""
    parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()]
    print(f"{name}: " + " ".join(parts), flush=True)
    out = os.environ.get("BENCH_OUT")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"name": name, **figures}) + "\n")
