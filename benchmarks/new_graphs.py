"""The cost of a graph seen for the first time: G graphs of K ops (`tanh(x @ w) * 0.5 + 1`
repeated), each with a new batch size, traced, compiled and run once, ours and the same
function under `jax.jit` alternated graph by graph; ours split into tracing, lowering to
StableHLO (`LoweringTime`), XLA's compile (`CompileTime` less lowering) and the first run
(the rest: the walk, the launch, the run). Prints the medians per graph, the median of the
per-graph ratios ours/JAX (wall time and process CPU time, XLA's threads included) and both
programs' HLO instruction counts.

`new_graph` is ours against upstream torch_xla on the same chain (`--upstream-python`, default
common.UPSTREAM_PYTHON where present): rounds of 5 new graphs each side, alternated; each
round's median wall time per graph (`wall_ms`: trace, compile, first run; `compile_ms`: its
`CompileTime`), and `new_graph_ours/upstream`, the median ratio of the rounds.

    python benchmarks/new_graphs.py [G] [K] [--upstream-python PY | --no-upstream] [--rounds N]
                                                   # default 40 graphs of 30 ops
    python benchmarks/new_graphs.py --train [G]    # MLP and transformer steps, G new batch sizes
    python benchmarks/new_graphs.py --persistent [G] [K]  # a second process on the disk cache
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr
from common import (against_upstream, flop_rate, last_torch_xla_program, parse_with_upstream,
                    program_flops)

WIDTH = 32
OPS_PER_BLOCK = 4  # mm, tanh, mul, add


def _metric_sum(name):
    data = met.metric_data(name)
    return 0.0 if data is None else data[1] / 1e9


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start):
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def hlo_instructions(compiled) -> int:
    """Instructions of an optimized HLO module, its fused computations included."""
    return sum(1 for line in compiled.as_text().splitlines()
               if " = " in line and not line.lstrip().startswith(("HloModule", "%fused", "ENTRY")))


def ours_graph(run_ops, make_inputs):
    """One new graph on the lazy path: (wall, cpu, trace, lowering, compile, run) seconds."""
    inputs = make_inputs()
    xm.mark_step()
    xm.wait_device_ops()
    lowering0, compile0 = _metric_sum("LoweringTime"), _metric_sum("CompileTime")
    start = _clock()
    run_ops(*inputs)
    trace = time.perf_counter() - start[0]
    xm.mark_step()
    xm.wait_device_ops()
    wall, cpu = _since(start)
    lowering = _metric_sum("LoweringTime") - lowering0
    compile_ = _metric_sum("CompileTime") - compile0 - lowering
    return wall, cpu, trace, lowering, compile_, wall - trace - lowering - compile_


def jax_graph(fn, args):
    """The same graph under jax.jit: (wall, cpu, trace and lowering, compile, run), and the
    compiled program."""
    start = _clock()
    lowered = jax.jit(fn).lower(*args)
    lowering = time.perf_counter() - start[0]
    compiled = lowered.compile()
    compile_ = time.perf_counter() - start[0] - lowering
    jax.block_until_ready(compiled(*args))
    wall, cpu = _since(start)
    return (wall, cpu, lowering, compile_, wall - lowering - compile_), compiled


def _report(name, ours, theirs, ours_program, jax_program):
    """The medians; the achieved FLOP/s is of the whole first step (trace, compile, run)."""
    ours, theirs = np.array(ours), np.array(theirs)
    med = lambda a: float(np.median(a))  # noqa: E731
    figures = {
        "graphs": len(ours), "ours_ms": med(ours[:, 0]) * 1e3, "jax_ms": med(theirs[:, 0]) * 1e3,
        "ours/jax": med(ours[:, 0] / theirs[:, 0]), "ours/jax_cpu": med(ours[:, 1] / theirs[:, 1]),
        "ours_trace_ms": med(ours[:, 2]) * 1e3, "ours_lowering_ms": med(ours[:, 3]) * 1e3,
        "ours_xla_compile_ms": med(ours[:, 4]) * 1e3, "ours_first_run_ms": med(ours[:, 5]) * 1e3,
        "jax_lowering_ms": med(theirs[:, 2]) * 1e3, "jax_xla_compile_ms": med(theirs[:, 3]) * 1e3,
        "jax_first_run_ms": med(theirs[:, 4]) * 1e3,
        "ours_hlo_instructions": hlo_instructions(ours_program),
        "jax_hlo_instructions": hlo_instructions(jax_program),
        **flop_rate(program_flops(ours_program), med(ours[:, 0]))}
    print(name, json.dumps({k: round(v, 3) if isinstance(v, float) else v
                            for k, v in figures.items()}), flush=True)
    return figures


def _chain_ops(ops, w_cpu):
    """The chain of `ops` ops as a function of x, its weight `w_cpu` on this process's
    device, and its number of blocks."""
    blocks = max(1, ops // OPS_PER_BLOCK)
    w = w_cpu.to(xm.xla_device())

    def run_ops(x):
        for _ in range(blocks):
            x = torch.tanh(x @ w) * 0.5 + 1
        return x
    return run_ops, blocks


def chain(graphs, ops, batch0=3):
    """G new graphs of `ops` ops each, ours and JAX's alternated."""
    device = xm.xla_device()
    w_cpu = torch.randn(WIDTH, WIDTH) * 0.1
    run_ops, blocks = _chain_ops(ops, w_cpu)
    wj = jnp.asarray(w_cpu.numpy())

    def jax_fn(x, w):
        for _ in range(blocks):
            x = jnp.tanh(x @ w) * 0.5 + 1
        return x
    ours, theirs = [], []
    held = []
    for g in range(graphs + 1):  # the first pair warms both up
        batch = batch0 + g
        x_cpu = torch.randn(batch, WIDTH)
        mine = ours_graph(lambda x: held.append(run_ops(x)), lambda: (x_cpu.to(device),))
        held.clear()
        jaxs, compiled = jax_graph(jax_fn, (jnp.asarray(x_cpu.numpy()), wj))
        if g:
            ours.append(mine)
            theirs.append(jaxs)
    return _report(f"chain {blocks * OPS_PER_BLOCK} ops", ours, theirs, last_torch_xla_program(),
                   compiled)


