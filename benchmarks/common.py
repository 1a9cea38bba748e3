"""Shared timing and memory helpers for the benchmarks (steady state = whole blocks of steps
that end in a sync, after warm-up)."""
import json
import os
import time

import jax


def best_of(fn, repeat=7):
    """The shortest wall time of `repeat` calls of fn()."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


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


def alternating_times(a, b, warmup=5, blocks=5, steps_per_block=10):
    """Steady time per step of two workloads (`a`, `b`: (step, sync) each) measured in
    alternating blocks, so that a loaded machine weighs on both alike: the best block of
    each, and the median of the ratios a/b of neighbouring blocks."""
    for step, sync in (a, b):
        for _ in range(warmup):
            step()
        sync()
    times, ratios = ([], []), []
    for _ in range(blocks):
        for k, (step, sync) in enumerate((a, b)):
            start = time.perf_counter()
            for _ in range(steps_per_block):
                step()
            sync()
            times[k].append((time.perf_counter() - start) / steps_per_block)
        ratios.append(times[0][-1] / times[1][-1])
    return min(times[0]), min(times[1]), sorted(ratios)[len(ratios) // 2]


def first_step_time(step, sync):
    start = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - start


def live_device_bytes():
    return sum(a.nbytes for a in jax.live_arrays())


def peak_step_bytes(compiled, live):
    """Peak bytes of a step: `live`, the bytes alive when its program starts, plus what the
    program allocates on top (its temporaries and outputs, less outputs written into
    donated inputs)."""
    m = compiled.memory_analysis()
    return live + m.temp_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes


def last_torch_xla_program():
    from torch_xla._lazy import compiler
    return list(compiler._cache.values())[-1].compiled


def live_bytes_at_launch(step, sync):
    """Device bytes alive when the step's program is launched (a training step frees last
    step's gradients in `zero_grad`, before its program runs): one step, instrumented."""
    from torch_xla._lazy import execution
    seen, execute = [], execution._execute
    execution._execute = lambda w: (seen.append(live_device_bytes()), execute(w))[1]
    try:
        step()
        sync()
    finally:
        execution._execute = execute
    return max(seen)


def report(name, figures):
    """Prints one line and appends it as JSON to $BENCH_OUT (used by run_all.py)."""
    parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()]
    print(f"{name}: " + " ".join(parts), flush=True)
    out = os.environ.get("BENCH_OUT")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"name": name, **figures}) + "\n")


def compiled_step(model, opt, loss_fn):
    """The training step under `torch.compile(backend='openxla')`: forward and backward one
    program each (AOTAutograd), the optimizer step a graph of its own."""
    import torch

    @torch.compile(backend="openxla")
    def step():
        opt.zero_grad()
        loss_fn(model).backward()
        opt.step()
    return step


def compare(name, torch_step_fn, jax_step_fn, blocks=5, steps_per_block=10, eager_steps=10,
            compiled_step_fn=None):
    """Times one workload three ways and reports the line: ours (`torch_step_fn(device,
    xla=True)`), the JAX floor (`jax_step_fn()` -> (step, sync, compile)) and eager PyTorch on
    the CPU (`torch_step_fn('cpu', xla=False)`); with `compiled_step_fn(device)`, a fourth:
    the step under torch.compile. Ours and the compiled step are each timed in blocks
    alternating with the JAX floor's (`ours/jax`, `compiled/jax`: the median ratio of
    neighbouring blocks; `*_best/jax_best`: best block against best block)."""
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met
    compiled = {}
    if compiled_step_fn is not None:  # alternating with the JAX floor (the machine is shared)
        compiled_step = compiled_step_fn(xm.xla_device())
        jstep, jsync, _ = jax_step_fn()
        compiled_t, floor_t, ratio = alternating_times(
            (compiled_step, xm.wait_device_ops), (jstep, jsync), blocks=2 * blocks,
            steps_per_block=steps_per_block)
        compiled = {"compiled_ms": compiled_t * 1e3, "compiled/jax": ratio,
                    "compiled_best/jax_best": compiled_t / floor_t}
        del compiled_step, jstep, jsync
    before = live_device_bytes()
    ours = torch_step_fn(xm.xla_device(), True)
    xm.wait_device_ops()
    met.clear_counters()
    ours_first = first_step_time(ours, xm.wait_device_ops)
    probes = {"first_probes": met.counter_value("ErrorProbe") or 0,
              "first_full_size_probes": met.counter_value("FullSizeErrorProbe") or 0}
    live = live_bytes_at_launch(ours, xm.wait_device_ops) - before
    ours_mem = peak_step_bytes(last_torch_xla_program(), live)
    before = live_device_bytes()
    jstep, jsync, jcompile = jax_step_fn()
    jax_first = first_step_time(jstep, jsync)
    jax_mem = peak_step_bytes(jcompile(), live_device_bytes() - before)
    ours_t, jax_t, ratio = alternating_times((ours, xm.wait_device_ops), (jstep, jsync),
                                             blocks=2 * blocks, steps_per_block=steps_per_block)
    eager = torch_step_fn("cpu", False)
    eager_t = steady_time(eager, lambda: None, warmup=2, blocks=3, steps_per_block=eager_steps)
    report(name, {"ours_ms": ours_t * 1e3, "jax_ms": jax_t * 1e3, "eager_cpu_ms": eager_t * 1e3,
                  "ours/jax": ratio, "ours_best/jax_best": ours_t / jax_t,
                  "ours/eager": ours_t / eager_t, **compiled,
                  "first_ours_s": ours_first, "first_jax_s": jax_first,
                  "first_ratio": ours_first / jax_first, **probes,
                  "peak_ours_mb": ours_mem / 2**20, "peak_jax_mb": jax_mem / 2**20,
                  "peak_ratio": ours_mem / jax_mem})
