"""graph_saver.save_tensors_graph: the pending graph in the format SAVE_GRAPH_FMT names,
one numbered file per call."""
import os

import pytest
import torch

from torch_xla.debug import graph_saver


def test_files_per_format(dev, tmp_path, monkeypatch):
    t = torch.ones(3, device=dev).exp() + 1
    written = {}
    formats = (("text", "aten::exp"), ("dot", "digraph"), ("hlo", "HloModule"))
    for k, (fmt, marker) in enumerate(formats):  # numbered per name, whatever the format
        monkeypatch.setenv("SAVE_GRAPH_FMT", fmt)
        for _ in range(2):
            graph_saver.save_tensors_graph(str(tmp_path), "g", [t])
        names = sorted(n for n in os.listdir(tmp_path) if n.endswith("." + fmt))
        assert [n.rsplit("-", 1)[1] for n in names] == [f"{2 * k}.{fmt}", f"{2 * k + 1}.{fmt}"]
        written[fmt] = (tmp_path / names[-1]).read_text()
        assert marker in written[fmt]
    monkeypatch.setenv("SAVE_GRAPH_FMT", "png")
    with pytest.raises(RuntimeError, match="Invalid save graph format: png"):
        graph_saver.save_tensors_graph(str(tmp_path), "g", [t])