_new_batches = itertools.count(1000)  # batch sizes no graph of this process had


def new_graph_round(ops=30, graphs=5):
    """Median figures of `graphs` new graphs of the chain (what upstream's side serves too)."""
    run_ops, _ = _chain_ops(ops, torch.randn(WIDTH, WIDTH) * 0.1)
    held, walls, compiles = [], [], []
    for _ in range(graphs):
        x = torch.randn(next(_new_batches), WIDTH)
        wall, _, _, lowering, compile_, _ = ours_graph(lambda x: held.append(run_ops(x)),
                                                       lambda: (x.to(xm.xla_device()),))
        held.clear()
        walls.append(wall)
        compiles.append(lowering + compile_)
    return {"wall_ms": float(np.median(walls)) * 1e3, "compile_ms": float(np.median(compiles)) * 1e3}


def _train_pair(module_name, graphs):
    """The first step after a change of batch size, ours and JAX's, alternated."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    module = __import__(module_name)
    device = xm.xla_device()
    ours_step, ours_inputs = module.new_batch_step(device)
    jax_step, jax_args = module.jax_new_batch_step()
    ours, theirs = [], []
    for g in range(graphs + 1):
        batch = 4 + g
        mine = ours_graph(ours_step, lambda: ours_inputs(batch))
        jaxs, compiled = jax_graph(jax_step, jax_args(batch))
        if g:
            ours.append(mine)
            theirs.append(jaxs)
    return _report(f"{module_name} step", ours, theirs, last_torch_xla_program(), compiled)


def persistent(graphs, ops):
    """The same G graphs in two fresh processes sharing a persistent cache: per graph."""
    with tempfile.TemporaryDirectory() as cache:
        seconds = []
        for _ in range(2):
            out = subprocess.run([sys.executable, __file__, "--persistent-child", cache,
                                  str(graphs), str(ops)], capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(out.stderr)
            seconds.append(json.loads(out.stdout.splitlines()[-1]))
    first, second = (float(np.median(s["walls"])) for s in seconds)
    print("persistent", json.dumps({"first_process_ms": round(first * 1e3, 2),
                                    "second_process_ms": round(second * 1e3, 2),
                                    "first/second": round(first / second, 2),
                                    "second_hits": seconds[1]["hits"]}), flush=True)


def persistent_child(cache, graphs, ops):
    xr.initialize_cache(cache)
    device = xm.xla_device()
    torch.manual_seed(0)
    run, _ = _chain_ops(ops, torch.randn(WIDTH, WIDTH) * 0.1)
    walls, held = [], []

    def run_ops(x):
        held.append(run(x))
    for g in range(graphs + 1):
        wall = ours_graph(run_ops, lambda: (torch.randn(3 + g, WIDTH).to(device),))[0]
        held.clear()
        if g:
            walls.append(wall)
    print(json.dumps({"walls": walls, "hits": met.counter_value("PersistentCacheHit") or 0}))


def main(argv):
    if argv[:1] == ["--persistent-child"]:
        return persistent_child(argv[1], int(argv[2]), int(argv[3]))
    if argv[:1] == ["--persistent"]:
        return persistent(*(int(a) for a in (argv[1:] or ["10", "30"])))
    if argv[:1] == ["--train"]:
        graphs = int(argv[1]) if len(argv) > 1 else 4
        for name in ("mlp", "transformer"):
            _train_pair(name, graphs)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graphs", type=int, nargs="?", default=40)
    parser.add_argument("ops", type=int, nargs="?", default=30)
    opts, upstream = parse_with_upstream(
        parser, lambda opts: lambda: new_graph_round(opts.ops), __file__,
        lambda opts: (str(opts.graphs), str(opts.ops)), argv)
    chain(opts.graphs, opts.ops)
    against_upstream("new_graph", lambda: new_graph_round(opts.ops), upstream, opts.rounds,
                     compared=("wall_ms",))


if __name__ == "__main__":
    main(sys.argv[1:])
