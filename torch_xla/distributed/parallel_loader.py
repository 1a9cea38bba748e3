"""ParallelLoader and MpDeviceLoader: batches loaded and moved to the devices ahead of use.

A background thread iterates the loader and copies each batch to its device, a few batches
ahead (`device_prefetch_size`). With several devices, batches are dealt out in turn and the
last incomplete round is dropped, so that every device takes the same number of steps (their
collectives must pair up). Each iteration of a per-device loader first ends the previous step
(mark_step on that device). Stopping early is fine: the thread gives up when the loader is
closed or dropped. Under SPMD, `input_sharding` (a ShardingSpec, or a dict of them for dict
batches) lays each batch out over the mesh as it is moved.
"""
import queue
import threading
import weakref

import torch

from torch_xla._lazy import device as _device
from torch_xla._lazy import execution as _execution

_END = object()


def _to_device(obj, device, sharding=None):
    """`obj`'s tensors on `device`; under SPMD each laid out by `sharding` (a ShardingSpec,
    applied to the tensors whose rank it fits) as it arrives."""
    if isinstance(obj, torch.Tensor):
        if sharding is None:
            return _device.transfer(obj, device)
        return _device.transfer(obj, device, sharding.xla_spec(obj), sharding.minibatch)
    if isinstance(obj, (list, tuple)):
        items = [_to_device(o, device, sharding) for o in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v, device, sharding)) for k, v in obj.items())
    return obj


def _to_device_sharded(batch, device, sharding):
    """A batch on `device` with `input_sharding`: one ShardingSpec for every tensor, or a dict
    of them for a dict batch, one for each key."""
    if not isinstance(sharding, dict):
        return _to_device(batch, device, sharding)
    if not isinstance(batch, dict):
        raise ValueError("input batch should be a dict when input sharding is a dict.")
    missing = [k for k in batch if k not in sharding]
    if missing:
        raise KeyError(f"Keys: {missing} are missing from input_sharding.")
    return type(batch)((k, _to_device(v, device, sharding[k])) for k, v in batch.items())


class _Feed:
    """What the loading thread shares with the loader: one queue per device and a stop flag
    (not the loader itself, so that dropping the loader stops the thread)."""

    def __init__(self, n, size):
        self.queues = [queue.Queue(maxsize=max(size, 1)) for _ in range(n)]
        self.closed = threading.Event()

    def put(self, i, item) -> bool:
        while not self.closed.is_set():
            try:
                self.queues[i].put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False


def _load(feed, it, devices, sharding):
    try:
        while not feed.closed.is_set():
            batches = []
            for _ in devices:
                try:
                    batches.append(next(it))
                except StopIteration:
                    batches = None
                    break
            if batches is None:
                break
            for i, (batch, device) in enumerate(zip(batches, devices)):
                if not feed.put(i, _to_device_sharded(batch, device, sharding)):
                    return
    except BaseException as e:  # noqa: BLE001  (re-raised by the consumers)
        for i in range(len(devices)):
            feed.put(i, e)
        return
    for i in range(len(devices)):
        feed.put(i, _END)


class ParallelLoader:
    def __init__(self, loader, devices, batchdim=0, batches_per_execution=1,
                 loader_prefetch_size=16, device_prefetch_size=8, host_to_device_transfer_threads=1,
                 input_sharding=None):
        self._loader = loader
        self._devices = [torch.device(d) for d in devices]
        self._feed = _Feed(len(self._devices), device_prefetch_size)
        # iter() here, not in the thread: a DataLoader draws its seed from torch's generator
        # then, and doing that in step with the caller keeps runs reproducible.
        self._thread = threading.Thread(
            target=_load, args=(self._feed, iter(loader), self._devices, input_sharding), daemon=True)
        self._thread.start()
        weakref.finalize(self, self._feed.closed.set)

    def per_device_loader(self, device):
        device = torch.device(device)
        return PerDeviceLoader(self, self._devices.index(device))

    def per_device_samples(self) -> int:
        return len(self._loader) // len(self._devices)

    def close(self) -> None:
        self._feed.closed.set()


class PerDeviceLoader:
    def __init__(self, parallel_loader, index):
        self._parallel = parallel_loader
        self._index = index
        self._device = parallel_loader._devices[index]
        self._done = False

    def __iter__(self):
        return self

    def __len__(self):
        return self._parallel.per_device_samples()

    def __next__(self):
        _execution.mark_step(self._device.index or 0)
        if self._done:
            raise StopIteration
        item = self._parallel._feed.queues[self._index].get()
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    next = __next__


class MpDeviceLoader:
    """Each iteration builds a one-device ParallelLoader over `loader` for `device`."""

    def __init__(self, loader, device, **kwargs):
        self._loader = loader
        self._device = device
        self._kwargs = kwargs

    def __iter__(self):
        return ParallelLoader(self._loader, [self._device], **self._kwargs).per_device_loader(self._device)

    def __len__(self):
        return len(self._loader)
