"""torch_xla.core.xla_model: devices, steps and the optimizer step (imported as `xm`)."""
import contextlib
import os
import sys
import time

import torch

import torch_xla
import torch_xla.utils.utils as xu
from torch_xla.utils import closures
from torch_xla.torch_xla import _rng_index as _index
from torch_xla.core.tensor_arena import ToXlaTensorArena  # noqa: F401  (xm.ToXlaTensorArena)
from torch_xla.core.device_names import (  # noqa: F401  (their xm names)
    get_xla_supported_devices, xla_real_devices, xla_replication_devices)
from torch_xla._lazy.hooks import device as _device
from torch_xla._lazy.runtime import device_info as _device_info
from torch_xla._lazy.trace import optimization_barrier as _barrier
from torch_xla._lazy.runtime import pjrt
from torch_xla._lazy.graph import rng
from torch_xla._lazy.step import execution
from torch_xla._lazy.graph import tensor as _tensor

# The `xla` namespace of ops, for definitions of ops of torch_xla's (as it names it here).
XLA_LIB = torch.library.Library("xla", "FRAGMENT")


def xla_device(n: int = None, devkind: str = None) -> torch.device:
    """The XLA device `n` of this process (default: this DataParallel thread's, or 0)."""
    pjrt.jax_devices()  # starts the runtime as configured, or says why not
    count = pjrt.device_count()
    if n is None:
        n = pjrt.thread_device()
    if n is not None and not 0 <= n < count:
        raise RuntimeError(f"Invalid XLA device index {n}: there are {count} device(s)")
    return torch_xla.device(n)


def xla_device_hw(device) -> str:
    return pjrt.device_type()


def xla_device_kind(device=None) -> str:
    """The vendor's name for the kind of `device` (default: this thread's): 'cpu', 'TPU v4',
    'NVIDIA H100 80GB HBM3', ..."""
    return _device_info.device_kind(str(device or torch_xla.device()))


