"""Tracing cost: a graph of 300 small ops, replayed; microseconds per op.

`per_op_us` is the whole replay (trace 300 ops, look the program up, run it) divided by 300.
`trace_only_us` leaves the sync out. `mark_step_ms` is one `mark_step` of a graph of 200
small ops already compiled (the graph traced first, untimed): finding the program and
launching it, the best of many. These three (`tracing_per_op`) are measured in rounds
alternated with the same rounds under upstream torch_xla (`--upstream-python`, default
common.UPSTREAM_PYTHON where present): `tracing_per_op_upstream`, and
`tracing_per_op_ours/upstream`, the median ratios of the two sides' figures.

`floor_us` is what PyTorch's own dispatch costs for a wrapper subclass whose
__torch_dispatch__ only makes a new wrapper (functionalization on top, as for our tensors):
no engine of Python tensors can go below it.

Beside it, one call of a small function of two tiny tensors (`x * y + 1`):
`compiled_call_us` under torch.compile (dynamo's guards, AOTAutograd's wrapper, one program
launch), `lazy_call_us` traced and run with a mark_step per call.

    python benchmarks/tracing.py [--upstream-python PY | --no-upstream] [--rounds N]
"""
import argparse
import time

import torch

import torch_xla.core.xla_model as xm
from common import (against_upstream, best_of, flop_rate, last_torch_xla_program,
                    parse_with_upstream, program_flops, report, steady_time)

N_OPS = 300
MARK_STEP_OPS = 200


def graph(x):
    y = x
    for _ in range(N_OPS // 3):
        y = (y * 1.001 + 0.001).relu()
    return y


def mark_step_time(x, repeat=200):
    """One mark_step of a cached graph of MARK_STEP_OPS ops, best of `repeat`."""
    def traced():
        y = x
        for _ in range(MARK_STEP_OPS // 2):
            y = y * 1.001 + 0.001
        return y
    held, best = [None], float("inf")
    for _ in range(repeat):
        held[0] = traced()
        start = time.perf_counter()
        xm.mark_step()
        best = min(best, time.perf_counter() - start)
    xm.wait_device_ops()
    return best


class _Floor(torch.Tensor):
    @staticmethod
    def __new__(cls, shape):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.float32,
                                                   device=torch.device("xla", 0))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _Floor(args[0].shape)


def tracing_round():
    """One round's per-op figures (what upstream's side serves too)."""
    x = torch.randn(16, 16, device=xm.xla_device())
    xm.mark_step()
    held = [None]  # the result stays alive, so mark_step has a program to run

    def replay():
        held[0] = graph(x)
    whole = steady_time(replay, xm.mark_step, blocks=7, steps_per_block=1)
    trace_only = best_of(lambda: graph(x))
    xm.mark_step()
    return {"per_op_us": whole / N_OPS * 1e6, "trace_only_us": trace_only / N_OPS * 1e6,
            "mark_step_ms": mark_step_time(x) * 1e3}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    opts, upstream = parse_with_upstream(parser, lambda opts: tracing_round, __file__)
    dev = xm.xla_device()
    x = torch.randn(16, 16, device=dev)
    held = [graph(x)]
    xm.mark_step()
    flops = program_flops(last_torch_xla_program())  # the graph's program
    floor_tensor = torch._to_functional_tensor(_Floor((16, 16)))
    floor = best_of(lambda: graph(floor_tensor))
    compiled_us, lazy_us = per_call_us(dev)
    whole = steady_time(lambda: held.__setitem__(0, graph(x)), xm.mark_step, blocks=7,
                        steps_per_block=1)
    report("tracing", {"floor_us": floor / N_OPS * 1e6, "compiled_call_us": compiled_us,
                       "lazy_call_us": lazy_us, **flop_rate(flops, whole)})
    against_upstream("tracing_per_op", tracing_round, upstream, opts.rounds,
                     compared=("per_op_us", "trace_only_us", "mark_step_ms"))


def per_call_us(dev, calls=200):
    def small(x, y):
        return x * y + 1

    compiled = torch.compile(small, backend="openxla")
    x, y = torch.randn(4, 4, device=dev), torch.randn(4, 4, device=dev)
    held = [None]

    def calls_of(fn, sync):
        def run():
            for _ in range(calls):
                held[0] = fn(x, y)
                sync()
        return run
    compiled_t = best_of(calls_of(compiled, lambda: None))
    lazy_t = best_of(calls_of(small, xm.mark_step))
    xm.wait_device_ops()
    return compiled_t / calls * 1e6, lazy_t / calls * 1e6


if __name__ == "__main__":
    main()
