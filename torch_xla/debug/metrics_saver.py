"""torch_xla.debug.metrics_saver: the metrics report appended to XLA_METRICS_FILE at the end
of every step (`torch_xla.sync`, `xm.mark_step`), as `[MetricsData; step=N]` and the report.

XLA_METRICS_FILE names a file (with `.<local ordinal>` appended where the runtime has
several replicas), or STDOUT or STDERR. The steps are counted per thread.
"""
import os
import sys
import threading

import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

_file_lock = threading.Lock()
_thread = threading.local()


def _metrics_file():
    path = os.environ.get("XLA_METRICS_FILE")
    if path is not None and path not in ("STDOUT", "STDERR") and xr.world_size() > 1:
        path = f"{path}.{xr.local_ordinal()}"
    return path


def save_metrics(metrics_file=None) -> None:
    """Appends this step's metrics report to `metrics_file` (default: XLA_METRICS_FILE's;
    nothing when neither is given)."""
    metrics_file = metrics_file or _metrics_file()
    if metrics_file is None:
        return
    step = getattr(_thread, "step", 0)
    _thread.step = step + 1
    data = f"[MetricsData; step={step}]\n{met.metrics_report()}\n"
    if metrics_file == "STDOUT":
        print(data)
    elif metrics_file == "STDERR":
        print(data, file=sys.stderr)
    else:
        with _file_lock, open(metrics_file, "a") as f:
            f.write(data)
