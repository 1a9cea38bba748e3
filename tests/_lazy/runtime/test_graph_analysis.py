"""PT_XLA_DEBUG_LEVEL / PT_XLA_DEBUG_FILE: torch_xla's analysis of each graph compiled and
run, in its layout, with the cause of each as torch_xla names it."""
import re

import pytest
import torch

import torch_xla
import torch_xla.debug.profiler as xp
import torch_xla.distributed.parallel_loader as pl


def _blocks(text):
    """(kind, cause, name, hash, inputs, outputs, frames) of each analysis block."""
    found = []
    for m in re.finditer(r"^(Compilation|Execution) Analysis: \1 Cause\n(.*?)^\1 Analysis: -{80}$",
                         text, re.M | re.S):
        kind, body = m.group(1), m.group(2)
        field = lambda name: (re.search(rf"  {name}: (.*)", body) or [None, ""])[1]  # noqa: E731
        frames = body.split("Python Frame Triggered Execution: \n")[1].splitlines()
        found.append((kind, body.splitlines()[0].split(": ", 1)[1].strip(), field("Graph Name"),
                      field("Graph Hash"), int(field("Number of Graph Inputs")),
                      int(field("Number of Graph Outputs")),
                      [f.split(": ", 1)[1].strip() for f in frames]))
    return found


@pytest.fixture
def analysis(dev, monkeypatch, tmp_path):
    torch_xla.sync()
    log = tmp_path / "analysis.txt"
    monkeypatch.setenv("PT_XLA_DEBUG_LEVEL", "2")
    monkeypatch.setenv("PT_XLA_DEBUG_FILE", str(log))

    def read():
        text = log.read_text() if log.exists() else ""
        log.write_text("")
        return text
    return read


def test_a_sync_is_compiled_then_run_and_each_says_so(dev, analysis):
    t = torch.randn(3, 7, device=dev)
    torch_xla.sync()
    text = analysis()
    (compiled, ran) = _blocks(text)
    assert compiled[:2] == ("Compilation", "user torch_xla.sync")
    assert ran[:2] == ("Execution", "user torch_xla.sync")
    assert compiled[3] == ran[3] and compiled[4:6] == (1, 1)  # the seed in, the tensor out
    assert compiled[6][0].startswith("sync (") and "torch_xla.py:" in compiled[6][0]
    assert any("test_graph_analysis.py:" in f for f in compiled[6])
    assert "Post Compilation Analysis: Graph output size: 0.000000 GB\n" in text
    t = torch.randn(3, 7, device=dev)
    torch_xla.sync()
    assert [b[:2] for b in _blocks(analysis())] == [("Execution", "user torch_xla.sync")]  # cached


def test_the_causes_torch_xla_names(dev, analysis):
    t = torch.randn(5, 3, device=dev)
    torch_xla.sync()
    analysis()
    with xp.StepTrace("step"):
        u = t * 2
    assert {b[1] for b in _blocks(analysis())} == {"torch_xla.sync when exiting a profiler StepTrace region"}
    assert (u * 3).sum().item() == pytest.approx((t * 6).sum().item())
    causes = {b[1] for b in _blocks(analysis())}
    assert causes == {"most likely user code trying to access tensor value before torch_xla.sync"}
    pending = t + 5
    torch_xla.compile(lambda x: x - 11, name="shifted")(pending)
    named = [(b[0], b[1], b[2]) for b in _blocks(analysis())]
    assert named == [
        ("Compilation", "torch_xla.compile clear the pending graph prior calling the target function",
         "shifted_clear_pending"),
        ("Execution", "torch_xla.compile clear the pending graph prior calling the target function",
         "shifted_clear_pending"),
        ("Compilation", "torch_xla.compile", "shifted"), ("Execution", "torch_xla.compile", "shifted")]
    loader = pl.MpDeviceLoader([(torch.ones(2, 4),) for _ in range(3)], dev)
    for (batch,) in loader:
        out = batch + 100  # noqa: F841  (live until the loader's step end)
    causes = [b[:2] for b in _blocks(analysis())]
    assert causes[0] == ("Compilation", "torch_xla.sync in parallel loader at step end")
    assert causes[1:] == [("Execution", "torch_xla.sync in parallel loader at step end")] * 3


def test_dynamo_graphs_and_the_frame_limit(dev, analysis, monkeypatch):
    t = torch.randn(2, 9, device=dev)
    torch_xla.sync()
    analysis()
    compiled = torch.compile(lambda x: x * 100, backend="openxla")
    compiled(t)
    compiled(t)
    blocks = _blocks(analysis())
    assert [b[:2] for b in blocks] == [("Compilation", "dynamo is compiling a FX graph to HLO"),
                                       ("Execution", "dynamo is executing a compiled program"),
                                       ("Execution", "dynamo is executing a compiled program")]
    # the 100 is a parameter of the program, as torch_xla makes a scalar device data
    assert [b[4:6] for b in blocks] == [(2, 1)] * 3
    monkeypatch.setenv("PT_XLA_DEBUG_MAX_FRAME", "2")
    torch.randn(2, 9, device=dev).sum().item()
    frames = _blocks(analysis())[0][6]
    assert len(frames) == 3 and frames[2] == ".........."


def test_eager_ops_and_level_zero_write_nothing(dev, analysis, monkeypatch):
    with torch_xla.experimental.eager_mode_context(True):
        torch.randn(4, 6, device=dev).cos()
        torch_xla.sync()
    assert analysis() == ""
    monkeypatch.setenv("PT_XLA_DEBUG_LEVEL", "0")
    torch.randn(4, 6, device=dev).sin().sum().item()
    assert analysis() == ""
