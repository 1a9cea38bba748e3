"""DataParallel: one replica of a model per device of this process, one thread each.

Every thread runs the user's loop on its replica with its share of the batches; the threads
are the replicas of the collectives (xm.optimizer_step averages their gradients), and each
one's steps cover its own device. A run's replicas and the place where its threads meet
are its own: runs of several DataParallel instances, one after another or at once from
threads of their own on other devices, keep apart.
"""
import copy
import inspect

import torch

from torch_xla._lazy.runtime import pjrt
from torch_xla._lazy.launch import replica_threads as threads
from . import parallel_loader as pl

_FIX = ("pass a module instance or a zero-argument callable that builds one, "
        "e.g. lambda: torch.nn.Linear(10, 2)")


class Context:
    """Per-device state a loop function keeps across calls (`getattr_or`)."""

    def __init__(self, device):
        self.device = device

    def getattr_or(self, name, defval):
        value = getattr(self, name, None)
        if value is None:
            value = defval() if callable(defval) else defval
            setattr(self, name, value)
        return value


def _build(network):
    if isinstance(network, torch.nn.Module):
        return network
    if not callable(network):
        raise TypeError(f"DataParallel: network must be a torch.nn.Module or a callable; {_FIX}")
    if inspect.isclass(network):
        try:
            inspect.signature(network).bind()
        except TypeError as e:
            raise TypeError(f"DataParallel got the class {network.__module__}.{network.__qualname__}, "
                            f"which cannot be built without arguments ({e}); {_FIX}") from None
        except ValueError:  # no signature to inspect: let the call below tell
            pass
    module = network()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"DataParallel: network() returned {type(module).__name__}, not a "
                        f"torch.nn.Module; {_FIX}")
    return module


class DataParallel:
    def __init__(self, network, device_ids=None):
        if device_ids is None:
            device_ids = [f"xla:{i}" for i in range(len(pjrt.jax_devices()))]
        module = _build(network)
        self._devices = [torch.device(d) for d in device_ids]
        self._models = [copy.deepcopy(module).to(d) for d in self._devices]
        self._contexts = [Context(d) for d in self._devices]

    @property
    def models(self):
        return self._models

    def __call__(self, loop_fn, loader, fixed_batch_size=False, batchdim=0):
        """Runs `loop_fn(model, device_loader, device, context)` on every device, in one thread
        each; returns their results in device order."""
        para_loader = pl.ParallelLoader(loader, self._devices, batchdim=batchdim)
        try:
            return threads.run_threads(
                [d.index or 0 for d in self._devices],
                lambda k: loop_fn(self._models[k], para_loader.per_device_loader(self._devices[k]),
                                  self._devices[k], self._contexts[k]))
        finally:
            para_loader.close()