def is_xla_tensor(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "xla"


def get_memory_info(device=None) -> dict:
    """{'bytes_used', 'bytes_limit'} (and 'peak_bytes_used' where the runtime tracks it) of
    `device` (default: this thread's); see `_lazy.runtime.device_info.memory_info`."""
    return _device_info.memory_info(str(device or torch_xla.device()))


def set_replication(device, devices) -> None:
    """Makes the calling thread the replica that drives `device` among the replicas `devices`
    (XLA devices of this process; empty: no replication, the thread's device alone).

    A replica here is a thread driving a device: DataParallel runs one per device and sets
    this up itself; called from one of its threads, `devices` must be its devices. Outside
    it, this process runs one replica, on `device`, whatever `devices` lists (the other
    devices have no thread replicating on them); several processes replicate through
    xmp.spawn / torch_xla.launch.
    """
    index = _device_index(device)
    listed = [_device_index(d) for d in devices or ()]
    if listed and index not in listed:
        raise ValueError(f"set_replication: {device} is not among the replication devices {list(devices)}")
    current = pjrt.replicas()
    if len(current) > 1:  # DataParallel's threads
        if index not in current or (listed and sorted(listed) != sorted(current)):
            raise ValueError(f"set_replication({device}, {list(devices)}): the replicas of this process "
                             f"are DataParallel's devices xla:{list(current)}")
    else:
        pjrt.set_replicas((index,))
    pjrt.set_thread_device(index)


def _device_index(device) -> int:
    device = torch.device(device)
    if device.type != "xla":
        raise ValueError(f"{device} is not an XLA device")
    index = device.index or 0
    count = len(pjrt.jax_devices())
    if not 0 <= index < count:
        raise RuntimeError(f"Invalid XLA device index {index}: there are {count} device(s)")
    return index


def master_print(*args, fd=None, local: bool = False, flush: bool = False) -> None:
    """`print(*args)` to `fd` (default: sys.stdout) on the master replica only (the global
    one; `local`: each host's)."""
    if is_master_ordinal(local=local):
        print(*args, file=fd or sys.stdout, flush=flush)


class RateTracker:
    """Counts items (`add`) and reports their rate per second: `rate()` since the previous
    call, smoothed with the previous rate by `smooth_factor` (RATE_TRACKER_SMOOTHING, 0.4),
    and `global_rate()` since the tracker was made."""

    def __init__(self, smooth_factor: float = None):
        if smooth_factor is None:
            smooth_factor = xu.getenv_as("RATE_TRACKER_SMOOTHING", float, 0.4)
        self._smooth_factor = smooth_factor
        self._start_time = self._partial_time = time.time()
        self._partial_count = 0.0
        self._partial_rate = None
        self._count = 0.0

    def add(self, count: float) -> None:
        self._count += count

    def rate(self) -> float:
        now = time.time()
        delta = now - self._partial_time
        if delta <= 0:
            return 0.0
        current = self._count / delta
        if self._partial_rate is not None:
            current = (1 - self._smooth_factor) * current + self._smooth_factor * self._partial_rate
        self._partial_count += self._count
        self._count = 0.0
        self._partial_time, self._partial_rate = now, current
        return current

    def global_rate(self) -> float:
        delta = time.time() - self._start_time
        return (self._partial_count + self._count) / delta if delta > 0 else 0.0


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """Ends a step: compiles (or reuses) and runs one program for every pending tensor, then
    runs the step closures (`torch_xla.sync`)."""
    torch_xla.sync(wait, reset_scope)


def wait_device_ops(devices=()) -> None:
    """Blocks until everything queued on the devices has run."""
    execution.wait_device_ops()


def add_step_closure(closure, args=(), run_async: bool = False) -> None:
    """Queues `closure(*args)` to run once this step's graph has run (at the next
    `torch_xla.sync`, `xm.mark_step` or loader iteration), when the tensors it reads are
    already computed: reporting a loss this way costs no extra execution. Closures run in
    the order queued; with `run_async`, on a worker thread while training goes on."""
    closures.queue_step_closure(lambda: closure(*args), run_async)


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
# (torch_xla/_lazy/trace/collective_ops.py, run by torch_xla/_lazy/launch/replica_program.py); groups are lists of replica ordinals.

REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX = (
    "sum", "mul", "and", "or", "min", "max")


def xrt_world_size(defval: int = 1) -> int:
    return pjrt.world_size()


def get_ordinal(defval: int = 0) -> int:
    return pjrt.global_ordinal()


def get_local_ordinal(defval: int = 0) -> int:
    return pjrt.local_ordinal()


def is_master_ordinal(local: bool = True) -> bool:
    return (get_local_ordinal() if local else get_ordinal()) == 0


def _fetch_gradients(optimizer):
    """The gradients of `optimizer`'s parameters that have one, in parameter order."""
    return [p.grad.data for group in optimizer.param_groups for p in group["params"]
            if isinstance(p, torch.Tensor) and p.grad is not None]


def reduce_gradients(optimizer, groups=None, pin_layout=True) -> None:
    """Averages every parameter's gradient over all replicas, in one all_reduce (scaled by
    1/world_size, as torch_xla does, groups or not)."""
    count = pjrt.world_size()
    if count > 1:
        grads = _fetch_gradients(optimizer)
        if grads:
            all_reduce(REDUCE_SUM, grads, scale=1.0 / count, groups=groups, pin_layout=pin_layout)


def _groups(groups):
    """`groups` as the ops take them: a list of lists of ordinals ([]: one group of all)."""
    return [[int(r) for r in g] for g in groups] if groups else []


def all_reduce(reduce_type, inputs, scale=1.0, groups=None, pin_layout=True):
    """Reduces `inputs` (a tensor, or a list reduced in place and returned) over the replicas
    of each group, times `scale`."""
    single = isinstance(inputs, torch.Tensor)
    tensors = [inputs] if single else list(inputs)
    if not tensors:
        return inputs
    outs = torch.ops.xla.all_reduce([t.detach() for t in tensors], reduce_type, float(scale),
                                    _groups(groups))
    if single:
        return outs[0]
    with torch.no_grad():
        for t, out in zip(tensors, outs):
            t.copy_(out)
    return inputs


def _into(output, result):
    """`result` written into `output` (given its shape first, as torch_xla does), or itself."""
    if output is None:
        return result
    with torch.no_grad():
        if output.shape != result.shape:
            output.resize_(result.shape)
        output.copy_(result)
    return output


def all_gather(value, dim=0, groups=None, output=None, pin_layout=True, channel_id=None,
               use_global_device_ids=None):
    """The `value`s of the replicas of this replica's group, concatenated along `dim`. A list
    of tensors (with `pin_layout=False`, as in torch_xla) gives the list of their gathers.
    `channel_id` and `use_global_device_ids` change nothing here: a replica's ordinal is its
    global device id, and the collective is in the one program of every replica."""
    if isinstance(value, (list, tuple)):
        if pin_layout:
            raise RuntimeError("For xm.all_gather with list of tensors input, pin_layout=True is not yet supported.")
        outputs = output if output is not None else [None] * len(value)
        if len(outputs) != len(value):
            raise ValueError(f"`output` length doesn't match `input` length: {len(outputs)} vs {len(value)}.")
        return [all_gather(v, dim, groups, o, pin_layout=False) for v, o in zip(value, outputs)]
    out = torch.ops.xla.all_gather(value.detach(), dim % max(value.dim(), 1), _groups(groups))
    return _into(output, out)


def reduce_scatter(reduce_type, input, scale, scatter_dim, shard_count, groups=None, output=None,
                   pin_layout=True, channel_id=None, use_global_device_ids=None):
    """Reduces `input` over the group, and keeps this replica's shard of `scatter_dim` (a list
    of inputs gives a list of results). `channel_id` and `use_global_device_ids` as in
    `all_gather`."""
    if isinstance(input, (list, tuple)):
        outputs = output if output is not None else [None] * len(input)
        return [reduce_scatter(reduce_type, t, scale, scatter_dim, shard_count, groups, o)
                for t, o in zip(input, outputs)]
    out = torch.ops.xla.reduce_scatter(input.detach(), reduce_type, float(scale), scatter_dim % input.dim(),
                                       int(shard_count), _groups(groups))
    return _into(output, out)


def all_to_all(value, split_dimension, concat_dimension, split_count, groups=None, pin_layout=True):
    """Splits `value` in `split_count` chunks along `split_dimension`, sends chunk i to the
    group's i-th replica, and concatenates what arrives along `concat_dimension`."""
    return torch.ops.xla.all_to_all(value.detach(), split_dimension % value.dim(),
                                    concat_dimension % value.dim(), int(split_count), _groups(groups))


def collective_permute(value, pairs):
    """Each (source, target) pair sends source's `value` to target; replicas that receive
    nothing get zeros."""
    return torch.ops.xla.collective_permute(value.detach(), [[int(s), int(t)] for s, t in pairs])


def collective_broadcast(tensors, root_ordinal: int = 0, groups=None, pin_layout: bool = True) -> None:
    """Sets every tensor in `tensors`, in place, to its value on replica `root_ordinal` (in
    each group: the group must hold the root to receive its values; others get zeros). All
    replicas run the same graph: the root contributes its values, the others zeros, summed."""
    mine = send_cpu_data_to_device(torch.tensor(pjrt.global_ordinal() == root_ordinal),
                                   tensors[0].device)[0] if tensors else None
    with torch.no_grad():
        for t in tensors:
            t.copy_(torch.where(mine, t, torch.zeros((), dtype=t.dtype, device=t.device)))
    all_reduce(REDUCE_SUM, list(tensors), groups=groups, pin_layout=pin_layout)


def broadcast_master_param(model: torch.nn.Module) -> None:
    """Gives every replica the master replica's parameters and buffers, then ends the step."""
    collective_broadcast(list(model.parameters()) + list(model.buffers()))
    torch_xla.sync()


def _in_buckets(fn, inputs, outputs, bucket_cap_mb):
    """`fn(bucket, bucket_outputs)` over consecutive buckets of `inputs` of about
    `bucket_cap_mb` MB each (a tensor bigger than that goes alone, or with a bucket still
    under half full), results concatenated in input order. Buckets only shape the graph."""
    if not isinstance(inputs, list) or any(not isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError(f"`input_list` needs to be a list of Tensors, but given {type(inputs)}.")
    if outputs is not None and (not isinstance(outputs, list) or len(outputs) != len(inputs)):
        raise ValueError("`output_list` must be a list of Tensors as long as `input_list`")
    cap = bucket_cap_mb * 1024 * 1024
    results, bucket, size = [], [], 0

    def flush():
        nonlocal bucket, size
        if bucket:
            outs = [outputs[i] for i in bucket] if outputs is not None else None
            results.extend(fn([inputs[i] for i in bucket], outs))
        bucket, size = [], 0

    for i, t in enumerate(inputs):
        nbytes = t.numel() * t.element_size()
        if nbytes > cap and size < cap / 2 and size + nbytes <= 2 * cap:
            bucket.append(i)
            flush()
            continue
        if size + nbytes > cap:
            flush()
        bucket.append(i)
        size += nbytes
    flush()
    return results


def all_gather_bucketized(input_list, dim=0, groups=None, output=None, pin_layout=False, bucket_cap_mb=160):
    """`all_gather` of each tensor of `input_list`, gathered in buckets of `bucket_cap_mb`."""
    if pin_layout:
        raise RuntimeError("For xm.all_gather_bucketized, pin_layout=True is not yet supported.")
    return _in_buckets(lambda ts, outs: all_gather(ts, dim, groups, outs, pin_layout=False),
                       input_list, output, bucket_cap_mb)


def reduce_scatter_bucketized(reduce_type, input_list, scale, scatter_dim, shard_count, groups=None,
                              output=None, pin_layout=False, bucket_cap_mb=160):
    """`reduce_scatter` of each tensor of `input_list`, in buckets of `bucket_cap_mb`."""
    return _in_buckets(lambda ts, outs: reduce_scatter(reduce_type, ts, scale, scatter_dim, shard_count,
                                                       groups, outs, pin_layout),
                       input_list, output, bucket_cap_mb)


def rendezvous(tag: str, payload: bytes = b"", replicas=()):
    """Waits for every replica to reach `rendezvous(tag)`; returns the `payload` of each, in
    ordinal order (exchanged through an all_gather on the device). With `replicas` (a list
    of ordinals), only those replicas' payloads come back, in that order; every replica
    still takes part (the exchange is one program of all replicas)."""
    world = pjrt.world_size()
    members = [int(r) for r in replicas or ()]
    if len(set(members)) != len(members) or any(not 0 <= r < world for r in members):
        raise ValueError(f"rendezvous replicas {list(replicas)} must be distinct ordinals in [0, {world})")
    if world == 1:
        return [bytes(payload)]
    device = xla_device()
    data = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else torch.zeros(0, dtype=torch.uint8)
    sizes = all_gather(torch.tensor([data.numel()]).to(device)).cpu().tolist()
    if not any(sizes):  # empty payloads (a plain barrier): nothing more to exchange
        return [b""] * len(members or range(world))
    padded = 1 << max(max(sizes), 1).bit_length()  # a few distinct sizes: a few programs
    block = torch.zeros(padded, dtype=torch.uint8)
    block[:data.numel()] = data
    gathered = all_gather(block.to(device)).cpu().view(world, padded)
    return [bytes(gathered[i, :sizes[i]].numpy().tobytes()) for i in members or range(world)]


def mesh_reduce(tag: str, data, reduce_fn):
    """`reduce_fn` of the list of every replica's `data` (any picklable value)."""
    import pickle
    payloads = rendezvous(tag, pickle.dumps(data))
    return reduce_fn([pickle.loads(p) for p in payloads])


def set_rng_state(seed: int, device=None) -> None:
    rng.manual_seed(seed, _index(device))


def get_rng_state(device=None) -> int:
    return rng.get_state(_index(device))


@contextlib.contextmanager
def fork_rng(device=None, enabled: bool = True):
    """Restores the random state of `device` (default: this thread's) on leaving the block."""
    if not enabled:
        yield
        return
    with rng.fork(_index(device)):
        yield


# ---- saving --------------------------------------------------------------------------------

def _maybe_convert_to_cpu(data, convert: bool = True):
    """Materialises every XLA tensor in `data` (nested dicts, lists, tuples); returns `data`
    with them moved to the CPU, or, without `convert`, `data` itself."""
    if convert:
        return _to_cpu_data(data)
    _to_cpu_data(data, convert=False)
    return data


def unlazy(tensors) -> None:
    _to_cpu_data(list(tensors), convert=False)  # computed now, in one program, kept on the device


def send_cpu_data_to_device(datas, device, input_sharding=None):
    """`datas` with every CPU tensor (plain `torch.Tensor`s, through dicts, lists, tuples,
    sets and objects' attributes) copied to XLA device `device`. As in torch_xla, a single
    tensor comes back in a list, tuples as lists, other objects as shallow copies; a tensor
    requiring grad gives a leaf requiring grad. Under SPMD,
    `input_sharding` (a ShardingSpec) lays each tensor whose rank it fits out over its mesh."""
    if type(datas) is torch.Tensor:
        datas = [datas]

    def transfer(t):
        if input_sharding is None:
            out = _device.transfer(t, device)
        else:
            out = _device.transfer(t, device, input_sharding.xla_spec(t), input_sharding.minibatch)
        return out.requires_grad_(t.requires_grad)  # a new leaf, as torch_xla makes it
    return xu.for_each_instance_rewrite(
        datas, lambda v: type(v) is torch.Tensor and v.device.type == "cpu", transfer)


def _to_cpu_data(data, convert: bool = True):
    """`data` with every XLA tensor in nested dicts, lists and tuples moved to the CPU (all of
    them materialised by one program); without `convert`, only materialised."""
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
    if not convert:
        return data
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


def check_view_sharing(obj) -> None:
    """Raises RuntimeError if two different tensors inside `obj` (through lists, tuples,
    dicts and objects' attributes) are views of one storage (saved apart, they would no
    longer share it)."""
    owners = {}

    def storage_of(t):
        if is_xla_tensor(t):
            return "xla", id(t._base if t._base is not None else t)
        return "torch", t.untyped_storage().data_ptr()

    def check(t):
        other = owners.setdefault(storage_of(t), t)
        if other is not t:
            raise RuntimeError(f"Tensor ID {id(t)} ({t.dtype}{list(t.size())}) is sharing a "
                               f"view with tensor ID {id(other)} ({other.dtype}{list(other.size())})")
    xu.for_each_instance(obj, lambda x: type(x) is torch.Tensor, check)


def save(data, file_or_path, master_only: bool = True, global_master: bool = False) -> None:
    """Saves `data` (tensors, state dicts, any nested dicts/lists/tuples) with its XLA tensors
    moved to the CPU, so the file loads anywhere as CPU tensors.

    With `master_only` only the master replica writes: the one whose local ordinal (or
    with `global_master`, global ordinal) is 0. A path is written atomically (see
    `utils.atomic_save`); a file object is written as is. There is no collective inside, so it
    may be called by the master alone (`if xm.is_master_ordinal(): xm.save(...)`); replicas
    that must see the file first meet at `xm.rendezvous(...)` after it, as in torch_xla.
    """
    import torch_xla.runtime as xr
    ordinal = xr.global_ordinal() if global_master else xr.local_ordinal()
    if not master_only or ordinal == 0:
        cpu_data = _to_cpu_data(data)
        if isinstance(file_or_path, (str, bytes, os.PathLike)):
            xu.atomic_save(cpu_data, file_or_path)
        else:
            torch.save(cpu_data, file_or_path)


def optimization_barrier_(tensors) -> None:
    """Keeps XLA from moving computations across `tensors` (updated in place): e.g. from
    merging the recomputation of a checkpointed block with its first computation."""
    _barrier.optimization_barrier_(tensors)


# ---- the program that would run ----------------------------------------------------------

def get_stablehlo(tensors=None) -> str:
    """The StableHLO (MLIR text) of the program that `mark_step` would compile for `tensors`
    (default: every pending tensor on the first device), lowered by jax exactly as the
    compiler lowers it."""
    from torch_xla._lazy.inspect import graph_dump
    return graph_dump.program_text(tensors, "stablehlo")


def get_stablehlo_bytecode(tensors=None) -> bytes:
    """The StableHLO of the program that `mark_step` would compile for `tensors` (default:
    every pending tensor on the first device) as bytecode: a versioned StableHLO portable
    artifact."""
    from torch_xla._lazy.inspect import graph_dump
    return graph_dump.program_bytecode(tensors)
