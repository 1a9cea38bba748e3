"""torch_xla.core.xla_model: devices, steps and the optimizer step (imported as `xm`)."""
import os
import tempfile

import jax
import torch

import torch_xla
from torch_xla._lazy import rng, runtime
from torch_xla._lazy import tensor as _tensor


def xla_device(n: int = None, devkind: str = None) -> torch.device:
    """The XLA device `n` of this process (default 0)."""
    if n is not None and not 0 <= n < len(runtime.jax_devices()):
        raise RuntimeError(f"Invalid XLA device index {n}: there are {len(runtime.jax_devices())} device(s)")
    return torch_xla.device(n)


def get_xla_supported_devices(devkind: str = None, max_devices: int = None):
    """Names of the XLA devices of this process: ['xla:0', 'xla:1', ...]."""
    names = [f"xla:{i}" for i in range(len(runtime.jax_devices()))]
    return names[:max_devices] if max_devices else names


def xla_device_hw(device) -> str:
    return runtime.device_type()


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """Ends a step: compiles (or reuses) and runs one program for every pending tensor."""
    torch_xla.sync(wait)


def wait_device_ops(devices=()) -> None:
    """Blocks until everything queued on the devices has run."""
    for v in _tensor.live_values():
        if v.data is not None:
            v.data.block_until_ready()
    jax.effects_barrier()


def optimizer_step(optimizer, barrier: bool = False, optimizer_args=None, groups=None, pin_layout=True):
    """`optimizer.step(**optimizer_args)`; with `barrier=True` the step then ends (mark_step)."""
    result = optimizer.step(**(optimizer_args or {}))
    if barrier:
        mark_step()
    return result


def _index(device):
    if device is None:
        return 0
    return torch.device(device).index or 0


def set_rng_state(seed: int, device=None) -> None:
    rng.manual_seed(seed, _index(device))


def get_rng_state(device=None) -> int:
    return rng.get_state(_index(device))[0]


# ---- saving --------------------------------------------------------------------------------

def _to_cpu_data(data):
    """`data` with every XLA tensor in nested dicts, lists and tuples moved to the CPU (all of
    them materialised by one program)."""
    values = []

    def collect(obj):
        if isinstance(obj, torch.Tensor) and obj.device.type == "xla":
            values.append(_tensor.unwrap(obj)._value)
        elif isinstance(obj, dict):
            for v in obj.values():
                collect(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                collect(v)
    collect(data)
    _tensor.materialize(values)
    memo = {}

    def convert(obj):
        if id(obj) in memo:
            return memo[id(obj)]
        if isinstance(obj, torch.Tensor) and obj.device.type == "xla":
            out = obj.detach().cpu()
        elif isinstance(obj, dict):
            out = type(obj)()
            out.update((k, convert(v)) for k, v in obj.items())
        elif isinstance(obj, list):
            out = [convert(v) for v in obj]
        elif isinstance(obj, tuple):
            items = [convert(v) for v in obj]
            out = type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        else:
            return obj
        memo[id(obj)] = out
        return out
    return convert(data)


def _atomic_save(data, path) -> None:
    """torch.save to a temporary file beside `path`, flushed to disk, then renamed over
    `path`: an interrupted save leaves the previous file whole."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save(data, file_or_path, master_only: bool = True, global_master: bool = False) -> None:
    """Saves `data` (tensors, state dicts, any nested dicts/lists/tuples) with its XLA tensors
    moved to the CPU, so the file loads anywhere as CPU tensors.

    With `master_only` only the master process writes: the process whose local ordinal
    (or with `global_master`, global ordinal) is 0. A path is written atomically (see
    `_atomic_save`); a file object is written as is.
    """
    import torch_xla.runtime as xr
    ordinal = xr.global_ordinal() if global_master else xr.local_ordinal()
    if master_only and ordinal != 0:
        return
    cpu_data = _to_cpu_data(data)
    if isinstance(file_or_path, (str, bytes, os.PathLike)):
        _atomic_save(cpu_data, file_or_path)
    else:
        torch.save(cpu_data, file_or_path)


# ---- the program that would run ----------------------------------------------------------

def get_stablehlo(tensors=None) -> str:
    """The StableHLO (MLIR text) of the program that `mark_step` would compile for `tensors`
    (default: every pending tensor on the first device), lowered by jax exactly as the
    compiler lowers it."""
    from torch_xla._lazy import inspect
    return inspect.program_text(tensors, "stablehlo")
