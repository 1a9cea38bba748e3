"""Execution: what turns pending values into device buffers, and moves data in and out.

`materialize(values)` runs what `values` need, one program per device: the compiler's walk
and program (`compiler`), run on the device; a graph with a collective runs as one
replicated program over every replica's device (`replicated`); under SPMD every graph runs
as one program partitioned over all devices (`spmd_program`). `mark_step` does it for
every live pending tensor and donates the buffers no live tensor holds any more.
`from_cpu`/`to_cpu` are the transfers, counted and timed in the metrics.
"""
import os
import time

import jax
import torch

from . import compiler, metrics, replicated, runtime, spmd_program
from .ir import Value, format_node
from .tensor import live_values


def from_cpu(t: torch.Tensor, device: int, dtype=None) -> Value:
    """A CPU tensor's data as a buffer on XLA device `device` (cast to `dtype`)."""
    dtype = dtype or t.dtype
    with metrics.timed("TransferToDeviceTime"):
        data = runtime.to_device_buffer(t.to(dtype) if t.dtype != dtype else t, device)
    metrics.count("TransferToDevice")
    return Value(tuple(t.shape), dtype, device, data=data)


def to_cpu(value: Value) -> torch.Tensor:
    materialize([value])
    with metrics.timed("TransferFromDeviceTime"):
        out = runtime.to_cpu_tensor(value.data, value.dtype)
    metrics.count("TransferFromDevice")
    return out


def _pending_by_device(values):
    by_device = {}
    for v in values:
        if v.node is not None:
            by_device.setdefault(v.device, []).append(v)
    return by_device.values()


def materialize(values) -> None:
    """Runs what is needed to give every value in `values` a buffer (one program per device)."""
    for vs in _pending_by_device(values):
        _run(vs)


def mark_step(device=None) -> None:
    """Materialises every live pending tensor, one program per device, donating buffers that
    no live tensor holds any more. On a DataParallel thread it covers that thread's device."""
    metrics.count("MarkStep")
    if device is None:
        device = runtime.thread_device()
    values = live_values(device)
    held = {id(v.data) for v in values if v.data is not None}
    for vs in _pending_by_device(values):
        _run(vs, held)


def _run(values, held=None) -> None:
    """Materialises the pending `values` (all on one device) in one program."""
    w = compiler.walk(values, held)
    if w is None:
        return
    if runtime.is_spmd():
        outputs = spmd_program.run(w)
    elif w.collective:
        if held is not None:
            # Replicas must agree on the program, and which buffers are still held can differ
            # between them (a dead tensor not yet collected): no donation here.
            w = compiler.walk(values)
        call = replicated.Call(w.key, w.program.run_traced, w.args, [v.shape for v in w.roots])
        outputs = replicated.run(w.device, call)
    else:
        program = compiler.program_for(w)
        start = time.perf_counter_ns()
        outputs = program.compiled(*w.args)
        metrics.sample("ExecuteTime", time.perf_counter_ns() - start)
    for v, out in zip(w.roots, outputs):
        v.set_data(out)
    _save_graph(w.order)


def _save_graph(order) -> None:
    """XLA_SAVE_TENSORS_FILE: appends each executed graph's IR to that file."""
    path = os.environ.get("XLA_SAVE_TENSORS_FILE")
    if path:
        with open(path, "a") as f:
            f.write("[graph]\n" + "\n".join(f"  %{i} = {format_node(n)}" for i, n in enumerate(order)) + "\n")


def wait_device_ops() -> None:
    """Blocks until every buffer of a live tensor has been computed, and jax's effects ran."""
    for v in live_values():
        if v.data is not None:
            v.data.block_until_ready()
    jax.effects_barrier()
