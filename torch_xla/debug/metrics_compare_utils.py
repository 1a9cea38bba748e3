"""Metrics reports (`metrics.metrics_report()`) as numbers, and a report checked against
earlier ones, as torch_xla's `metrics_compare_utils`: a step that compiles or falls back to
the CPU more than it used to shows up as a line of the difference report.

A report's data points are named `<metric>__<field>[_<unit>]`: `TotalSamples`,
`Accumulator` and `Percentile_<p>` for each metric, with times in seconds (`_sec`) and
sizes in megabytes (`_mb`, decimal), and `<counter>__Value` for each counter.
"""
import collections
import re

import numpy as np

_HEADER = re.compile(r"^(Metric|Counter): (\S+)\s*$")
_FIELD = re.compile(r"^\s+(TotalSamples|Accumulator|Percentiles|Value): (.*?)\s*$")
_PERCENTILE = re.compile(r"([\d.]+)%=(\S+?);?$")
_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_MEGABYTES = {"PB": 1e9, "TB": 1e6, "GB": 1e3, "MB": 1.0, "KB": 1e-3, "B": 1e-6}
_TIME_PART = re.compile(r"([\d.]+)(ms|us|ns|d|h|m|s)")
_SIZE_PART = re.compile(r"([\d.]+)(PB|TB|GB|MB|KB|B)")


def _sum_of_parts(text, part, scale):
    """`text` as the sum of its `<number><unit>` parts, or None if it is not only those."""
    parts = part.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * scale[u] for n, u in parts)


def _number(text):
    """(value, unit suffix) of a report's value: a plain number, a duration (seconds) or a
    size (megabytes)."""
    try:
        return float(text), ""
    except ValueError:
        pass
    seconds = _sum_of_parts(text, _TIME_PART, _SECONDS)
    if seconds is not None:
        return seconds, "_sec"
    megabytes = _sum_of_parts(text, _SIZE_PART, _MEGABYTES)
    if megabytes is not None:
        return megabytes, "_mb"
    raise ValueError(f"Unknown metric_str format: {text}")


def parse_metrics_report(report, dehumanize=True):
    """{data point name: value} of a metrics report; without `dehumanize`, each value is
    (number, the report's text for it)."""
    points = {}
    current, is_counter = None, False
    for line in report.splitlines():
        header = _HEADER.match(line)
        if header:
            is_counter, current = header.group(1) == "Counter", header.group(2)
            continue
        field = _FIELD.match(line) if current is not None else None
        if field is None:
            continue
        name, text = field.groups()
        if is_counter:
            if name == "Value":
                points[f"{current}__Value"] = int(text)
            continue
        if name == "Percentiles":
            values = [_PERCENTILE.match(p.strip()) for p in text.split("; ")]
            entries = [(f"Percentile_{v.group(1)}", v.group(2)) for v in values if v]
        elif name in ("TotalSamples", "Accumulator"):
            entries = [(name, text)]
        else:
            entries = []
        for key, raw in entries:
            value, unit = _number(raw)
            points[f"{current}__{key}{unit}"] = value if dehumanize else (value, raw)
    return points


def get_data_points_from_metrics_reports(metrics_reports):
    """{data point name: [its value in each report, None where a report lacks it]}, in the
    reports' order."""
    points = collections.defaultdict(lambda: [None] * len(metrics_reports))
    for i, report in enumerate(metrics_reports):
        for name, value in parse_metrics_report(report).items():
            points[name][i] = value
    return points


def compare_metrics(data_points, metrics_report,
                    config={"base_expression": "v <= v_mean + (v_stddev * 2.0)"}):
    """The lines of `metrics_report` that fail their check against `data_points` (from
    `get_data_points_from_metrics_reports`): each data point is checked with the Python
    expression `config['<name>_expression']`, else `config['base_expression']`, of `v`
    (its value here), `v_mean` and `v_stddev` (over the earlier reports); a CPU fallback
    counter (`aten::`) the earlier reports lack is reported as new. '' when all pass."""
    lines = []
    for name, v in sorted(parse_metrics_report(metrics_report).items()):
        seen = [x for x in data_points.get(name, ()) if x is not None]
        if not seen:
            if name.startswith("aten::"):
                lines.append(f"Found new aten counter: {name}: {v}\n")
            continue
        mean, stddev = np.mean(seen), np.std(seen)
        expression = config.get(f"{name}_expression", config["base_expression"])
        if not eval(expression, None, {"v": v, "v_mean": mean, "v_stddev": stddev}):
            lines.append(f"{name} failed its expression check. Expression: {expression}.  "
                         f"Mean: {mean}.  Stddev: {stddev}.  Actual Value: {v}\n")
    return "".join(lines)
