"""torch_xla.runtime (imported as `xr`): the PJRT runtime's devices and process layout."""
import os

import torch_xla
from torch_xla._lazy.runtime import device_info as _device_info
from torch_xla._lazy.runtime import pjrt as _pjrt


def device_type():
    """'CPU', 'CUDA' or 'TPU', as PJRT_DEVICE selects ('CPU' if it is unset); None if it is
    unset and PJRT_SELECT_DEFAULT_DEVICE=0."""
    return _pjrt.selected_device_type()


def addressable_device_count() -> int:
    """XLA devices this process drives (under SPMD: 1, the virtual device)."""
    return _pjrt.device_count()


def addressable_runtime_device_count() -> int:
    """Physical devices this process drives (under SPMD too)."""
    return len(_pjrt.jax_devices())


def global_runtime_device_count() -> int:
    """Devices of every process in the runtime (several under xmp.spawn)."""
    return len(_pjrt.global_devices())


def world_size() -> int:
    """Replicas running the program in step: processes under xmp.spawn times the devices each
    drives in DataParallel; 1 otherwise."""
    return _pjrt.world_size()


def global_ordinal() -> int:
    """This replica's index among all replicas (0 .. world_size() - 1)."""
    return _pjrt.global_ordinal()


def local_ordinal() -> int:
    """This replica's index among the replicas on its host."""
    return _pjrt.local_ordinal()


def process_index() -> int:
    return _pjrt.process_index()


def process_count() -> int:
    return _pjrt.process_count()


def using_pjrt() -> bool:
    return True


def initialize_cache(path: str, readonly: bool = False) -> None:
    """Keeps compiled programs in directory `path` across processes: a later run of the same
    program loads it instead of compiling (counted as `PersistentCacheHit`). `readonly`:
    load only, never write. Call before the first computation."""
    from torch_xla._lazy.runtime import runner
    runner.initialize_persistent_cache(path, readonly)


def is_initialized() -> bool:
    """Whether the runtime (jax's PJRT backends) has started in this process."""
    return _device_info.is_initialized()


def set_device_type(pjrt_device: str) -> None:
    """Selects the PJRT device type ('CPU', 'CUDA', 'TPU'); before the runtime starts."""
    started = torch_xla._XLAC._xla_runtime_is_initialized()  # asked where torch_xla asks it
    if started and os.environ.get("PJRT_DEVICE", "CPU").upper() != pjrt_device.upper():
        raise RuntimeError("Can't change device type after XLA runtime is initialized")
    os.environ["PJRT_DEVICE"] = pjrt_device


def _host_count() -> int:
    return int(os.environ.get("TORCH_XLA_NUM_HOSTS", "1"))


def host_index() -> int:
    """This host's index among the hosts of the runtime (TORCH_XLA_HOST_INDEX, under torchrun
    its node rank; 0 alone)."""
    return int(os.environ.get("TORCH_XLA_HOST_INDEX", "0"))


def local_process_count() -> int:
    """Processes of the runtime on this host."""
    return max(process_count() // _host_count(), 1)


def global_device_count() -> int:
    """Devices of every process of the runtime."""
    return len(_pjrt.global_devices())


def local_device_count() -> int:
    """Devices on this host: its processes times the devices each drives."""
    return local_process_count() * addressable_device_count()


def runtime_device_attributes(device: str) -> dict:
    """What PJRT tells of `device` ('CPU:0' or 'xla:0'): name, kind, ids (TPU coords...)."""
    return _device_info.device_attributes(device)


def global_runtime_device_attributes() -> list:
    return _device_info.all_device_attributes()


def is_bf16_supported() -> bool:
    """Whether bfloat16 tensors can be made on the XLA device."""
    import torch
    try:
        torch.tensor([1.0], dtype=torch.bfloat16, device=_device_info.default_device())
        return True
    except Exception:  # noqa: BLE001  (any failure means no)
        return False


def get_master_ip() -> str:
    """The address of the runtime's master: the host of TORCH_XLA_COORDINATOR, which every
    process of a multi-host runtime is given, or torchrun's MASTER_ADDR. Without them there is
    nothing to discover (torch_xla asks the TPU or Neuron metadata service, which this
    runtime does not use)."""
    coordinator = os.environ.get("TORCH_XLA_COORDINATOR")
    if coordinator:
        return coordinator.rpartition(":")[0].strip("[]")
    if os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    raise RuntimeError(f"IP discovery not supported for device: {device_type()} "
                       f"(set TORCH_XLA_COORDINATOR=host:port)")


def use_spmd(auto: bool = False) -> None:
    """SPMD mode: xla:0 stands for every device of the runtime, tensors are global (their
    shards live on the devices, as `torch_xla.distributed.spmd.mark_sharding` lays them out)
    and each step is one program that XLA's partitioner splits over the devices. Tensors
    already on xla:0 keep their data, replicated where a program needs it."""
    if auto:
        raise NotImplementedError("use_spmd(auto=True): XLA's auto-sharding pass is not available "
                                  "through jax; give shardings with mark_sharding")
    _pjrt.use_spmd()
    os.environ["XLA_USE_SPMD"] = "1"  # child processes start in SPMD mode too, as in torch_xla


def is_spmd() -> bool:
    """Whether SPMD is set for execution: the XLA_USE_SPMD flag, as torch_xla reads it
    (`use_spmd` sets it; the runtime's own mode, once on, stays on)."""
    return os.environ.get("XLA_USE_SPMD", "0").lower() in ("1", "true")
