"""torch_xla.debug.metrics: what the engine counted and timed."""
from torch_xla._lazy import counters as _counters
from torch_xla._lazy.counters import (  # noqa: F401
    clear_counters, clear_metrics, counter_names, counter_value, metric_data, metric_names,
    metrics_report)


def short_metrics_report(counter_names: list = None, metric_names: list = None) -> str:
    """The counters and metrics named (by default compile and execute times, transfers,
    CachedCompile and MarkStep), and every CPU fallback's counter."""
    return _counters.short_metrics_report(counter_names, metric_names)


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def executed_fallback_ops() -> list:
    """The ATen ops that ran through the CPU fallback since the counters were cleared."""
    return _counters.fallback_counters()
