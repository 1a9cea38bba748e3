"""torch_xla._internal.pjrt: a function run on every device of the runtime with its results
gathered (`run_multiprocess`), `spawn` as xmp.spawn runs it, and `spawn_threads`.

Here `run_multiprocess` and `spawn` drive each device by a process of its own, xmp.spawn's
(torch_xla runs one thread per device in one process on a CPU): in each, the device is
`xla:0`, and the results are keyed by the process's global ordinal. `spawn_threads` runs
one thread per device of this process, each thread's device its own `xla:N`.
"""
import os
import pickle
import tempfile

import torch_xla
import torch_xla.runtime as xr
from torch_xla._lazy.runtime import pjrt as _pjrt
from torch_xla._lazy.launch import replica_threads as _threads
from torch_xla.distributed import xla_multiprocessing as xmp


class _Gathered:
    """Picklable: runs `fn(*args, **kwargs)` in a process and writes its result to `folder`,
    under the process's global ordinal (or, if it raised, the exception, under its local
    index, for the caller to raise again)."""

    def __init__(self, fn, args, kwargs, folder):
        self.fn, self.args, self.kwargs, self.folder = fn, args, kwargs, folder

    def __call__(self, index):
        try:
            result = self.fn(*self.args, **self.kwargs)
        except Exception as e:  # written whole before the process reports its failure
            path = os.path.join(self.folder, f"{index}.error")
            with open(path + ".part", "wb") as f:
                pickle.dump(e, f)
            os.rename(path + ".part", path)
            raise
        with open(os.path.join(self.folder, str(xr.global_ordinal())), "wb") as f:
            pickle.dump(result, f)


def run_multiprocess(fn, *args, start_method: str = "spawn", **kwargs) -> dict:
    """Runs `fn(*args, **kwargs)` on every device, each in a new process: {global ordinal:
    its result}. The runtime must not have started in this process. An exception `fn`
    raised in a process is raised here (that of the first process to fail)."""
    if torch_xla._XLAC._xla_runtime_is_initialized():
        raise RuntimeError("Runtime is already initialized. Do not use the XLA device before "
                           "calling xmp.spawn.")
    with tempfile.TemporaryDirectory() as folder:
        try:
            xmp.run_processes(_Gathered(fn, args, kwargs, folder), (), xmp._device_count(),
                              start_method=start_method)
        except xmp.ProcessExitedException as failure:
            raised = os.path.join(folder, f"{failure.error_index}.error")
            if not os.path.exists(raised):  # it died without raising (a signal, an exit)
                raise
            with open(raised, "rb") as f:
                raise pickle.load(f) from failure
        results = {}
        for name in os.listdir(folder):
            with open(os.path.join(folder, name), "rb") as f:
                results[int(name)] = pickle.load(f)
    return dict(sorted(results.items()))


class _WithOrdinal:
    """Picklable: `fn(global ordinal, *args)`."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __call__(self):
        self.fn(xr.global_ordinal(), *self.args)


def spawn(fn, nprocs: int = None, start_method: str = "spawn", args=()) -> None:
    """`fn(global ordinal, *args)` on every device (`nprocs=None`), or once in this process
    (`nprocs=1`); other counts are refused, as torch_xla refuses them."""
    if nprocs == 1:
        fn(0, *args)
        return
    if nprocs is not None:
        raise ValueError(f"Unsupported nprocs ({nprocs}). Please use nprocs=1 or None (default). "
                         "If None, spawn will use all available devices. Use the environment "
                         "variable X_NUM_DEVICES (where X is CPU, TPU, NEURONCORE, etc) to limit "
                         "the number of devices used.")
    run_multiprocess(_WithOrdinal(fn, args), start_method=start_method)


def spawn_threads(fn, args=()) -> None:
    """`fn(ordinal, *args)` in this process, on a thread per device of it (`xla:N`, the
    thread's own device: ordinal N), the threads the replicas of their collectives."""
    indices = list(range(len(_pjrt.jax_devices())))
    _threads.run_threads(indices, lambda k: fn(xr.global_ordinal(), *args), who="spawn_threads")
