"""Upstream torch_xla's own test files timed with this package and with upstream torch_xla,
side by side: each file runs as scripts/upstream-tests runs it (from its folder,
PJRT_DEVICE=CPU, CPU_NUM_DEVICES=1), ours and upstream's alternated, `--rounds` times.
Prints per file the median wall time of each side, the ratio ours/upstream, and from the last
round of each side what torch_xla.debug.metrics counted (compilations, executions, CPU
fallbacks: `aten::*` counters), so that a slower side says where its time went.

    python benchmarks/upstream_tests.py UPSTREAM_SRC UPSTREAM_PYTHON [--rounds N]
        [--ours-python PY] [FILE[:ARG ...] ...]

UPSTREAM_SRC: upstream's source tree (its test/ is used); UPSTREAM_PYTHON: the python of a
venv with upstream torch_xla. FILEs are under test/ (default test_grad_checkpoint.py and
test_python_ops.py); arguments after a colon, comma-separated.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_FILES = ("test_grad_checkpoint.py", "test_python_ops.py")

# Runs a test file as __main__ and writes, at exit, the metrics torch_xla counted.
_WRAPPER = """
import atexit, json, runpy, sys
out, path = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
def _dump():
    import torch_xla.debug.metrics as met
    counters = {n: met.counter_value(n) for n in met.counter_names()}
    metrics = {n: met.metric_data(n)[:2] for n in met.metric_names() if met.metric_data(n)}
    with open(out, "w") as f:
        json.dump({"counters": counters, "metrics": metrics}, f, default=str)
atexit.register(_dump)
runpy.run_path(path, run_name="__main__")
"""


def environment(side, devices=1):
    """The environment of a run on `side` ("ours": this repository on the path; else
    upstream's venv alone), on `devices` CPU devices, no other torch_xla setting."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "PJRT_", "PT_XLA_", "TPU_", "CPU_NUM_", "TORCH_XLA"))}
    env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES=str(devices))
    if side == "ours":
        env["PYTHONPATH"] = str(ROOT)
    else:
        env.pop("PYTHONPATH", None)
    return env


def run_file(side, python, test_dir, path, args, timeout):
    """(wall seconds, exit status, metrics) of one run of test file `path`."""
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "metrics.json")
        file = test_dir / path
        start = time.perf_counter()
        try:
            proc = subprocess.run([python, "-c", _WRAPPER, out, str(file), *args],
                                  cwd=file.parent, env=environment(side),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  timeout=timeout)
            code, stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired:  # its time so far stands, marked as a timeout
            code, stderr = "timeout", ""
        wall = time.perf_counter() - start
        metrics = json.load(open(out)) if os.path.exists(out) else {}
    if code:
        print(f"  {side} {path}: exit {code}: {stderr[-400:]}", file=sys.stderr)
    return wall, code, metrics


def _summary(metrics):
    counters, timed = metrics.get("counters", {}), metrics.get("metrics", {})
    fallbacks = {n: c for n, c in counters.items() if n.startswith("aten::")}

    def seconds(name):
        return round(float(timed[name][1]) / 1e9, 2) if name in timed else None
    return {"compiles": timed.get("CompileTime", [None])[0],
            "compile_s": seconds("CompileTime"),
            "executes": timed.get("ExecuteTime", [None])[0],
            "execute_s": seconds("ExecuteTime"),
            "cpu_fallbacks": sum(fallbacks.values()),
            "fallback_ops": sorted(fallbacks)[:8]}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("upstream_src", type=pathlib.Path)
    parser.add_argument("upstream_python")
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ours-python", default=sys.executable)
    parser.add_argument("--timeout", type=int, default=1800)
    opts = parser.parse_intermixed_args(argv)
    test_dir = opts.upstream_src / "test"
    sides = {"ours": opts.ours_python, "upstream": opts.upstream_python}
    for entry in opts.files:
        path, _, args = entry.partition(":")
        args = args.split(",") if args else []
        walls, last = {side: [] for side in sides}, {}
        for _ in range(opts.rounds):
            for side, python in sides.items():
                wall, code, metrics = run_file(side, python, test_dir, path, args, opts.timeout)
                walls[side].append(wall)
                last[side] = {"exit": code, **_summary(metrics)}
        ours, theirs = (float(np.median(walls[s])) for s in sides)
        print(entry, json.dumps({"ours_s": round(ours, 1), "upstream_s": round(theirs, 1),
                                 "ours/upstream": round(ours / theirs, 3),
                                 "ours_walls": [round(w, 1) for w in walls["ours"]],
                                 "upstream_walls": [round(w, 1) for w in walls["upstream"]],
                                 "ours_metrics": last["ours"],
                                 "upstream_metrics": last["upstream"]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
