"""Eager mode: µs per op of a steady loop of small ops in op-by-op eager mode (against eager
PyTorch on the CPU, the lazy path and jax's own op-by-op dispatch of the same ops), and a
step of the MLP in eager mode, fused (the default) and op by op, against the lazy step; each
pair timed in alternating blocks.

`eager_op_by_op` is the op-by-op loop against jax's floor (`eager/jax`), and the floor of any
PyTorch/XLA written in Python against the same (`subclass_floor/jax`: a `__torch_dispatch__`
wrapper subclass calling one cached jitted function per op, doing nothing else), in rounds
alternated with the same rounds under upstream torch_xla (`--upstream-python`, default
common.UPSTREAM_PYTHON where present): `eager_op_by_op_upstream`, and
`eager_op_by_op_ours/upstream`, the median ratio of the two sides' µs per op (each side's
`eager/jax` is to its own venv's jax).

    python benchmarks/eager.py [--upstream-python PY | --no-upstream] [--rounds N]
"""
import argparse

import jax
import jax.numpy as jnp
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla.experimental import eager_mode_context
from common import (against_upstream, alternating_times, flop_rate, last_torch_xla_program,
                    parse_with_upstream, program_flops, report)
from mlp import torch_step_fn

OPS_PER_ITER, ITERS = 3, 100  # x = tanh(x * w + 1): mul, add, tanh
SHAPE = (16, 16)
LAZY_OPS_PER_STEP = 30  # the lazy loop ends a step every 10 iterations


def _loop(x, w, iters=ITERS):
    for _ in range(iters):
        x = torch.tanh(x * w + 1.0)
    return x


def _op_by_op():
    """Op-by-op eager mode (ours also has a fused one; upstream's is op by op)."""
    try:
        return eager_mode_context(True, op_by_op=True)
    except TypeError:  # upstream torch_xla
        return eager_mode_context(True)


