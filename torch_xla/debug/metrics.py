"""torch_xla.debug.metrics: what the engine counted and timed."""
from torch_xla._lazy.metrics import (  # noqa: F401
    clear_counters, clear_metrics, counter_names, counter_value, metric_data, metric_names,
    metrics_report, short_metrics_report)


def clear_all() -> None:
    clear_counters()
    clear_metrics()
