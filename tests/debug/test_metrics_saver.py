"""XLA_METRICS_FILE: the metrics report appended at the end of every step."""
import re

import torch

import torch_xla
import torch_xla.debug.metrics_saver as ms


def test_each_step_appends_the_report(dev, tmp_path, monkeypatch):
    path = tmp_path / "metrics.txt"
    monkeypatch.setenv("XLA_METRICS_FILE", str(path))
    t = torch.ones(3, device=dev)
    for _ in range(2):
        t = t * 2
        torch_xla.sync()
    reports = re.split(r"^\[MetricsData; step=(\d+)\]\n", path.read_text(), flags=re.M)[1:]
    steps, bodies = reports[::2], reports[1::2]
    assert len(steps) == 2 and int(steps[1]) == int(steps[0]) + 1
    assert all("Metric: ExecuteTime" in b and "Counter: MarkStep" in b for b in bodies)


def test_a_file_given_and_the_standard_streams(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("XLA_METRICS_FILE", raising=False)
    ms.save_metrics()  # no file: nothing
    ms.save_metrics(str(tmp_path / "m.txt"))
    assert (tmp_path / "m.txt").read_text().startswith("[MetricsData; step=")
    monkeypatch.setenv("XLA_METRICS_FILE", "STDERR")
    ms.save_metrics()
    assert "[MetricsData; step=" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [tmp_path / "m.txt"]
