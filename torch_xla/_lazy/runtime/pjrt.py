"""Devices and buffers: the bridge between XLA device indices and jax's PJRT devices.

Configuration is read once, before jax's backends start: `PJRT_DEVICE` picks the platform
(CPU by default; CUDA/GPU and TPU where jax's plugin for them is installed: else starting the
runtime says which to install), `CPU_NUM_DEVICES` the number of XLA CPU devices and
`GPU_NUM_DEVICES` how many of the local GPUs a process drives (xmp.spawn: how many processes). 64-bit types are enabled so that int64 and float64 tensors keep their
dtype on the device.
"""
import functools
import os
import threading

import jax
import numpy as np
import torch

from torch_xla._lazy.runtime import hosts

jax.config.update("jax_enable_x64", True)

_PLATFORMS = {"CPU": "cpu", "CUDA": "cuda", "GPU": "cuda", "TPU": "tpu"}


def selected_device_type():
    """The PJRT device type PJRT_DEVICE selects, in torch_xla's spelling ('CPU', 'CUDA',
    'TPU'); 'CPU' where it is unset (torch_xla's default where it finds no TPU), None where it
    is unset and PJRT_SELECT_DEFAULT_DEVICE=0 turns the default off."""
    kind = os.environ.get("PJRT_DEVICE")
    if kind is None:
        if os.environ.get("PJRT_SELECT_DEFAULT_DEVICE", "1") == "0":
            return None
        kind = "CPU"
    kind = kind.upper()
    if kind not in _PLATFORMS:
        raise RuntimeError(f"No PjRtPlugin registered for: {kind}. Make sure the environment "
                           f"variable PJRT_DEVICE is set to a correct device name (one of "
                           f"{sorted(_PLATFORMS)})")
    return "CUDA" if kind == "GPU" else kind


def device_type() -> str:
    """The PJRT device type the runtime runs on (`selected_device_type`, which must be set)."""
    kind = selected_device_type()
    if kind is None:
        raise RuntimeError("No PJRT device is selected: PJRT_DEVICE is unset and "
                           "PJRT_SELECT_DEFAULT_DEVICE=0 turns off choosing a default. Set "
                           f"PJRT_DEVICE to one of {sorted(_PLATFORMS)}")
    return kind


@functools.lru_cache(maxsize=None)
def jax_devices():
    """The jax devices this process drives, in XLA device index order."""
    platform = _PLATFORMS[device_type()]
    wanted = _configure_cpu_devices() if platform == "cpu" else None
    _join_processes(platform)
    try:
        devices = tuple(jax.local_devices(backend=platform))
    except RuntimeError as e:
        if platform == "cpu":
            raise
        raise RuntimeError(_backend_missing(platform, e)) from None
    if platform == "cuda" and os.environ.get("GPU_NUM_DEVICES"):
        devices = devices[:int(os.environ["GPU_NUM_DEVICES"])]
    if wanted is not None and len(devices) != wanted:
        raise RuntimeError(
            f"CPU_NUM_DEVICES={wanted} cannot take effect: jax's CPU backend was already started "
            f"with {len(devices)} device(s) before torch_xla configured it. Set CPU_NUM_DEVICES "
            "before anything starts jax, or leave it unset to use the devices jax has.")
    _announce_device_count(len(devices))
    return devices


def _backend_missing(platform, error) -> str:
    """Why PJRT_DEVICE's backend did not start, and how to get it: jax's plugin for it."""
    version = jax.__version__
    plugin = (f"jax's CUDA plugin at jax's release: pip install 'jax[cuda12]=={version}' (CUDA 12) "
              f"or 'jax[cuda13]=={version}' (CUDA 13), and a GPU with its driver visible "
              "(nvidia-smi lists it)" if platform == "cuda" else
              f"jax's TPU support: pip install 'jax[tpu]=={version}', on a TPU host")
    return (f"PJRT_DEVICE={os.environ.get('PJRT_DEVICE')} selects jax's {platform} backend, which "
            f"jax {version} could not start here ({error}). It needs {plugin}.")


def _configure_cpu_devices():
    """Gives jax's CPU backend CPU_NUM_DEVICES devices, if it has not started yet; returns the
    count asked for, or None where the variable is unset (the default: 1, unless jax was
    started with more by the user)."""
    n = os.environ.get("CPU_NUM_DEVICES")
    try:
        jax.config.update("jax_num_cpu_devices", int(n or 1))
    except RuntimeError:  # backends already started: checked against what they have
        pass
    return None if n is None else int(n)


def _announce_device_count(n) -> None:
    """Tells the device guard how many devices there are. PyTorch's autograd engine asks once,
    at the first backward anywhere (maybe a CPU one before any XLA device is used), so at
    import a bound is given: CPU_NUM_DEVICES on the CPU, 8 elsewhere."""
    current = int(os.environ.get("TORCH_XLA_DEVICE_COUNT", "0"))
    os.environ["TORCH_XLA_DEVICE_COUNT"] = str(max(current, n))


