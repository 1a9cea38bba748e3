"""torch_xla.core.xla_model: devices, steps and the optimizer step (imported as `xm`)."""
import os
import tempfile

import torch

import torch_xla
from torch_xla._lazy import execution, rng, runtime
from torch_xla._lazy import collectives as _coll
from torch_xla._lazy import tensor as _tensor


def xla_device(n: int = None, devkind: str = None) -> torch.device:
    """The XLA device `n` of this process (default: this DataParallel thread's, or 0)."""
    runtime.jax_devices()  # starts the runtime as configured, or says why not
    count = runtime.device_count()
    if n is None:
        n = runtime.thread_device()
    if n is not None and not 0 <= n < count:
        raise RuntimeError(f"Invalid XLA device index {n}: there are {count} device(s)")
    return torch_xla.device(n)


def get_xla_supported_devices(devkind: str = None, max_devices: int = None):
    """Names of the XLA devices of this process: ['xla:0', 'xla:1', ...]."""
    names = [f"xla:{i}" for i in range(runtime.device_count())]
    return names[:max_devices] if max_devices else names


def xla_device_hw(device) -> str:
    return runtime.device_type()


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """Ends a step: compiles (or reuses) and runs one program for every pending tensor."""
    torch_xla.sync(wait)


def wait_device_ops(devices=()) -> None:
    """Blocks until everything queued on the devices has run."""
    execution.wait_device_ops()


def optimizer_step(optimizer, barrier: bool = False, optimizer_args=None, groups=None, pin_layout=True):
    """Averages the gradients over all replicas (when there are several), then returns
    `optimizer.step(**optimizer_args)`; with `barrier=True` the step then ends (mark_step)."""
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    result = optimizer.step(**(optimizer_args or {}))
    if barrier:
        mark_step()
    return result


# ---- replicas and collectives ------------------------------------------------------------
#
# A replica is one copy of the training program: a process under xmp.spawn, a thread per
# device in DataParallel. Collectives are graph nodes run by all replicas in one program
# (torch_xla/_lazy/collectives.py, run by torch_xla/_lazy/replicated.py); groups are lists of replica ordinals.

REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX = (
    "sum", "mul", "and", "or", "min", "max")


def xrt_world_size(defval: int = 1) -> int:
    return runtime.world_size()


def get_ordinal(defval: int = 0) -> int:
    return runtime.global_ordinal()


def get_local_ordinal(defval: int = 0) -> int:
    return runtime.local_ordinal()


def is_master_ordinal(local: bool = True) -> bool:
    return (get_local_ordinal() if local else get_ordinal()) == 0


def reduce_gradients(optimizer, groups=None, pin_layout=True) -> None:
    """Averages every parameter's gradient over all replicas, in one all_reduce (scaled by
    1/world_size, as torch_xla does, groups or not)."""
    count = runtime.world_size()
    if count > 1:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        if grads:
            all_reduce(REDUCE_SUM, grads, scale=1.0 / count, groups=groups, pin_layout=pin_layout)


def _check_reduce_type(reduce_type):
    if reduce_type not in _coll.REDUCE_TYPES:
        raise ValueError(f"Invalid reduce type '{reduce_type}'; expected one of {_coll.REDUCE_TYPES}")


def all_reduce(reduce_type, inputs, scale=1.0, groups=None, pin_layout=True):
    """Reduces `inputs` (a tensor, or a list reduced in place and returned) over the replicas
    of each group, times `scale`."""
    _check_reduce_type(reduce_type)
    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs] if single else list(inputs)
    if not tensors:
        return inputs
    groups = _coll.normalize_groups(groups, runtime.world_size())
    outs = _coll.apply(_coll.ALL_REDUCE, tensors, [_coll.aval(t) for t in tensors],
                       reduce_type=reduce_type, scale=float(scale), groups=groups,
                       world=runtime.world_size())
    if single:
        return outs[0]
    with torch.no_grad():
        for t, out in zip(tensors, outs):
            t.copy_(out)
    return inputs


def _group_size(groups, world):
    return len(groups[0]) if groups else world


def _into(output, result):
    if output is None:
        return result
    with torch.no_grad():
        output.copy_(result)
    return output


def all_gather(value, dim=0, groups=None, output=None, pin_layout=True):
    """The `value`s of the replicas of this replica's group, concatenated along `dim`."""
    world = runtime.world_size()
    groups = _coll.normalize_groups(groups, world, equal_sizes=True)
    dim = dim % max(value.dim(), 1)
    shape = list(value.shape)
    shape[dim] *= _group_size(groups, world)
    out = _coll.apply(_coll.ALL_GATHER, [value], [_coll.aval(value, shape)], dim=dim, groups=groups,
                      world=world)[0]
    return _into(output, out)


