"""torch_xla.debug.model_comparator: a model's saved intermediates from a CPU run and an XLA
run agree; a changed one is reported."""
import torch

import torch_xla.debug.model_comparator as mc


def _forward(x):
    mc.save("input", x)
    y = torch.relu(x @ x.T)
    mc.save(None, y)
    return mc.save("out", y.sum(1))


def test_cpu_and_xla_runs_agree_and_a_change_is_reported(dev, tmp_path):
    x = torch.randn(4, 3)
    mc.configure(tmp_path / "cpu")
    _forward(x)
    mc.configure(tmp_path / "xla")
    _forward(x.to(dev))
    assert mc.compare(tmp_path / "cpu", tmp_path / "xla", rtol=1e-4, atol=1e-5) == ""
    mc.configure(tmp_path / "other")
    _forward(x + 1)
    report = mc.compare(tmp_path / "cpu", tmp_path / "other")
    assert 'Changes in saved tensor "input.0"' in report and "out.0" in report
