"""torch_xla.debug.metrics: what the engine counted and timed."""
from torch_xla._lazy.base import counters as _counters
from torch_xla._lazy.base.counters import (clear_counters, clear_metrics, counter_names,
                                           counter_value, metric_data, metric_names, metrics_report)  # noqa: F401


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
