"""torch_xla.debug.metrics: what the engine counted and timed."""
from torch_xla._lazy.base import counters as _counters

clear_counters, clear_metrics = _counters.clear_counters, _counters.clear_metrics
counter_names, counter_value = _counters.counter_names, _counters.counter_value
metric_names, metric_data = _counters.metric_names, _counters.metric_data
metrics_report = _counters.metrics_report


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