_announce_device_count(int(os.environ.get("CPU_NUM_DEVICES", "1"))
                       if os.environ.get("PJRT_DEVICE", "CPU").upper() == "CPU" else 8)
if os.environ.get("PJRT_DEVICE", "CPU").upper() == "CPU":
    _configure_cpu_devices()  # now, before any other use of jax can start its backend


# ---- processes and replicas ----------------------------------------------------------------
#
# Several processes form one runtime through jax.distributed (its coordination service and,
# on the CPU, gloo collectives): `_lazy/runtime/hosts`. xmp.spawn sets these variables in each
# process it starts; a launcher of its own (one process per host, say) may set them too, and
# under torchrun they are read from torchrun's (at import):
#   TORCH_XLA_COORDINATOR      host:port of process 0's coordination service, which listens
#                              there only (xmp.spawn: a loopback port) unless
#   TORCH_XLA_COORDINATOR_BIND host:port (e.g. [::]:port: every interface) says where
#   TORCH_XLA_NUM_PROCESSES    how many processes in all
#   TORCH_XLA_PROCESS_ID       this process's index among them
#   TORCH_XLA_LOCAL_PROCESS_ID this process's index on its host (local ordinal)
#   TORCH_XLA_NUM_HOSTS        how many hosts, TORCH_XLA_HOST_INDEX this one's index
#   TORCH_XLA_LOCAL_DEVICE     (GPU) the one local device this process drives
hosts.adopt_torchrun_layout()


def _join_processes(platform) -> None:
    count = int(os.environ.get("TORCH_XLA_NUM_PROCESSES", "1"))
    if count <= 1 or jax.distributed.is_initialized():
        return
    hosts.join(platform)


def process_count() -> int:
    jax_devices()  # the processes join when the runtime starts
    return jax.process_count() if jax.distributed.is_initialized() else 1


@functools.lru_cache(maxsize=None)
def _several_processes() -> bool:
    """process_count() > 1, asked once a buffer exists (so the runtime has started): a host
    read asks it, and a buffer's own `is_fully_addressable` costs far more."""
    return process_count() > 1


def process_index() -> int:
    jax_devices()
    return jax.process_index() if jax.distributed.is_initialized() else 0


def local_process_index() -> int:
    return int(os.environ.get("TORCH_XLA_LOCAL_PROCESS_ID", process_index()))


def global_devices():
    """Every device of the runtime, ordered by process, then as each process numbers them."""
    jax_devices()
    platform = _PLATFORMS[device_type()]
    return tuple(sorted(jax.devices(platform), key=lambda d: (d.process_index, d.id)))


# Replicas: the local devices that run the same program in step (one per process under
# xmp.spawn: the process's replicas), and each thread's own device. A DataParallel run's
# threads replicate over that run's devices, their own replicas, so that two runs in one
# process keep apart. A program with collectives runs over a 1-D mesh of every replica's
# device, on this axis.
REPLICA_AXIS = "replicas"
_replicas = [(0,)]
_thread = threading.local()


def replicas():
    """Local indices of the devices replicating with this thread: its DataParallel run's
    devices, else this process's replicas."""
    return getattr(_thread, "replicas", None) or _replicas[0]


def set_replicas(indices) -> None:
    """This process's replicas (threads of a DataParallel run keep their own)."""
    _replicas[0] = tuple(indices)


def set_thread_replicas(indices) -> None:
    """The replicas of this thread's DataParallel run (None: the process's)."""
    _thread.replicas = None if indices is None else tuple(indices)


def thread_device():
    """The device index this thread drives (DataParallel), or None."""
    return getattr(_thread, "device", None)


def set_thread_device(index) -> None:
    _thread.device = index


def world_size() -> int:
    return 1 if _spmd[0] else process_count() * len(replicas())


def local_position() -> int:
    """This thread's position among the local replicas."""
    device = thread_device()
    return replicas().index(0 if device is None else device)


def global_ordinal() -> int:
    return process_index() * len(replicas()) + local_position()


def local_ordinal() -> int:
    return local_process_index() * len(replicas()) + local_position()


def replica_mesh_devices():
    """The devices of all replicas, in global ordinal order (every process replicating the
    same local indices)."""
    by_process = {}
    for d in global_devices():
        by_process.setdefault(d.process_index, []).append(d)
    return [devs[i] for _, devs in sorted(by_process.items()) for i in replicas()]


# SPMD (`_lazy/graph/spmd_layout`): xla:0 stands for every device of the runtime, and one program spans
# them all, partitioned by XLA: no replicas (world size 1).
# XLA_USE_SPMD=1 in the environment turns SPMD on from the start (torch_xla's older switch).
_spmd = [os.environ.get("XLA_USE_SPMD", "0").lower() in ("1", "true")]


