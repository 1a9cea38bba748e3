"""Counters and timed metrics of the engine, in the shape torch_xla reports them.

A counter is a running integer (`UncachedCompile`, `CachedCompile`, `aten::NAME` for each
CPU fallback, ...). A metric keeps every sample with its time stamp (`CompileTime`,
`ExecuteTime`, `TransferToDeviceTime`, ...), in nanoseconds for times.

Two kinds are not kept as they come, for their cost: a metric of every op (`LazyTracing`)
appends to a list without the lock, folded in when read (and at a program's launch once
many wait); a counter computed when read (`DestroyXlaTensor`) asks its owner.
"""
import collections
import contextlib
import itertools
import threading
import time

_lock = threading.Lock()
_counters = collections.Counter()
_metrics = collections.defaultdict(list)  # name -> [(timestamp_s, value)]
_MAX_SAMPLES = 1024


def count(name: str, n: int = 1) -> None:
    with _lock:
        _counters[name] += n


# Counters bumped by every op (`xla::NAME`): an `itertools.count` each, advanced by `next()`,
# which the GIL keeps whole without a lock (a lock and a dict update cost more than the
# rest of an op's dispatch), and the value it had when the counters were last cleared.
_op_counts = {}


def op_counter(name: str):
    """The counter of `name` as an object to advance with `next(counter)`."""
    entry = _op_counts.get(name)
    if entry is None:
        entry = _op_counts.setdefault(name, [itertools.count(), 0])
    return entry[0]


def _op_value(entry) -> int:
    return entry[0].__reduce__()[1][0] - entry[1]


def op_total(name: str) -> int:
    """How many times the counter of `name` was advanced since the process started."""
    entry = _op_counts.get(name)
    return 0 if entry is None else entry[0].__reduce__()[1][0]


def _op_values():
    return {name: v for name, entry in list(_op_counts.items()) if (v := _op_value(entry))}


def sample(name: str, value: float) -> None:
    with _lock:
        _sample_locked(name, time.time(), value)


def _sample_locked(name, timestamp, value):
    samples = _metrics[name]
    samples.append((timestamp, value))
    if len(samples) > 2 * _MAX_SAMPLES:
        del samples[:-_MAX_SAMPLES]
    _counters["__samples__" + name] += 1
    _counters["__sum__" + name] += value


_generation = [0]  # bumped when the metrics are cleared
_readers_hooks = []  # functions that bring samples up to date before a report reads them


def before_reads(hook) -> None:
    """Calls `hook()` before each read of the metrics (to amend samples whose value has
    become known)."""
    _readers_hooks.append(hook)


def _before_read() -> None:
    for hook in _readers_hooks:
        hook()



def sample_amendable(name: str, value: float):
    """Samples `value` of `name` now (read at once, the count is right); returns the token
    with which `amend` replaces that sample's value later."""
    with _lock:
        stamp = time.time()
        _sample_locked(name, stamp, value)
        return name, stamp, value, _generation[0]


def amend(token, new_value: float) -> None:
    """Replaces the value of the sample `token` names (nothing once the metrics were
    cleared, or the sample dropped from the recent ones: then the sum alone)."""
    name, stamp, value, generation = token
    with _lock:
        if _generation[0] != generation:
            return
        _counters["__sum__" + name] += new_value - value
        samples = _metrics[name]
        for i in range(len(samples) - 1, max(-1, len(samples) - 64), -1):
            if samples[i] == (stamp, value):
                samples[i] = (stamp, new_value)
                break


@contextlib.contextmanager
def timed(name: str):
    start = time.perf_counter_ns()
    try:
        yield
    finally:
        sample(name, time.perf_counter_ns() - start)


# Counters computed when read: name -> [the running total's function, its value when the
# counters were last cleared].
_computed = {}


def computed_counter(name: str, total) -> None:
    """Counter `name` is `total()` (a running total) less its value at the last clear."""
    _computed[name] = [total, total()]


def _values():
    values = collections.Counter({k: v for k, v in list(_counters.items()) if not k.startswith("__")})
    values.update(_op_values())
    for name, (total, base) in list(_computed.items()):
        values[name] += total() - base
    return {k: v for k, v in values.items() if v}


def counter_names():
    return sorted(_values())


def counter_value(name: str):
    """The counter's value (None if it is zero or was never counted); `count` adds to the
    counters of ops and computed ones too."""
    value = _counters.get(name, 0)
    entry = _op_counts.get(name)
    if entry is not None:
        value += _op_value(entry)
    computed = _computed.get(name)
    if computed is not None:
        value += computed[0]() - computed[1]
    return value or None


def fallback_counters():
    """The counters of the ops that ran through the CPU fallback (`aten::NAME`)."""
    return [n for n in counter_names() if n.startswith("aten::")]


