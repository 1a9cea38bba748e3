"""Counters and timed metrics of the engine, in the shape torch_xla reports them.

A counter is a running integer (`UncachedCompile`, `CachedCompile`, `aten::NAME` for each
CPU fallback, ...). A metric keeps every sample with its time stamp (`CompileTime`,
`ExecuteTime`, `TransferToDeviceTime`, ...), in nanoseconds for times.
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


def _op_values():
    return {name: v for name, entry in list(_op_counts.items()) if (v := _op_value(entry))}


def sample(name: str, value: float) -> None:
    with _lock:
        samples = _metrics[name]
        samples.append((time.time(), value))
        if len(samples) > 2 * _MAX_SAMPLES:
            del samples[:-_MAX_SAMPLES]
        _counters["__samples__" + name] += 1
        _counters["__sum__" + name] += value


@contextlib.contextmanager
def timed(name: str):
    start = time.perf_counter_ns()
    try:
        yield
    finally:
        sample(name, time.perf_counter_ns() - start)


def counter_names():
    return sorted([k for k, v in _counters.items() if not k.startswith("__") and v] +
                  list(_op_values()))


def counter_value(name: str):
    entry = _op_counts.get(name)
    if entry is not None:
        return _op_value(entry) or None
    return _counters.get(name) or None


def fallback_counters():
    """The counters of the ops that ran through the CPU fallback (`aten::NAME`)."""
    return [n for n in counter_names() if n.startswith("aten::")]


def metric_names():
    return sorted(_metrics)


def metric_data(name: str):
    """(total number of samples, sum of all samples, recent samples) or None."""
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


def clear_metrics() -> None:
    with _lock:
        _metrics.clear()
        for k in [k for k in _counters if k.startswith("__")]:
            del _counters[k]


def _format_time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3f}{unit}"
    return f"{ns:.0f}ns"


def metrics_report() -> str:
    lines = []
    for name in metric_names():
        total, acc, samples = metric_data(name)
        values = sorted(v for _, v in samples)
        fmt = _format_time if name.endswith("Time") else (lambda v: f"{v:g}")
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
    return "\n".join(lines) + "\n"


def short_metrics_report(counter_names_=None, metric_names_=None) -> str:
    """The named counters and metrics (torch_xla's short list when not given: compile and
    execute times, transfers, CachedCompile and MarkStep), in the full report's format, then
    the CPU fallbacks' counters (`aten::NAME`), always."""
    metric_names_ = metric_names_ or ["CompileTime", "ExecuteTime", "ExecuteReplicatedTime",
                                      "TransferToDeviceTime", "TransferFromDeviceTime"]
    counter_names_ = counter_names_ or ["CachedCompile", "MarkStep", "DynamoSyncInputExecuteTime"]
    lines = []
    for name in metric_names_:
        data = metric_data(name)
        if data:
            lines.append(f"Metric: {name}\n  TotalSamples: {data[0]}\n  Accumulator: {_format_time(data[1])}")
    fallbacks = [n for n in fallback_counters() if n not in counter_names_]
    for name in list(counter_names_) + fallbacks:
        if _counters.get(name):
            lines.append(f"Counter: {name}\n  Value: {counter_value(name)}")
    return "\n".join(lines) + "\n"
