"""torch_xla.runtime (imported as `xr`): the PJRT runtime's devices and process layout."""
from torch_xla._lazy import runtime as _rt


def device_type() -> str:
    """'CPU', 'CUDA' or 'TPU', as PJRT_DEVICE selects."""
    return _rt.device_type()


def addressable_device_count() -> int:
    """XLA devices this process drives (under SPMD: 1, the virtual device)."""
    return _rt.device_count()


def addressable_runtime_device_count() -> int:
    """Physical devices this process drives (under SPMD too)."""
    return len(_rt.jax_devices())


def global_runtime_device_count() -> int:
    """Devices of every process in the runtime (several under xmp.spawn)."""
    return len(_rt.global_devices())


def world_size() -> int:
    """Replicas running the program in step: processes under xmp.spawn times the devices each
    drives in DataParallel; 1 otherwise."""
    return _rt.world_size()


def global_ordinal() -> int:
    """This replica's index among all replicas (0 .. world_size() - 1)."""
    return _rt.global_ordinal()


def local_ordinal() -> int:
    """This replica's index among the replicas on its host."""
    return _rt.local_ordinal()


def process_index() -> int:
    return _rt.process_index()


def process_count() -> int:
    return _rt.process_count()


def using_pjrt() -> bool:
    return True


def initialize_cache(path: str, readonly: bool = False) -> None:
    """Keeps compiled programs in directory `path` across processes: a later run of the same
    program loads it instead of compiling (counted as `PersistentCacheHit`). `readonly`:
    load only, never write. Call before the first computation."""
    from torch_xla._lazy import compile_cache
    compile_cache.initialize(path, readonly)


def use_spmd(auto: bool = False) -> None:
    """SPMD mode: xla:0 stands for every device of the runtime, tensors are global (their
    shards live on the devices, as `torch_xla.distributed.spmd.mark_sharding` lays them out)
    and each step is one program that XLA's partitioner splits over the devices. Tensors
    already on xla:0 keep their data, replicated where a program needs it."""
    if auto:
        raise NotImplementedError("use_spmd(auto=True): XLA's auto-sharding pass is not available "
                                  "through jax; give shardings with mark_sharding")
    _rt.use_spmd()


def is_spmd() -> bool:
    """Whether SPMD mode is on (`use_spmd`)."""
    return _rt.is_spmd()
