"""Shared timing and memory helpers for the benchmarks (steady state = whole blocks of steps
that end in a sync, after warm-up)."""
import argparse
import json
import os
import pathlib
import subprocess
import sys
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


def against_jax(timed, jax_step_fn, blocks, steps_per_block):
    """`alternating_times` of `timed` ((step, sync)) and a JAX floor's step made for it."""
    jstep, jsync, _ = jax_step_fn()
    return alternating_times(timed, (jstep, jsync), blocks=blocks, steps_per_block=steps_per_block)


def first_step_time(step, sync):
    start = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - start


def first_steps(workload, pairs=3):
    """The first step's wall time of ours and of the JAX floor, each in a fresh process (what a
    user's script meets; in one process the second would find XLA warmed up by the first),
    `pairs` times in turn: the medians, the median ratio of the pairs, and our probe counts."""
    def run(which):
        out = subprocess.run([sys.executable, "first_step.py", workload, which],
                             cwd=pathlib.Path(__file__).parent, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"first_step.py {workload} {which} failed:\n{out.stderr}")
        return json.loads(out.stdout.splitlines()[-1])
    ours, floor = [], []
    for _ in range(pairs):
        ours.append(run("ours"))
        floor.append(run("jax"))
    median = lambda xs: sorted(xs)[len(xs) // 2]
    return {"first_ours_s": median([r["seconds"] for r in ours]),
            "first_jax_s": median([r["seconds"] for r in floor]),
            "first_ratio": median([a["seconds"] / b["seconds"] for a, b in zip(ours, floor)]),
            "first_probes": ours[-1]["probes"], "first_full_size_probes": ours[-1]["full_size_probes"]}


def python_per_op(step):
    """`step` with one Python call per op, as any engine that traces in Python makes: a
    dispatch mode that runs each op's own kernel."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class PerOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def per_op():
        with PerOp():
            step()
    return per_op


def pytorch_floor(jax_step_fn, floor_steps, blocks, steps_per_block):
    """What PyTorch's own per-step work costs beside the XLA program on this machine: the JAX
    floor's step followed, in the same loop, by `floor_steps[k]()`, the same training step in
    PyTorch on tiny CPU tensors (the module calls, autograd, the optimizer's Python and the
    dispatcher for every op, with negligible compute), against the JAX step alone. No
    implementation of the step under PyTorch can go below it. The CPU runs it on one thread, as
    XLA's threads hold the cores. Returns {"floor_<k>/jax": median ratio of neighbouring blocks}."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        jstep, jsync, _ = jax_step_fn()
        figures = {}
        for key, make in floor_steps.items():
            tiny = make()

            def both():
                jstep()
                tiny()
            try:
                figures[f"floor_{key}/jax"] = alternating_times(
                    (both, jsync), (jstep, jsync), blocks=blocks, steps_per_block=steps_per_block)[2]
            except Exception as e:  # inductor without a C++ compiler: say so in the table
                figures[f"floor_{key}/jax"] = f"not measured ({type(e).__name__})"
        return figures
    finally:
        torch.set_num_threads(threads)


_peak = []


def matmul_peak(n=2048):
    """This machine's matmul FLOP/s as XLA reaches it: a float32 n×n `jnp.dot` on jax's
    default device, best of 5 (measured once per process, in the same run as the step)."""
    if not _peak:
        import jax.numpy as jnp
        a = jnp.ones((n, n), jnp.float32)
        dot = jax.jit(jnp.dot)
        dot(a, a).block_until_ready()
        _peak.append(2 * n ** 3 / best_of(lambda: dot(a, a).block_until_ready(), 5))
    return _peak[0]


def program_flops(compiled) -> float:
    """The floating-point operations of one run of a compiled program (XLA's cost analysis),
    on all its devices: the analysis counts one device's part of a program over several."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    shardings = jax.tree.leaves(compiled.output_shardings)
    return float(cost.get("flops", 0.0)) * (len(shardings[0].device_set) if shardings else 1)


def flop_rate(flops, step_seconds):
    """The step's achieved FLOP/s (`flops` per step in `step_seconds`) and its fraction of
    `matmul_peak()`."""
    rate = flops / step_seconds
    return {"gflop_per_s": rate / 1e9, "peak_gflop_per_s": matmul_peak() / 1e9,
            "of_peak": rate / matmul_peak()}


def live_device_bytes():
    return sum(a.nbytes for a in jax.live_arrays())


def peak_step_bytes(compiled, live):
    """Peak bytes of a step: `live`, the bytes alive when its program starts, plus what the
    program allocates on top (its temporaries and outputs, less outputs written into
    donated inputs)."""
    m = compiled.memory_analysis()
    return live + m.temp_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes


def last_torch_xla_program():
    from torch_xla._lazy.runtime import runner
    return runner.cached_programs()[-1].compiled


def live_bytes_at_launch(step, sync):
    """Device bytes alive when the step's program is launched (a training step frees last
    step's gradients in `zero_grad`, before its program runs): one step, instrumented."""
    from torch_xla._lazy.step import execution
    seen, execute = [], execution._execute
    execution._execute = lambda *a: (seen.append(live_device_bytes()), execute(*a))[1]
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


def compiled_step(model, opt, loss_fn, backend="openxla"):
    """The training step under `torch.compile(backend='openxla')`: forward and backward one
    program each (AOTAutograd), the optimizer step a graph of its own."""
    import torch

    @torch.compile(backend=backend)
    def step():
        opt.zero_grad()
        loss_fn(model).backward()
        opt.step()
    return step


def compare(name, torch_step_fn, jax_step_fn, blocks=5, steps_per_block=10, eager_steps=10,
            compiled_step_fn=None, floor_steps=None, jax_variants=None):
    """Times one workload three ways and reports the line: ours (`torch_step_fn(device,
    xla=True)`), the JAX floor (`jax_step_fn()` -> (step, sync, compile)) and eager PyTorch on
    the CPU (`torch_step_fn('cpu', xla=False)`); with `compiled_step_fn(device)`, a fourth:
    the step under torch.compile. Ours and the compiled step are each timed in blocks
    alternating with the JAX floor's (`ours/jax`, `compiled/jax`: the median ratio of
    neighbouring blocks; `*_best/jax_best`: best block against best block). `floor_steps`
    adds `pytorch_floor`'s figures, `jax_variants` ({k: () -> (step, sync)}: the JAX step
    written another way) `jax_<k>/jax`, alternated with the JAX floor alike; the first steps
    are timed in fresh processes (`first_steps`), `name` being the workload's module."""
    import torch_xla.core.xla_model as xm
    compiled = {}
    if compiled_step_fn is not None:  # alternating with the JAX floor (the machine is shared)
        compiled_t, floor_t, ratio = against_jax(
            (compiled_step_fn(xm.xla_device()), xm.wait_device_ops), jax_step_fn,
            blocks=2 * blocks, steps_per_block=steps_per_block)
        compiled = {"compiled_ms": compiled_t * 1e3, "compiled/jax": ratio,
                    "compiled_best/jax_best": compiled_t / floor_t}
    before = live_device_bytes()
    ours = torch_step_fn(xm.xla_device(), True)
    ours()
    xm.wait_device_ops()
    live = live_bytes_at_launch(ours, xm.wait_device_ops) - before
    ours_program = last_torch_xla_program()
    ours_mem = peak_step_bytes(ours_program, live)
    before = live_device_bytes()
    jstep, jsync, jcompile = jax_step_fn()
    jstep()
    jsync()
    jax_mem = peak_step_bytes(jcompile(), live_device_bytes() - before)
    ours_t, jax_t, ratio = alternating_times((ours, xm.wait_device_ops), (jstep, jsync),
                                             blocks=2 * blocks, steps_per_block=steps_per_block)
    del jstep, jsync, jcompile
    floor = {} if floor_steps is None else pytorch_floor(jax_step_fn, floor_steps, blocks=2 * blocks,
                                                         steps_per_block=steps_per_block)
    for key, make in (jax_variants or {}).items():
        floor[f"jax_{key}/jax"] = against_jax(make(), jax_step_fn, blocks=2 * blocks,
                                              steps_per_block=steps_per_block)[2]
    eager = torch_step_fn("cpu", False)
    eager_t = steady_time(eager, lambda: None, warmup=2, blocks=3, steps_per_block=eager_steps)
    report(name, {"ours_ms": ours_t * 1e3, "jax_ms": jax_t * 1e3, "eager_cpu_ms": eager_t * 1e3,
                  "ours/jax": ratio, "ours_best/jax_best": ours_t / jax_t,
                  "ours/eager": ours_t / eager_t, **flop_rate(program_flops(ours_program), ours_t),
                  **compiled, **floor, **first_steps(name),
                  "peak_ours_mb": ours_mem / 2**20, "peak_jax_mb": jax_mem / 2**20,
                  "peak_ratio": ours_mem / jax_mem})


# ---- the same workload under upstream torch_xla, in the same run -------------------------

UPSTREAM_PYTHON = "/work/upstream-venv/bin/python"  # upstream torch_xla 2.9.0's venv, if present
_ROUND = "ROUND "  # marks the server's result lines among whatever else torch_xla prints


def upstream_option(parser: argparse.ArgumentParser) -> None:
    """--upstream-python: the python of a venv with upstream torch_xla 2.9.0 (default
    UPSTREAM_PYTHON where it exists); --rounds: how many rounds each side runs, alternated."""
    default = UPSTREAM_PYTHON if os.path.exists(UPSTREAM_PYTHON) else None
    parser.add_argument("--upstream-python", default=default,
                        help=f"python of a venv with upstream torch_xla 2.9.0 (default {default})")
    parser.add_argument("--no-upstream", action="store_true", help="ours alone")
    parser.add_argument("--rounds", type=int, help="rounds per side (default 3 with upstream, else 1)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)


class Upstream:
    """Benchmark `script` under upstream torch_xla (`python`) in a subprocess kept alive for
    the run, serving rounds (`serve`): upstream's figures of the same workload. Its
    environment is upstream's venv alone (PJRT_DEVICE=CPU: upstream's wheel has no CUDA
    plugin; this tree off its path, the script started from /)."""

    def __init__(self, python, script, argv=()):
        root = pathlib.Path(__file__).resolve().parent.parent
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("XLA_", "PJRT_", "PT_XLA_", "TPU_", "CPU_NUM_", "TORCH_XLA"))}
        env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                            if p and pathlib.Path(p).resolve() != root)
        env["PJRT_DEVICE"] = "CPU"
        self.proc = subprocess.Popen([python, str(pathlib.Path(script).resolve()), "--serve", *argv],
                                     env=env, cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def round(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(_ROUND):
                return json.loads(line[len(_ROUND):])
        raise RuntimeError(f"upstream's side ended (exit status {self.proc.wait()})")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def serve(round_fn) -> None:
    """The server's side of `Upstream`: one round per line read from stdin, each round's
    figures (`round_fn()`, a dict) one JSON line on stdout."""
    for _ in sys.stdin:
        print(_ROUND + json.dumps(round_fn()), flush=True)


def medians(rounds):
    """Each figure's median over the rounds (the first round's value where it is no number)."""
    return {k: sorted(r[k] for r in rounds)[len(rounds) // 2]
            if isinstance(v, float) else v for k, v in rounds[0].items()}


def upstream_side(opts, script, argv=()):
    """The `Upstream` server of `script` that `opts` (`upstream_option`'s) ask for, or None,
    saying why there is none."""
    if opts.no_upstream:
        return None
    if not opts.upstream_python or not os.path.exists(opts.upstream_python):
        print(f"upstream torch_xla not measured: no python at {opts.upstream_python or UPSTREAM_PYTHON} "
              "(--upstream-python PATH)", flush=True)
        return None
    return Upstream(opts.upstream_python, script, argv)


def parse_with_upstream(parser, make_round, script, upstream_argv=lambda opts: (), argv=None):
    """The command line of a benchmark measured beside upstream torch_xla: `parser`'s options
    and `upstream_option`'s. In the upstream subprocess (--serve) it serves rounds of
    `make_round(opts)` and exits; otherwise it returns the options and the upstream side
    (`upstream_side`, started with `upstream_argv(opts)`, the workload's own arguments)."""
    upstream_option(parser)
    opts = parser.parse_args(argv)
    if opts.serve:
        serve(make_round(opts))
        sys.exit(0)
    return opts, upstream_side(opts, script, list(upstream_argv(opts)))


def against_upstream(name, round_fn, upstream, rounds=None, compared=()):
    """Rounds of `round_fn()` here and on `upstream` (None: here alone), alternated so that a
    loaded machine weighs on both alike; reports `name` (our medians), `name`_upstream
    (upstream's) and `name`_ours/upstream: for each figure in `compared`, the median over
    the rounds of the ratio of the two sides' values."""
    ours, theirs = [], []
    try:
        for _ in range(rounds or (3 if upstream else 1)):
            ours.append(round_fn())
            if upstream:
                theirs.append(upstream.round())
    finally:
        if upstream:
            upstream.close()
    report(name, medians(ours))
    if upstream:
        report(f"{name}_upstream", medians(theirs))
        report(f"{name}_ours/upstream", medians(
            [{k: o[k] / t[k] for k in compared} for o, t in zip(ours, theirs)]))
