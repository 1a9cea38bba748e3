"""Transfers between the host and the devices: a CPU tensor's data as a device buffer, and a
computed value's buffer read back, each counted and timed in the counters
(`TransferToDevice`, `TransferFromDevice` and their times; `TensorToData`, a CPU tensor made
device data, cast included), their bytes sampled as torch_xla does (`OutboundData` out of
the host to a device, `InboundData` into the host from one).
"""
import math
import time

import jax
import torch

from ..base import counters
from ..runtime import pjrt, runner, trace_spans
from ..graph.ir import Value
from . import replica_program as replicated


class HostValue(Value):
    """A CPU tensor's data moved to the virtual device under SPMD, still on the host (torch_xla's
    "tensor on host"): uploaded at its first use, so that a sharding given first places only
    each device's shard (`spmd.layout.shard_data`), and a read before then costs no transfer.
    Reading `data` uploads it whole to its device."""
    __slots__ = ("host",)

    def __init__(self, host, dtype, device):
        self.host = host  # a numpy array of its own, or None once uploaded
        super().__init__(tuple(host.shape), dtype, device)

    @property
    def data(self):
        data = _DATA.__get__(self)
        host = self.host
        if data is None and host is not None:
            data = _upload(host, self.device)
            self.data = data
        return data

    @data.setter
    def data(self, data):
        _DATA.__set__(self, data)
        if data is not None:
            if self.host is not None:
                self.as_input = True  # uploaded for a use
            self.host = None

    @property
    def pending(self) -> bool:
        return self.host is None and _DATA.__get__(self) is None

    def place(self, sharding):
        """Its data laid out by jax `sharding` straight from the host (each device receives
        its shard), counted as one transfer."""
        host = self.host
        shard_bytes = math.prod(sharding.shard_shape(host.shape)) * host.itemsize
        return _transfer(
            lambda: jax.make_array_from_callback(host.shape, sharding, lambda index: host[index]),
            shard_bytes * len(sharding.addressable_devices))


_DATA = Value.__dict__["data"]  # the slot HostValue's property stands in front of


def _transfer(put, nbytes: int):
    """`put()`, a transfer of `nbytes` out of the host, timed and counted."""
    with counters.timed("TransferToDeviceTime"), trace_spans.span("TransferToDevice"):
        data = put()
    counters.count("TransferToDevice")
    counters.sample("OutboundData", nbytes)
    return data


def _upload(host, device: int):
    return _transfer(lambda: jax.device_put(host, pjrt.jax_device(device)), host.nbytes)


def from_cpu(t: torch.Tensor, device: int, dtype=None) -> Value:
    """A CPU tensor's data as a buffer on XLA device `device` (cast to `dtype`); under SPMD,
    on the virtual device, kept on the host until used (`HostValue`)."""
    dtype = dtype or t.dtype
    with counters.timed("TensorToData"):
        host = pjrt.host_copy(t.to(dtype) if t.dtype != dtype else t)
        if pjrt.is_spmd() and device == 0:  # the virtual device: laid out from there
            counters.count("VirtualDeviceUsage")
            return HostValue(host, dtype, device)
        return Value(tuple(t.shape), dtype, device, data=_upload(host, device))


def on_host(value: Value):
    """The numpy data of a value still on the host (`HostValue`), else None."""
    return getattr(value, "host", None)


def read(value: Value) -> torch.Tensor:
    """The computed `value` as a CPU tensor."""
    return pjrt.host_tensor(host_array(value), value.dtype)


def host_array(value: Value):
    """The computed `value`'s buffer copied to the host (a numpy array)."""
    host = on_host(value)
    if host is not None:
        return host.copy()
    replicated.settle()  # a program waiting for another process would never end: timed
    if runner.running():
        runner.before_wait()
    start = time.perf_counter_ns()
    with trace_spans.span("TransferFromDevice"):
        out = pjrt.to_host_array(value.data)
    counters.sample("TransferFromDeviceTime", time.perf_counter_ns() - start)
    if runner.running():
        runner.time_finished_runs(after_wait=True)
    counters.count("TransferFromDevice")
    counters.sample("InboundData", out.nbytes)
    return out
