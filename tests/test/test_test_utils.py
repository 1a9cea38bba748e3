"""torch_xla.test.test_utils: progress lines and TensorBoard scalars, as torch_xla's scripts
print and log them."""
import re
import unittest

import torch

import torch_xla.test.test_utils as xtu


class _Writer:
    def __init__(self):
        self.scalars, self.closed = [], False

    def add_scalar(self, name, value, step):
        self.scalars.append((name, value, step))

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_progress_lines(dev, capsys):
    xtu.print_training_update(dev, 3, 0.123456, 10.5, 9.25, epoch=1)
    xtu.print_test_update(dev, 97.5, epoch=1)
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\| Training Device=xla:0/0 Epoch=1 Step=3 Loss=0\.12346 Rate=10\.50 "
                        r"GlobalRate=9\.25 Time=\d\d:\d\d:\d\d", lines[0])
    assert re.fullmatch(r"\| Test Device=xla:0/0 Epoch=1 Accuracy=97\.50 Time=\d\d:\d\d:\d\d", lines[1])


def test_summary_writes_scalars_and_xla_metrics(dev):
    torch.ones(2, device=dev).cpu()
    writer = _Writer()
    xtu.write_to_summary(writer, 7, {"loss": 0.5}, write_xla_metrics=True)
    names = {name for name, _, _ in writer.scalars}
    assert ("loss", 0.5, 7) in writer.scalars and "aten_ops_sum" in names
    assert "TransferFromDevice" in names and "TransferFromDeviceTime__TotalSamples" in names
    xtu.write_to_summary(None, 1, {"loss": 1.0})
    xtu.close_summary_writer(writer)
    assert writer.closed and xtu.get_summary_writer(None) is None


class _Isolated(unittest.TestCase):
    __test__ = False  # run by the test below, not collected on its own

    @xtu.mp_test
    def test_passes(self):
        assert torch.ones(1).item() == 1.0


def test_mp_test_runs_in_a_process_of_its_own():
    result = unittest.TestResult()
    _Isolated("test_passes").run(result)
    assert result.wasSuccessful(), result.errors + result.failures
