"""ParallelLoader and MpDeviceLoader: batches loaded and moved to the devices ahead of use.

A reading thread iterates the loader, up to `loader_prefetch_size` batches ahead per device;
a transfer thread per device copies them to it, up to `device_prefetch_size` ahead. With
several devices, batches are dealt out in turn and a round that cannot give every device a
batch of the same size along `batchdim` (the last, incomplete one) is dropped, so that every
device takes the same steps (their collectives must pair up). Every `batches_per_execution`
batches, and at the end, a per-device loader ends the step on its device (mark_step and the
step closures). Stopping early is fine: the threads give up when the loader is closed or
dropped.
Under SPMD, `input_sharding` (a ShardingSpec, or a dict of them for dict batches) lays
each batch out over the mesh as it is moved.
"""
import queue
import threading
import weakref

import torch

from torch_xla._lazy.hooks import device as _device
from torch_xla._lazy.step import execution as _execution
from torch_xla._lazy.runtime import graph_analysis
from torch_xla.utils import closures

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


def _batch_sizes(batch, dim):
    """The sizes along `dim` of the tensors in a batch (nested lists, tuples, dicts)."""
    if isinstance(batch, torch.Tensor):
        return [batch.shape[dim]] if batch.dim() > dim else []
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        return [s for b in batch for s in _batch_sizes(b, dim)]
    return []


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
    """What the threads share with the loader: per device, a queue of CPU batches and one of
    device batches, and a stop flag (not the loader itself, so that dropping the loader stops
    the threads)."""

    def __init__(self, n, loader_size, device_size):
        self.cpu = [queue.Queue(maxsize=max(loader_size, 1)) for _ in range(n)]
        self.queues = [queue.Queue(maxsize=max(device_size, 1)) for _ in range(n)]
        self.closed = threading.Event()

    def put(self, q, item) -> bool:
        while not self.closed.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def get(self, q):
        while not self.closed.is_set():
            try:
                return q.get(timeout=0.1)
            except queue.Empty:
                pass
        return _END


def _read(feed, it, n, batchdim):
    """Deals the loader's batches out to the devices' CPU queues, a round at a time."""
    try:
        while not feed.closed.is_set():
            batches = []
            for _ in range(n):
                try:
                    batches.append(next(it))
                except StopIteration:
                    break
            if len(batches) < n:
                break
            if n > 1 and len({tuple(_batch_sizes(b, batchdim)) for b in batches}) != 1:
                break  # the loader's last, smaller batch: the devices would run different steps
            for q, batch in zip(feed.cpu, batches):
                if not feed.put(q, batch):
                    return
    except BaseException as e:  # noqa: BLE001  (re-raised by the consumers)
        for q in feed.cpu:
            feed.put(q, e)
        return
    for q in feed.cpu:
        feed.put(q, _END)


def _transfer(feed, i, device, sharding):
    """Moves device i's batches from its CPU queue to its device queue, in order, laid out
    by `sharding` (`input_sharding`) under SPMD."""
    while True:
        item = feed.get(feed.cpu[i])
        if item is not _END and not isinstance(item, BaseException):
            try:
                item = _to_device_sharded(item, device, sharding)
            except BaseException as e:  # noqa: BLE001
                item = e
        if not feed.put(feed.queues[i], item) or item is _END or isinstance(item, BaseException):
            return


class ParallelLoader:
    """Wraps a loader (any iterable of batches) for `devices`: batch i goes to device
    i % len(devices). See the module docstring for the other arguments.

    `host_to_device_transfer_threads` must be 1: one thread per device keeps the batches in
    order.
    """

    def __init__(self, loader, devices, batchdim=0, batches_per_execution=1,
                 loader_prefetch_size=16, device_prefetch_size=8, host_to_device_transfer_threads=1,
                 input_sharding=None):
        if host_to_device_transfer_threads != 1:
            raise NotImplementedError(
                f"ParallelLoader(host_to_device_transfer_threads={host_to_device_transfer_threads}): "
                "one transfer thread per device (the only setting here) keeps batches in order")
        if int(batches_per_execution) < 1:
            raise ValueError(f"batches_per_execution must be at least 1, got {batches_per_execution}")
        self._loader = loader
        self._devices = [torch.device(d) for d in devices]
        self._batches_per_execution = int(batches_per_execution)
        self._feed = _Feed(len(self._devices), loader_prefetch_size, device_prefetch_size)
        # iter() here, not in the thread: a DataLoader draws its seed from torch's generator
        # then, and doing that in step with the caller keeps runs reproducible.
        threads = [threading.Thread(target=_read, daemon=True,
                                    args=(self._feed, iter(loader), len(self._devices), batchdim))]
        threads += [threading.Thread(target=_transfer, args=(self._feed, i, d, input_sharding),
                                     daemon=True)
                    for i, d in enumerate(self._devices)]
        for t in threads:
            t.start()
        weakref.finalize(self, self._feed.closed.set)

    @property
    def batches_per_execution(self) -> int:
        return self._batches_per_execution

    def per_device_loader(self, device):
        device = torch.device(device)
        return PerDeviceLoader(self, self._devices.index(device))

    def per_device_samples(self) -> int:
        return len(self._loader) // len(self._devices)

    def close(self) -> None:
        self._feed.closed.set()


def _end_step(device) -> None:
    """mark_step on `device`, then its step closures. The checks of the step before are
    read where finished, not waited for (the failed and the unread raise at the next sync):
    the next step's tracing overlaps its program, as in torch_xla."""
    with graph_analysis.reason("torch_xla.sync in parallel loader at step end"):
        _execution.mark_step(device.index or 0, raise_earlier=False)
    closures.run_step_closures(device)


class PerDeviceLoader:
    def __init__(self, parallel_loader, index):
        self._parallel = parallel_loader
        self._index = index
        self._device = parallel_loader._devices[index]
        self._since_step = 0
        self._done = False

    def __iter__(self):
        return self

    def __len__(self):
        return self._parallel.per_device_samples()

    def __next__(self):
        ended = self._since_step >= self._parallel.batches_per_execution - 1
        if ended:
            self._since_step = 0
            _end_step(self._device)
        else:
            self._since_step += 1
        if self._done:
            raise StopIteration
        item = self._parallel._feed.get(self._parallel._feed.queues[self._index])
        if item is _END:
            self._done = True
            if not ended:
                _end_step(self._device)
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            raise item
        return item

    next = __next__


class MpDeviceLoader:
    """Each iteration builds a one-device ParallelLoader over `loader` for `device`, with
    `kwargs` (ParallelLoader's arguments, kept as `_parallel_loader_kwargs`)."""

    def __init__(self, loader, device, **kwargs):
        self._loader = loader
        self._device = device
        self._parallel_loader_kwargs = kwargs
        self._parallel_loader = None
        if hasattr(loader, "dataset"):  # read as a DataLoader's by clients (accelerate's save_state)
            self.dataset = loader.dataset

    def __iter__(self):
        if self._parallel_loader is not None:
            self._parallel_loader.close()
        self._parallel_loader = ParallelLoader(self._loader, [self._device], **self._parallel_loader_kwargs)
        return self._parallel_loader.per_device_loader(self._device)

    def __len__(self):
        return len(self._loader)
