"""The program runner: the one place a jax function becomes an XLA executable, and runs.

Every program the engine runs comes through here: a lazy step's graph (`graph_program`), an
SPMD program over a mesh (`spmd_program`), a program spanning the replicas (`replicated`),
a captured FX graph (`graph_capture.compiled`), a loaded StableHLO module and the small
programs that lay sharded data out (`spmd`). A caller says what to compile and where:

    found = runner.lookup(key, placement)          # a cached Executable, or None
    if found is None:
        found = runner.compile(fn, args, placement, key=key, donate=True,
                               explain=compile_explanation.of_walk(w))
    outputs = runner.execute(found, *args)

`compile(fn, args, placement, key=, donate=, explain=, executable=)` traces `fn` on `args`
(jax arrays, numpy arrays or `jax.ShapeDtypeStruct`s, in pytrees), donating the first
argument's buffers if `donate`, lowers and compiles it for `placement`, and caches the
result under `key` (None: not cached). What it caches is an `Executable`: its compiled
program and its key; a caller whose programs carry more (`graph_program.Program`,
which carries the plan it replays) passes its own subclass instance as `executable`.

Placements are small strategies: `OnDevice(device)` (outputs on one device; XLA options of
its platform), `OnMesh(out_shardings)` (one program over a mesh, partitioned by XLA; None
leaves an output's layout to XLA) and `OverReplicas(mesh, axis)` (the function run per
replica under `jax.shard_map`, each replica's arguments one block of global arrays).

The runner owns what every program shares:
- one cache, bounded by XLA_COMPILATION_CACHE_SIZE (default 2048 programs, least recently
  used evicted first, counted as `ProgramCacheEvictions`) and by the process's memory maps
  (below); a key is hashed once;
- the metrics: `UncachedCompile` and `CompileTime` per compilation (`LoweringTime`: the
  part of it that traces and lowers to StableHLO, before XLA's compile), `CachedCompile`
  per program found again, `ExecuteTime` per launch;
- PT_XLA_DEBUG / PT_XLA_DEBUG_LEVEL: the analysis of each compilation and run of a
  program the caller explained (`explain`: a `graph_analysis.Explanation`, from the caller,
  which knows what the program is made of);
- the persistent cache (`initialize_persistent_cache`): jax's own on-disk cache, which
  every compilation here consults, after the caller's entry in a store of its own
  (`stored=`: `program_store`, a lazy graph's executable under the engine's key).
`lower` and `export` give the same program's StableHLO without compiling it.
"""
import collections
import os
import threading
import time
import warnings
import weakref

import jax
from jax import monitoring
from jax.sharding import PartitionSpec

from ..base import counters
from . import directory_trust, graph_analysis, hosts, pjrt, trace_spans
from ..base.caches import LRUCache

_cache = LRUCache("Program", "XLA_COMPILATION_CACHE_SIZE", 2048)


def _max_map_count():
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):  # not Linux: no such bound to keep
        return None


# XLA's CPU backend maps each kernel of a compiled program into memory on its own (code,
# constants, data: three maps), and Linux caps a process's maps (vm.max_map_count, 65530 by
# default): 2048 programs of a few dozen kernels each reach it, and the next compilation
# fails ("LLVM compilation error: Cannot allocate memory", then a crash). So every
# MAPS_CHECK_EVERY compilations the runner counts the process's maps, and above half the cap
# evicts the least recently used half of the cache (counted as `ProgramCacheEvictions`).
MAPS_CHECK_EVERY = 64
max_maps = _max_map_count()
_compiled_since_check = 0


def _memory_maps() -> int:
    with open("/proc/self/maps", "rb") as f:
        return sum(1 for _ in f)


