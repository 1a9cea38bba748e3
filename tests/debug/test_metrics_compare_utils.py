"""torch_xla.debug.metrics_compare_utils: reports as numbers (durations in seconds, sizes in
megabytes), and a report checked against earlier ones."""
import pytest
import torch

import torch_xla.debug.metrics as met
import torch_xla.debug.metrics_compare_utils as mcu

REPORT = """Metric: TransferToDeviceTime
  TotalSamples: 3
  Accumulator: 01m29s615ms
  Rate: 24.5 / second
  Percentiles: 1%=05m003ms; 50%=1.5us; 99%=2d01h
Metric: InboundData
  TotalSamples: 2
  Accumulator: 1.5GB
  Percentiles: 1%=393.00KB; 99%=12
Counter: CachedSyncTensors
  Value: 40
some other text
"""


def test_a_report_is_numbers_with_their_units():
    points = mcu.parse_metrics_report(REPORT)
    assert points == pytest.approx({
        "TransferToDeviceTime__TotalSamples": 3.0,
        "TransferToDeviceTime__Accumulator_sec": 89.615,
        "TransferToDeviceTime__Percentile_1_sec": 300.003,
        "TransferToDeviceTime__Percentile_50_sec": 1.5e-6,
        "TransferToDeviceTime__Percentile_99_sec": 2 * 86400 + 3600,
        "InboundData__TotalSamples": 2.0,
        "InboundData__Accumulator_mb": 1500.0,
        "InboundData__Percentile_1_mb": 0.393,
        "InboundData__Percentile_99": 12.0,
        "CachedSyncTensors__Value": 40})
    assert mcu.parse_metrics_report(REPORT, dehumanize=False)["InboundData__Accumulator_mb"] == (1500.0, "1.5GB")
    with pytest.raises(ValueError, match="12parsecs"):
        mcu.parse_metrics_report("Metric: X\n  TotalSamples: 1\n  Accumulator: 12parsecs\n")


def test_this_runtimes_report_parses(dev):
    met.clear_all()
    assert met.metrics_report() == ""
    (torch.randn(4, 3, device=dev).flip(0) * 7).cpu()
    points = mcu.get_data_points_from_metrics_reports([met.metrics_report()])
    assert points["CompileTime__TotalSamples"] == [1.0]
    assert points["CompileTime__Percentile_99_sec"][0] > 0
    assert points["xla::flip__Value"] == [met.counter_value("xla::flip")]


def test_a_report_is_checked_against_the_earlier_ones():
    def report(compiles, fallbacks=""):
        return f"Counter: UncachedCompile\n  Value: {compiles}\n{fallbacks}"

    earlier = mcu.get_data_points_from_metrics_reports([report(2), report(2), report(5)])
    assert earlier["UncachedCompile__Value"] == [2, 2, 5]
    assert mcu.compare_metrics(earlier, report(5)) == ""  # within mean + 2 stddev
    assert mcu.compare_metrics(earlier, report(9)) == (
        "UncachedCompile__Value failed its expression check. Expression: v <= v_mean + "
        "(v_stddev * 2.0).  Mean: 3.0.  Stddev: 1.4142135623730951.  Actual Value: 9\n")
    strict = {"base_expression": "True", "UncachedCompile__Value_expression": "v == v_mean"}
    assert mcu.compare_metrics(earlier, report(5), strict).startswith("UncachedCompile__Value failed")
    new_fallback = report(2, "Counter: aten::nonzero\n  Value: 3\n")
    assert mcu.compare_metrics(earlier, new_fallback) == "Found new aten counter: aten::nonzero__Value: 3\n"