def _torch_loop(device, eager):
    x = torch.randn(SHAPE).to(device)
    w = torch.randn(SHAPE).to(device)
    xm.mark_step() if device != "cpu" else None

    def step():
        if eager:
            with _op_by_op():
                _loop(x, w)
        elif device == "cpu":
            _loop(x, w)
        else:
            y = x
            for _ in range(ITERS // 10):
                y = _loop(y, w, 10)
                xm.mark_step()
    return step


def _jax_loop():
    """The same ops, one jitted function per op called from Python: jax's op-by-op floor."""
    mul, add, tanh = jax.jit(jnp.multiply), jax.jit(lambda a: a + 1.0), jax.jit(jnp.tanh)
    x = jnp.asarray(torch.randn(SHAPE).numpy())
    w = jnp.asarray(torch.randn(SHAPE).numpy())
    out = [x]

    def step():
        y = x
        for _ in range(ITERS):
            y = tanh(add(mul(y, w)))
        out[0] = y
    return step, lambda: out[0].block_until_ready()


class _SubclassFloor(torch.Tensor):
    """The least any PyTorch/XLA written in Python over `__torch_dispatch__` does per op: a
    wrapper subclass holding a jax array, each op one cached `jax.jit` function called at
    once (scalars baked into it), no graph, no checks, no bookkeeping."""
    _JITS = {torch.ops.aten.mul.Tensor: jax.jit(jnp.multiply),
             torch.ops.aten.add.Tensor: jax.jit(lambda a: a + 1.0),  # (the loop's `+ 1.0`)
             torch.ops.aten.tanh.default: jax.jit(jnp.tanh)}

    @staticmethod
    def __new__(cls, array):
        t = torch.Tensor._make_wrapper_subclass(cls, array.shape, dtype=torch.float32)
        t.array = array
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return cls(cls._JITS[func](*[a.array for a in args if type(a) is cls]))


def _subclass_floor_loop():
    """`_loop` on `_SubclassFloor` tensors."""
    x = _SubclassFloor(jnp.asarray(torch.randn(SHAPE).numpy()))
    w = _SubclassFloor(jnp.asarray(torch.randn(SHAPE).numpy()))
    out = [x]

    def step():
        out[0] = _loop(x, w)
    return step, lambda: out[0].array.block_until_ready()


def _per_op_us(seconds):
    return seconds / (ITERS * OPS_PER_ITER) * 1e6


def small_ops():
    ours = (_torch_loop(xm.xla_device(), eager=True), xm.wait_device_ops)
    figures = {}
    for name, other in (("cpu", (_torch_loop("cpu", eager=False), lambda: None)),
                        ("lazy", (_torch_loop(xm.xla_device(), eager=False), xm.wait_device_ops))):
        ours_t, other_t, ratio = alternating_times(ours, other, warmup=2, blocks=7, steps_per_block=3)
        figures[f"eager_us_per_op_vs_{name}"] = _per_op_us(ours_t)
        figures[f"{name}_us_per_op"] = _per_op_us(other_t)
        figures[f"eager/{name}"] = ratio
    met.clear_all()
    with _op_by_op():
        x = torch.randn(SHAPE).to(xm.xla_device())
        _loop(x, x, 5)
        met.clear_all()
        _loop(x, x)
    xm.wait_device_ops()
    figures["steady_compiles"] = (met.metric_data("EagerOpCompileTime") or (0,))[0]
    figures["steady_runs"] = met.metric_data("EagerOpExecuteTime")[0]
    report("eager_small_ops", figures)


def op_by_op_round():
    """The op-by-op loop against jax's op-by-op floor, alternated: one round's figures (what
    upstream's side serves too)."""
    ours = (_torch_loop(xm.xla_device(), eager=True), xm.wait_device_ops)
    eager_t, jax_t, ratio = alternating_times(ours, _jax_loop(), warmup=2, blocks=7, steps_per_block=3)
    floor_t, floor_jax_t, floor_ratio = alternating_times(_subclass_floor_loop(), _jax_loop(),
                                                          warmup=2, blocks=7, steps_per_block=3)
    return {"eager_us_per_op": _per_op_us(eager_t), "jax_us_per_op": _per_op_us(jax_t),
            "eager/jax": ratio, "subclass_floor_us_per_op": _per_op_us(floor_t),
            "subclass_floor/jax": floor_ratio}


def mlp_step():
    lazy_step = torch_step_fn(xm.xla_device(), True)
    lazy_step()
    xm.wait_device_ops()
    flops = program_flops(last_torch_xla_program())  # the lazy step's one program
    for name, op_by_op in (("fused", False), ("op_by_op", True)):
        eager_step = torch_step_fn(xm.xla_device(), True)

        def eager():
            with eager_mode_context(True, op_by_op=op_by_op):
                eager_step()
        eager_t, lazy_t, ratio = alternating_times((eager, xm.wait_device_ops),
                                                   (lazy_step, xm.wait_device_ops),
                                                   warmup=2, blocks=6, steps_per_block=3)
        met.clear_all()
        eager()
        xm.wait_device_ops()
        programs = met.metric_data("EagerOpExecuteTime" if op_by_op else "ExecuteTime")[0]
        report(f"eager_{name}_mlp", {"eager_ms": eager_t * 1e3, "lazy_ms": lazy_t * 1e3,
                                     "eager/lazy": ratio, "programs_per_step": programs,
                                     **{f"eager_{k}": v for k, v in flop_rate(flops, eager_t).items()},
                                     "lazy_of_peak": flop_rate(flops, lazy_t)["of_peak"]})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    opts, upstream = parse_with_upstream(parser, lambda opts: op_by_op_round, __file__)
    small_ops()
    against_upstream("eager_op_by_op", op_by_op_round, upstream, opts.rounds,
                     compared=("eager_us_per_op",))
    mlp_step()


if __name__ == "__main__":
    main()
