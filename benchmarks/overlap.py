"""Tracing overlaps execution: a step whose tracing and program take about as long.

`mark_step` returns once the program is launched, so tracing step N+1 runs while step N's
program runs; only reading values waits. The step here is a few matmuls of 384x384 (the
program's time; their count is chosen at start so the program takes about as long as the
tracing) and 300 small ops on a 16x16 tensor (the tracing's time). Reported: `trace_ms`
(tracing a step, nothing run), `exec_ms` (the step's program alone, run again and again
on the same buffers), `step_ms` (steady steps, traced and run back to back, blocks ending in a
wait), `serial_ms` (each step traced, run and waited for), `launch_ms` (the median time a
steady step's mark_step takes to return: the launch, not the program), and `step/max` = step_ms over
the larger of trace_ms and exec_ms: 1.0 is full overlap, (trace+exec)/max none.

XLA runs each program on one thread here (`intra_op_parallelism_threads=1`), so that
tracing (one core) and the program (another) can overlap on a machine of two cores.
"""
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import time  # noqa: E402

import jax  # noqa: E402
import torch  # noqa: E402

import torch_xla.core.xla_model as xm  # noqa: E402
from common import best_of, flop_rate, last_torch_xla_program, program_flops, report  # noqa: E402
from torch_xla._lazy.launch import graph_program  # noqa: E402
from torch_xla._lazy.graph.tensor import live_values  # noqa: E402

N, SMALL_OPS = 384, 300


class Workload:
    def __init__(self, dev, matmuls):
        torch.manual_seed(0)
        self.a = torch.randn(N, N, device=dev) / N ** 0.5
        self.s = torch.randn(16, 16, device=dev)
        self.matmuls = matmuls
        self.launches = []  # how long each step's mark_step took
        xm.mark_step()

    def trace(self):
        a = self.a
        for _ in range(self.matmuls):
            a = torch.tanh(a @ a)
        s = self.s
        for _ in range(SMALL_OPS // 3):
            s = (s * 0.999 + 0.001).relu()
        self.a, self.s = a, s

    def step(self):
        self.trace()
        start = time.perf_counter()
        xm.mark_step()
        self.launches.append(time.perf_counter() - start)

    def exec_time(self, repeat=15):
        """The step's program alone: compiled without donation (so it can run again on the
        same buffers), launched and waited for, best of `repeat`."""
        self.trace()
        w = graph_program.walk(live_values(0))
        program = graph_program.program_for(w)
        args = w.call_args
        jax.block_until_ready(program.compiled(*args))
        best = best_of(lambda: jax.block_until_ready(program.compiled(*args)), repeat)
        xm.mark_step()
        return best


def steps(w, n, wait_each=False):
    """n steps, then a wait (each step waited for: `wait_each`)."""
    def run():
        for _ in range(n):
            w.step()
            if wait_each:
                xm.wait_device_ops()
        xm.wait_device_ops()
    return run


def main():
    dev = xm.xla_device()
    probe = Workload(dev, 1)
    for _ in range(3):
        probe.step()
    xm.wait_device_ops()
    one = probe.exec_time()
    probe.matmuls = 0
    trace_light = best_of(probe.trace)
    xm.mark_step()
    w = Workload(dev, max(1, round(trace_light / one)))
    for _ in range(3):
        w.step()
    xm.wait_device_ops()
    trace_t = best_of(w.trace)
    xm.mark_step()
    xm.wait_device_ops()
    exec_t = w.exec_time()
    flops = program_flops(last_torch_xla_program())
    n = 10
    w.launches.clear()
    step_t = best_of(steps(w, n), repeat=7) / n
    launches = sorted(w.launches)
    serial_t = best_of(steps(w, n, wait_each=True), repeat=7) / n
    report("overlap", {"matmuls": w.matmuls, **flop_rate(flops, step_t),
                       "trace_ms": trace_t * 1e3, "exec_ms": exec_t * 1e3,
                       "step_ms": step_t * 1e3, "serial_ms": serial_t * 1e3,
                       "launch_ms": launches[len(launches) // 2] * 1e3,
                       "step/max": step_t / max(trace_t, exec_t),
                       "step/sum": step_t / (trace_t + exec_t)})


if __name__ == "__main__":
    main()
