"""Transfers between the host and the devices: a CPU tensor's data as a device buffer, and a
computed value's buffer read back, each counted and timed in the counters
(`TransferToDevice`, `TransferFromDevice` and their times; `TensorToData`, a CPU tensor made
device data, cast included), their bytes sampled as torch_xla does (`OutboundData` out of
the host to a device, `InboundData` into the host from one).
"""
import time

import torch

from . import counters, pjrt, runner
from .ir import Value
from .replicas import program as replicated


def from_cpu(t: torch.Tensor, device: int, dtype=None) -> Value:
    """A CPU tensor's data as a buffer on XLA device `device` (cast to `dtype`)."""
    dtype = dtype or t.dtype
    with counters.timed("TensorToData"):
        t = t.to(dtype) if t.dtype != dtype else t
        with counters.timed("TransferToDeviceTime"):
            data = pjrt.to_device_buffer(t, device)
    counters.count("TransferToDevice")
    counters.sample("OutboundData", t.numel() * t.element_size())
    if pjrt.is_spmd():  # under SPMD data arrives on the virtual device, to be laid out from there
        counters.count("VirtualDeviceUsage")
    return Value(tuple(t.shape), dtype, device, data=data)


def read(value: Value) -> torch.Tensor:
    """The computed `value` as a CPU tensor."""
    return pjrt.host_tensor(host_array(value), value.dtype)


def host_array(value: Value):
    """The computed `value`'s buffer copied to the host (a numpy array)."""
    replicated.settle()  # a program waiting for another process would never end: timed
    if runner.running():
        runner.before_wait()
    start = time.perf_counter_ns()
    out = pjrt.to_host_array(value.data)
    counters.sample("TransferFromDeviceTime", time.perf_counter_ns() - start)
    if runner.running():
        runner.time_finished_runs(after_wait=True)
    counters.count("TransferFromDevice")
    counters.sample("InboundData", out.nbytes)
    return out