# ---- metrics of every op: appended without the lock, folded in when read ------------------

_unfolded = {}  # name -> [(perf_counter_ns at the start, value)]
_FOLD_AT = 4096
_wall_offset = time.time() - time.perf_counter_ns() * 1e-9


def op_metric(name: str):
    """A function that samples metric `name` with `(perf_counter_ns() at the start, value)`,
    cheap enough for every op: an append, folded into the metric when read, and at each
    program launch once many are waiting."""
    return _unfolded.setdefault(name, []).append


def fold_if_many() -> None:
    """Folds the metrics of every op in once one has many samples waiting: looked at every
    `_FOLD_EVERY` calls (one per program launch, an eager op's included)."""
    if next(_calls) % _FOLD_EVERY:
        return
    for pending in _unfolded.values():
        if len(pending) > _FOLD_AT:
            _fold()
            return


_calls = itertools.count()
_FOLD_EVERY = 64


def _fold() -> None:
    with _lock:
        for name, pending in _unfolded.items():
            n = len(pending)  # samples appended meanwhile, by other threads, stay for the next
            if n:
                folded = pending[:n]
                del pending[:n]
                samples = _metrics[name]
                samples.extend([(start * 1e-9 + _wall_offset, v) for start, v in folded[-_MAX_SAMPLES:]])
                del samples[:-_MAX_SAMPLES]
                _counters["__samples__" + name] += n
                _counters["__sum__" + name] += sum([v for _, v in folded])


def metric_names():
    _fold()
    return sorted(_metrics)


def metric_data(name: str):
    """(total number of samples, sum of all samples, recent samples) or None."""
    _before_read()
    _fold()
    if name not in _metrics:
        return None
    with _lock:
        return (_counters["__samples__" + name], _counters["__sum__" + name], list(_metrics[name]))


def clear_counters() -> None:
    with _lock:
        for k in [k for k in _counters if not k.startswith("__")]:
            del _counters[k]
        for entry in list(_op_counts.values()):
            entry[1] = entry[0].__reduce__()[1][0]
        for entry in list(_computed.values()):
            entry[1] = entry[0]()


def clear_metrics() -> None:
    _fold()
    with _lock:
        _metrics.clear()
        _generation[0] += 1
        for k in [k for k in _counters if k.startswith("__")]:
            del _counters[k]


def _format_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3f}{unit}"
    return f"{ns:.0f}ns"


# Timed metrics whose names do not end in "Time" (torch_xla's names).
_TIMED = {"LazyTracing", "TensorToData", "UnwrapXlaData", "WrapXlaData", "DeviceLockWait"}


def _formatter(name):
    return _format_time if name.endswith("Time") or name in _TIMED else (lambda v: f"{v:g}")


def metrics_report() -> str:
    _before_read()
    lines = []
    for name in metric_names():
        total, acc, samples = metric_data(name)
        values = sorted(v for _, v in samples)
        fmt = _formatter(name)
        lines.append(f"Metric: {name}")
        lines.append(f"  TotalSamples: {total}")
        lines.append(f"  Accumulator: {fmt(acc)}")
        if values:
            pct = [values[min(len(values) - 1, int(p * len(values)))] for p in (0.01, 0.05, 0.1, 0.2, 0.5, 0.8, 0.9, 0.95, 0.99)]
            lines.append("  Percentiles: " + "; ".join(
                f"{p}%={fmt(v)}" for p, v in zip((1, 5, 10, 20, 50, 80, 90, 95, 99), pct)))
    for name in counter_names():
        lines.append(f"Counter: {name}")
        lines.append(f"  Value: {counter_value(name)}")
    return "".join(line + "\n" for line in lines)  # nothing recorded: ""


def short_metrics_report(counter_names_=None, metric_names_=None) -> str:
    """The named counters and metrics (torch_xla's short list when not given: compile and
    execute times, transfers, CachedCompile and MarkStep), in the full report's format, then
    the CPU fallbacks' counters (`aten::NAME`), always."""
    _before_read()
    metric_names_ = metric_names_ or ["CompileTime", "ExecuteTime", "ExecuteReplicatedTime",
                                      "TransferToDeviceTime", "TransferFromDeviceTime"]
    counter_names_ = counter_names_ or ["CachedCompile", "MarkStep", "DynamoSyncInputExecuteTime"]
    lines = []
    for name in metric_names_:
        data = metric_data(name)
        if data:
            lines.append(f"Metric: {name}\n  TotalSamples: {data[0]}\n  Accumulator: {_formatter(name)(data[1])}")
    fallbacks = [n for n in fallback_counters() if n not in counter_names_]
    for name in list(counter_names_) + fallbacks:
        value = counter_value(name)
        if value:
            lines.append(f"Counter: {name}\n  Value: {value}")
    return "\n".join(lines) + "\n"