def use_spmd() -> None:
    _spmd[0] = True


def is_spmd() -> bool:
    return _spmd[0]


def device_count() -> int:
    """XLA devices this process shows users: its devices, or under SPMD the one virtual
    device."""
    return 1 if _spmd[0] else len(jax_devices())


def jax_device(index: int):
    devices = jax_devices()
    if index is None:
        index = 0
    if _spmd[0] and index != 0:
        raise RuntimeError(f"under SPMD xla:0 stands for every device: there is no xla:{index}")
    if not 0 <= index < len(devices):
        raise RuntimeError(f"Invalid XLA device index {index}: there are {len(devices)} device(s)")
    return devices[index]


# ---- dtypes -------------------------------------------------------------------------------

_TORCH_TO_NP = {
    torch.float32: np.dtype("float32"), torch.float64: np.dtype("float64"),
    torch.float16: np.dtype("float16"), torch.bfloat16: np.dtype(jax.numpy.bfloat16),
    torch.int8: np.dtype("int8"), torch.int16: np.dtype("int16"), torch.int32: np.dtype("int32"),
    torch.int64: np.dtype("int64"), torch.uint8: np.dtype("uint8"), torch.uint16: np.dtype("uint16"),
    torch.uint32: np.dtype("uint32"), torch.uint64: np.dtype("uint64"), torch.bool: np.dtype("bool"),
    torch.complex64: np.dtype("complex64"), torch.complex128: np.dtype("complex128"),
    torch.float8_e4m3fn: np.dtype(jax.numpy.float8_e4m3fn),
    torch.float8_e5m2: np.dtype(jax.numpy.float8_e5m2),
    torch.float8_e4m3fnuz: np.dtype(jax.numpy.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: np.dtype(jax.numpy.float8_e5m2fnuz),
}
_NP_TO_TORCH = {v: k for k, v in _TORCH_TO_NP.items()}
# Types torch has but cannot hand to numpy: moved as raw bits of an integer type this size.
_BITCAST = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8,
            torch.float8_e5m2: torch.uint8, torch.float8_e4m3fnuz: torch.uint8,
            torch.float8_e5m2fnuz: torch.uint8}


def to_jax_dtype(dtype: torch.dtype):
    try:
        return _TORCH_TO_NP[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} is not supported on XLA devices") from None


def to_torch_dtype(dtype) -> torch.dtype:
    return _NP_TO_TORCH[np.dtype(dtype)]


def unsupported_layout(layout) -> NotImplementedError:
    """The error for a tensor of a layout XLA devices do not have (every XLA tensor is dense)."""
    kind = "sparse tensors" if "sparse" in str(layout) else "tensors"
    return NotImplementedError(f"{kind} of layout {layout} are not supported on XLA devices "
                               "(XLA tensors are dense, torch.strided)")


def to_device_buffer(t: torch.Tensor, index: int):
    """Copies a CPU tensor into a jax array on XLA device `index`."""
    return jax.device_put(host_copy(t), jax_device(index))


def host_copy(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor's data as a new numpy array of its jax dtype, refused by name where a
    device cannot hold it. A copy: on the CPU backend jax shares a numpy array's memory
    (even with may_alias=False in jax 0.10), and a later in-place change of the CPU tensor
    would show on the device."""
    if t.layout != torch.strided:
        raise unsupported_layout(t.layout)
    to_jax_dtype(t.dtype)  # a dtype the device cannot hold is refused by name
    if t.dim() > 64:
        raise RuntimeError(f"tensors of more than 64 dimensions are not supported on XLA "
                           f"devices (this one has {t.dim()})")
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if t.dtype in _BITCAST:
        array = t.view(_BITCAST[t.dtype]).numpy().view(to_jax_dtype(t.dtype))
    else:
        array = t.numpy()
    return array.copy()


def to_host_array(buffer) -> np.ndarray:
    """Copies a jax array into a new numpy array. An array spanning processes (SPMD over
    several hosts) is read from a local replica, or gathered from every process (each must
    read it too, as they do running the same script)."""
    if _several_processes() and not buffer.is_fully_addressable:
        if buffer.is_fully_replicated:
            buffer = buffer.addressable_shards[0].data
        else:
            from jax.experimental import multihost_utils
            buffer = multihost_utils.process_allgather(buffer, tiled=True)
    return np.array(buffer)  # a writable copy: torch.from_numpy must own it


def host_tensor(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of `dtype` sharing a numpy array read from the device (`to_host_array`)."""
    if dtype in _BITCAST:
        bits = _BITCAST[dtype]
        return torch.from_numpy(array.view(to_jax_dtype(bits))).view(dtype)
    return torch.from_numpy(array)


def to_cpu_tensor(buffer, dtype: torch.dtype) -> torch.Tensor:
    """Copies a jax array into a new CPU tensor of `dtype` (`to_host_array`)."""
    return host_tensor(to_host_array(buffer), dtype)
