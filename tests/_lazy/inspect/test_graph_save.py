"""XLA_SAVE_TENSORS_FILE: each synced graph and each run of a torch.compile graph appended
to `<file>.<ordinal>` in torch_xla's record layout, in XLA_SAVE_TENSORS_FMT."""
import re

import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm


def _records(path):
    """(name, body) of each record in the file."""
    text = path.read_text()
    return re.findall(r"^\[(\w+)\]\n(.*?## END_GRAPH\n)", text, re.S | re.M)


def _hash(body):
    return re.search(r"^Graph Hash: (\w+)$", body, re.M).group(1)


def _step(dev, n):
    a = torch.randn(n, 3, device=dev)
    return ((a @ a.T).relu() + 1).sum()


@pytest.fixture
def saved(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_SAVE_TENSORS_FILE", str(tmp_path / "graphs.txt"))
    return tmp_path / "graphs.txt.0"


def test_each_sync_appends_a_record_whose_hash_names_its_graph(dev, saved):
    xm.mark_step()
    for n in (4, 4, 5):
        _step(dev, n).item()
    records = _records(saved)
    assert [name for name, _ in records] == ["ScheduleSyncTensorsGraph"] * 3
    hashes = [_hash(body) for _, body in records]
    assert hashes[0] == hashes[1] != hashes[2]  # other data, same graph; another shape
    body = records[0][1]
    # the sync's Python frames, innermost first: this test's own line among them
    frames = body.split("\n\n")[0].splitlines()
    assert frames[0] == "TensorsGraphInfo:" and any("test_graph_save.py" in f for f in frames)
    assert re.search(r"^Root Hashes: \(\w+\)$", body, re.M)
    graph = body.split("## BEGIN_GRAPH\n")[1]
    assert graph.startswith("IR {") and "aten::mm" in graph and "aten::sum" in graph


def test_hlo_format_holds_the_program(dev, saved, monkeypatch):
    monkeypatch.setenv("XLA_SAVE_TENSORS_FMT", "hlo")
    _step(dev, 3).item()
    (body,) = [b for _, b in _records(saved)]
    assert re.search(r"^HloModule ", body, re.M) and " dot(" in body


def test_an_unknown_format_is_refused(dev, saved, monkeypatch):
    monkeypatch.setenv("XLA_SAVE_TENSORS_FMT", "png")
    with pytest.raises(ValueError, match="XLA_SAVE_TENSORS_FMT='png'"):
        _step(dev, 3).item()


def test_a_compiled_graph_is_recorded_at_each_run(dev, saved):
    @torch.compile(backend="openxla")
    def f(x, y):
        return torch.cos(x) + torch.sin(y)

    x, y = torch.randn(4, device=dev), torch.randn(4, device=dev)
    xm.mark_step()
    f(x, y)
    f(x, y)
    dynamo = [body for name, body in _records(saved) if name == "dynamo"]
    assert len(dynamo) == 2 and dynamo[0] == dynamo[1]
    assert "torch.ops.aten.cos.default" in dynamo[0]


def test_nothing_is_written_without_the_variable(dev, tmp_path, monkeypatch):
    monkeypatch.delenv("XLA_SAVE_TENSORS_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    _step(dev, 3).item()
    torch_xla.sync()
    assert list(tmp_path.iterdir()) == []
