"""torch_xla.runtime (imported as `xr`): the PJRT runtime's devices and process layout."""
from torch_xla._lazy import runtime as _rt


def device_type() -> str:
    """'CPU', 'CUDA' or 'TPU', as PJRT_DEVICE selects."""
    return _rt.device_type()


def addressable_device_count() -> int:
    return len(_rt.jax_devices())


def global_runtime_device_count() -> int:
    return addressable_device_count()


def world_size() -> int:
    return 1


def global_ordinal() -> int:
    return 0


def local_ordinal() -> int:
    return 0


def using_pjrt() -> bool:
    return True


def initialize_cache(path: str, readonly: bool = False) -> None:
    """Keeps compiled programs in directory `path` across processes: a later run of the same
    program loads it instead of compiling (counted as `PersistentCacheHit`). `readonly`:
    load only, never write. Call before the first computation."""
    from torch_xla._lazy import compile_cache
    compile_cache.initialize(path, readonly)