def _keep_within_memory_maps() -> None:
    global _compiled_since_check
    _compiled_since_check += 1
    if max_maps is None or _compiled_since_check < MAPS_CHECK_EVERY:
        return
    _compiled_since_check = 0
    if _memory_maps() > max_maps // 2:
        _cache.evict_oldest(len(_cache) // 2)


class Executable:
    """A compiled program (`compiled`, called with the arguments it was compiled for) and
    the key it is cached under (`key`; None if uncached)."""
    __slots__ = ("compiled", "key", "unmet", "analysis", "__weakref__")

    def __init__(self):
        self.compiled = self.key = None
        self.analysis = None  # its `graph_analysis.Explanation`, for PT_XLA_DEBUG
        self.unmet = False  # spans processes and not launched yet: meet them first


class _Key:
    """A program's cache key, hashed once (a lazy step's key holds every node of its graph)."""
    __slots__ = ("key", "hash")

    def __init__(self, key):
        self.key, self.hash = key, hash(key)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self is other or (type(other) is _Key and other.hash == self.hash and other.key == self.key)


# XLA options of single-device programs, per platform. On the CPU, XLA splits each kernel's
# LLVM module into parts compiled in parallel (32 by default); a step's kernels are small
# modules, so the splitting costs more than it gains: in one part the MLP step's program
# compiles in 5-10% less CPU time (the CNN's 3% less), and runs as fast.
# XLA hands products and reductions to its YNNPACK kernels, and by default convolutions
# too; those run convolutions far slower than XLA's own (1x1 convolutions over 1024 channels,
# forward and backward, a batch of 32: 2.5 x the time per step, and 1.5 x the compile time),
# so convolutions are left to XLA.
_COMPILER_OPTIONS = {"cpu": {"xla_cpu_parallel_codegen_split_count": 1,
                             "xla_cpu_experimental_ynn_fusion_type":
                                 "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"}}
# A CPU program without matrix products compiles faster with XLA's LLVM IR fusion emitters
# than with its MLIR ones, into kernels as fast that compute the same bits (a softmax 53
# against 79 ms, a CNN training step 86 against 196); small products fused with what follows
# them compile 3 x slower so (`tanh(x @ w)` chains), so programs with products keep the
# default (docs/reference/benchmarks.md).
_WITHOUT_PRODUCTS = {"xla_cpu_use_fusion_emitters": False}


def _has_products(lowered) -> bool:
    """Whether the lowered module holds a dot_general (at any depth)."""
    stack = [lowered.compiler_ir("stablehlo").operation]
    while stack:
        op = stack.pop()
        if op.name == "stablehlo.dot_general":
            return True
        for region in op.regions:
            for block in region.blocks:
                stack.extend(o.operation for o in block.operations)
    return False


class OnDevice:
    """The program runs on XLA device `device`; its outputs stay there."""
    __slots__ = ("device", "key")

    def __init__(self, device: int):
        self.device = pjrt.jax_device(device)
        self.key = ("device", device)

    def lower(self, fn, donate, args):
        # Placed by the default device, not by out_shardings: a sharding on the outputs makes
        # XLA's compile of a one-device program take half as long again.
        with jax.default_device(self.device):
            return jax.jit(fn, donate_argnums=donate).lower(*args)

    def options(self, lowered=None):
        """XLA's options for this device's programs (for `lowered`'s, if given)."""
        options = _COMPILER_OPTIONS.get(self.device.platform)
        if lowered is not None and self.device.platform == "cpu" and not _has_products(lowered):
            options = {**options, **_WITHOUT_PRODUCTS}
        return options


_on_device = {}


def on_device(device: int) -> OnDevice:
    """The `OnDevice` placement of XLA device `device` (made once per device)."""
    placement = _on_device.get(device)
    if placement is None:
        placement = _on_device[device] = OnDevice(device)
    return placement


class OnMesh:
    """One program over a mesh, partitioned by XLA: the arguments' layouts from their arrays,
    the outputs' from `out_shardings` (None: XLA's choice). The caller's key says which
    layouts (this placement adds none of its own to it)."""
    __slots__ = ("out_shardings", "key")

    def __init__(self, out_shardings):
        self.out_shardings, self.key = out_shardings, "mesh"

    def lower(self, fn, donate, args):
        return jax.jit(fn, donate_argnums=donate, out_shardings=self.out_shardings).lower(*args)

    def options(self, lowered=None):
        return None


class OverReplicas:
    """`fn` run by every replica on its own blocks: each argument and output a global array
    split along its first dimension over `mesh`'s axis `axis` (one block per device)."""
    __slots__ = ("mesh", "axis", "key")

    def __init__(self, mesh, axis):
        self.mesh, self.axis = mesh, axis
        self.key = ("replicas", tuple(d.id for d in mesh.devices.flat))

    def lower(self, fn, donate, args):
        spec = PartitionSpec(self.axis)
        return jax.jit(jax.shard_map(fn, mesh=self.mesh, in_specs=(spec,) * len(args),
                                     out_specs=spec, check_vma=False),
                       donate_argnums=donate).lower(*args)

    def options(self, lowered=None):
        return None


def cache_key(key, placement) -> _Key:
    """The runner's key of program `key` placed by `placement`."""
    return _Key((placement.key, key))


def lookup(key, placement):
    """The cached Executable of program `key` under `placement` (counted as
    `CachedCompile`), or None."""
    found = _cache.get(cache_key(key, placement))
    if found is not None:
        counters.count("CachedCompile")
    return found


def reused(executable) -> Executable:
    """`executable`, found again by its caller without a look-up (counted as `CachedCompile`)."""
    next(_cached_compile)
    return executable


_cached_compile = counters.op_counter("CachedCompile")  # (an eager op's relaunch counts one)


def is_cached(executable) -> bool:
    """Whether `executable` is still in the cache (marked used if so)."""
    return executable.key is not None and _cache.get(executable.key) is executable


def compile(fn, args, placement, *, key=None, donate=False, explain=None, executable=None,
            timed_as="CompileTime", stored=None):
    """`fn` compiled for `args` (a tuple: the positional arguments) under `placement`, as an
    Executable (`executable` if given), cached under `key` unless it is None. With `donate`
    the buffers of `args[0]` are donated to the program. `stored`: the program's entry in a
    store on disk (`program_store`), loaded instead of compiling when it is there (counted as
    `PersistentCacheHit`), written after compiling otherwise. Counted and timed as
    `UncachedCompile` and `timed_as` (`CompileTime`; an eager op's, `EagerOpCompileTime`).
    `explain`: the program's `graph_analysis.Explanation`, reported under PT_XLA_DEBUG
    (an eager op's compilation is not)."""
    executable = Executable() if executable is None else executable
    executable.analysis = explain
    counters.count("UncachedCompile")
    start = time.perf_counter_ns()
    compiled = None if stored is None else stored.load()
    if compiled is not None:
        counters.count("PersistentCacheHit")
    else:
        counters.count("CreateCompileHandles")  # torch_xla's count of programs handed to XLA
        counters.count("StableHloCompile")  # every program reaches XLA as StableHLO
        with trace_spans.span("Compile"):
            lowered = placement.lower(fn, (0,) if donate else (), args)
            counters.sample("LoweringTime", time.perf_counter_ns() - start)  # traced, to StableHLO
            compiled = lowered.compile(placement.options(lowered))
        if stored is not None:
            stored.store(compiled)
    executable.compiled = compiled
    executable.unmet = hosts.spans_processes(compiled)
    counters.sample(timed_as, time.perf_counter_ns() - start)
    if key is not None:
        executable.key = cache_key(key, placement)
        _cache.put(executable.key, executable)
        _keep_within_memory_maps()
    if explain is not None:
        if timed_as != "EagerOpCompileTime" and graph_analysis.level() >= 1:
            graph_analysis.compiled(executable)
        explain.release()
    return executable


def execute(executable, *args, timed_as="ExecuteTime", span="ExecuteComputation", analysed=True):
    """Launches `executable` on `args` (jax runs it asynchronously), timed as `timed_as`:
    `ExecuteTime` from the launch until its outputs are ready, as torch_xla times the run
    (sampled at the launch, its value set once it is seen done: `_running`), an eager op's
    `EagerOpExecuteTime` the launch alone. The launch is a profile's `span` (a program over
    several devices: `ExecuteReplicated`). An `analysed` run of a program compiled with an
    explanation is reported at PT_XLA_DEBUG_LEVEL 2 (`graph_analysis`)."""
    if executable.unmet:
        hosts.meet_before_first_launch()
        executable.unmet = False
    if analysed and executable.analysis is not None and graph_analysis.level() >= 2:
        graph_analysis.executed(executable)
    start = _clock()
    if trace_spans.recording():
        with trace_spans.span(span):
            outputs = executable.compiled(*args)
    else:
        outputs = executable.compiled(*args)
    launched = _clock() - start
    if _running:
        time_finished_runs()
    if timed_as == "ExecuteTime":
        last = outputs
        while isinstance(last, (list, tuple)) and last:  # (nested outputs: the last array)
            last = last[-1]
        if isinstance(last, jax.Array):
            token = counters.sample_amendable(timed_as, launched)
            with _running_lock:
                _running.append([weakref.ref(last), start, token, start + launched, False])
            counters.fold_if_many()
            return outputs
    counters.op_metric(timed_as)((start, launched))  # (an eager op's launch: sampled as ops are)
    counters.fold_if_many()
    return outputs


_clock = time.perf_counter_ns


# Programs launched and not yet seen done: [a weak reference to an output, the launch's
# start, its sample, when it was last seen running, whether a host read waited on it]. jax
# tells no one when a program ends, and a thread waiting on each made small steps slower,
# so a run's end is looked for at the next launch, read of the metrics or host read: a run
# found done is timed until it was last seen running (a lower bound), one a host read
# waited for until the read's end. Replica threads launch and read at once: `_running_lock`.
_running = collections.deque()
_running_lock = threading.Lock()


def _done(output_ref) -> bool:
    output = output_ref()
    return output is None or output.is_deleted() or output.is_ready()  # gone: used up


def time_finished_runs(after_wait: bool = False) -> None:
    """Sets the `ExecuteTime` of the runs found finished (in launch order); `after_wait`:
    the caller has just waited for buffers (`before_wait` marked the runs it waited on)."""
    now = time.perf_counter_ns()
    with _running_lock:
        while _running:
            run = _running[0]
            if not _done(run[0]):
                run[3] = now
                return
            _running.popleft()
            counters.amend(run[2], (now if after_wait and run[4] else run[3]) - run[1])


def running() -> bool:
    """Whether runs are waiting to be timed."""
    return bool(_running)


def before_wait() -> None:
    """Marks the runs still going as waited on by the host read about to start."""
    now = time.perf_counter_ns()
    with _running_lock:
        for run in _running:
            if not _done(run[0]):
                run[3], run[4] = now, True


counters.before_reads(time_finished_runs)


def lower(fn, args, placement=None):
    """jax's `Lowered` of `fn` on `args` (under `placement`, if given), not compiled."""
    return jax.jit(fn).lower(*args) if placement is None else placement.lower(fn, (), args)


def export(fn, args, **options):
    """`fn` on `args` as a portable StableHLO module (`jax.export.Exported`); `options` are
    jax.export's (`platforms`, `disabled_checks`)."""
    return jax.export.export(jax.jit(fn), **options)(*args)


def cached_programs():
    """The cached Executables, least recently used first."""
    return _cache.values()


def cache_size() -> int:
    return len(_cache)


# ---- the persistent cache -------------------------------------------------------------

_PERSISTENT_EVENTS = {
    "/jax/compilation_cache/cache_hits": "PersistentCacheHit",
    "/jax/compilation_cache/cache_misses": "PersistentCacheMiss",
}
_persistent = {"path": None, "readonly": None}


def persistent_cache():
    """(the persistent cache's folder, whether it is read-only), or None while it is off."""
    return None if _persistent["path"] is None else (_persistent["path"], _persistent["readonly"])


def _on_event(event, **kwargs):
    name = _PERSISTENT_EVENTS.get(event)
    if name is not None:
        counters.count(name)


def initialize_persistent_cache(path: str, readonly: bool = False) -> None:
    """Keeps compiled programs in directory `path` (created if missing) across processes:
    jax's own cache, which `compile` consults, so a second process that builds the same
    program loads the executable instead of compiling it. Every program is written, however
    small or quick to compile; loads count as `PersistentCacheHit`, programs compiled and
    written as `PersistentCacheMiss` (from jax's monitoring events).

    With `readonly` programs are loaded but none are written (for a cache that several
    processes share). Call it once, before the first computation: jax sets its cache up at
    its first compilation.

    A program loaded from there runs as this process's own code, so a directory that other
    users could write to (`directory_trust`) is refused with a warning: the cache stays off.
    """
    path = directory_trust.resolved(path)
    if _persistent["path"] is not None:
        if (_persistent["path"], _persistent["readonly"]) != (path, readonly):
            raise RuntimeError(f"the persistent cache is already initialized at {_persistent['path']} "
                               f"(readonly={_persistent['readonly']})")
        return
    os.makedirs(path, mode=0o755, exist_ok=True)
    unsafe = directory_trust.writable_by_others(path)
    if unsafe is not None:
        warnings.warn(f"torch_xla: the persistent cache at {path} is not used: {unsafe}, and a "
                      "program loaded from there would run as this process's own code; make it "
                      "and the directories above it writable by their owner only "
                      "(chmod go-w, or a directory of your own)", stacklevel=3)
        return
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # readonly: no compilation is ever slow enough to be written.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float("inf") if readonly else 0.0)
    monitoring.register_event_listener(_on_event)
    _persistent.update(path=path, readonly=readonly)