def reduce_scatter(reduce_type, input, scale, scatter_dim, shard_count, groups=None, output=None,
                   pin_layout=True):
    """Reduces `input` over the group, and keeps this replica's shard of `scatter_dim` (a list
    of inputs gives a list of results)."""
    _check_reduce_type(reduce_type)
    if isinstance(input, (list, tuple)):
        outputs = output if output is not None else [None] * len(input)
        return [reduce_scatter(reduce_type, t, scale, scatter_dim, shard_count, groups, o)
                for t, o in zip(input, outputs)]
    world = runtime.world_size()
    groups = _coll.normalize_groups(groups, world, equal_sizes=True)
    dim = scatter_dim % input.dim()
    if shard_count != _group_size(groups, world) or input.shape[dim] % shard_count:
        raise ValueError(f"reduce_scatter: shard_count {shard_count} must be the group size "
                         f"({_group_size(groups, world)}) and divide dimension {dim} of {list(input.shape)}")
    shape = list(input.shape)
    shape[dim] //= shard_count
    out = _coll.apply(_coll.REDUCE_SCATTER, [input], [_coll.aval(input, shape)], reduce_type=reduce_type,
                      scale=float(scale), dim=dim, shard_count=shard_count, groups=groups, world=world)[0]
    return _into(output, out)


def all_to_all(value, split_dimension, concat_dimension, split_count, groups=None, pin_layout=True):
    """Splits `value` in `split_count` chunks along `split_dimension`, sends chunk i to the
    group's i-th replica, and concatenates what arrives along `concat_dimension`."""
    world = runtime.world_size()
    groups = _coll.normalize_groups(groups, world, equal_sizes=True)
    split, concat = split_dimension % value.dim(), concat_dimension % value.dim()
    if split_count != _group_size(groups, world) or value.shape[split] % split_count:
        raise ValueError(f"all_to_all: split_count {split_count} must be the group size "
                         f"({_group_size(groups, world)}) and divide dimension {split} of {list(value.shape)}")
    shape = list(value.shape)
    shape[split] //= split_count
    shape[concat] *= split_count
    return _coll.apply(_coll.ALL_TO_ALL, [value], [_coll.aval(value, shape)], split_dim=split,
                       concat_dim=concat, split_count=split_count, groups=groups, world=world)[0]


def collective_permute(value, pairs):
    """Each (source, target) pair sends source's `value` to target; replicas that receive
    nothing get zeros."""
    pairs = tuple((int(s), int(t)) for s, t in pairs)
    return _coll.apply(_coll.COLLECTIVE_PERMUTE, [value], [_coll.aval(value)], pairs=pairs)[0]


def rendezvous(tag: str, payload: bytes = b"", replicas=()):
    """Waits for every replica to reach `rendezvous(tag)`; returns the `payload` of each, in
    ordinal order (exchanged through an all_gather on the device)."""
    world = runtime.world_size()
    if world == 1:
        return [bytes(payload)]
    device = xla_device()
    data = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else torch.zeros(0, dtype=torch.uint8)
    sizes = all_gather(torch.tensor([data.numel()]).to(device)).cpu().tolist()
    padded = 1 << max(max(sizes), 1).bit_length()  # a few distinct sizes: a few programs
    block = torch.zeros(padded, dtype=torch.uint8)
    block[:data.numel()] = data
    gathered = all_gather(block.to(device)).cpu().view(world, padded)
    return [bytes(gathered[i, :n].numpy().tobytes()) for i, n in enumerate(sizes)]


def mesh_reduce(tag: str, data, reduce_fn):
    """`reduce_fn` of the list of every replica's `data` (any picklable value)."""
    import pickle
    payloads = rendezvous(tag, pickle.dumps(data))
    return reduce_fn([pickle.loads(p) for p in payloads])


def _index(device):
    if device is None:
        return 0
    return torch.device(device).index or 0


def set_rng_state(seed: int, device=None) -> None:
    rng.manual_seed(seed, _index(device))


def get_rng_state(device=None) -> int:
    return rng.get_state(_index(device))


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
    execution.materialize(values)
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
    `_atomic_save`); a file object is written as is. Every process waits for the others
    (a rendezvous) before returning, so the file exists when any of them goes on.
    """
    import torch_xla.runtime as xr
    ordinal = xr.global_ordinal() if global_master else xr.local_ordinal()
    if not master_only or ordinal == 0:
        cpu_data = _to_cpu_data(data)
        if isinstance(file_or_path, (str, bytes, os.PathLike)):
            _atomic_save(cpu_data, file_or_path)
        else:
            torch.save(cpu_data, file_or_path)
    rendezvous("torch_xla.core.xla_model.save")


# ---- the program that would run ----------------------------------------------------------

def get_stablehlo(tensors=None) -> str:
    """The StableHLO (MLIR text) of the program that `mark_step` would compile for `tensors`
    (default: every pending tensor on the first device), lowered by jax exactly as the
    compiler lowers it."""
    from torch_xla._lazy import graph_dump
    return graph_dump.program_text(tensors, "stablehlo")
