"""What the value checks (out-of-range indices, integer division by zero) cost a training
step: the mlp, cnn and transformer steps in paired rounds, one block of steps with the
checks and one without (in alternating order) per round, in one process; the median of the
per-round ratios of CPU time (`time.process_time`) and wall time.

    python benchmarks/value_checks.py [mlp:ROUNDS:STEPS ...]
"""
import importlib
import statistics
import sys
import time

import torch_xla.core.xla_model as xm
from common import flop_rate, last_torch_xla_program, program_flops
from torch_xla._lazy.trace import value_checks


def _block(step, checks, steps):
    value_checks.ENABLED = checks
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        step()
    xm.wait_device_ops()
    return time.process_time() - cpu, time.perf_counter() - wall


def _percent(ratios):
    return f"{100 * (statistics.median(ratios) - 1):+.1f}%"


def measure(name, rounds, steps):
    """The paired rounds; and the step's FLOP/s, checks on, as a fraction of the peak."""
    step = importlib.import_module(name).torch_step_fn(xm.xla_device(), True)
    for checks in (True, False):  # compiles both programs
        _block(step, checks, 3)
    flops = program_flops(last_torch_xla_program())  # (the last one compiled: checks off)
    cpu, wall, step_s = [], [], []
    for r in range(rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        on_off = {checks: _block(step, checks, steps) for checks in order}
        cpu.append(on_off[True][0] / on_off[False][0])
        wall.append(on_off[True][1] / on_off[False][1])
        step_s.append(on_off[True][1] / steps)
    value_checks.ENABLED = True
    rate = flop_rate(flops, statistics.median(step_s))
    print(f"{name}: {rounds} paired rounds of {steps} steps, with checks vs without: "
          f"CPU time {_percent(cpu)}, wall time {_percent(wall)}; step with checks "
          f"{rate['gflop_per_s']:.3g} GFLOP/s, {rate['of_peak']:.3g} of the "
          f"{rate['peak_gflop_per_s']:.3g} GFLOP/s matmul peak", flush=True)


def main(specs):
    for spec in specs or ["mlp:30:5", "cnn:20:3", "transformer:12:2"]:
        name, rounds, steps = spec.split(":")
        measure(name, int(rounds), int(steps))


if __name__ == "__main__":
    main(sys.argv[1:])
