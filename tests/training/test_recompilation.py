"""Models whose graph changes from step to step: they train like on the CPU, the metrics
count the recompilations, and PT_XLA_DEBUG=1 says why each program was compiled and which
user line asked for it."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, compiles


class _Branchy(nn.Module):
    """Takes a different path when its hidden activations are large (a Python `if` on a
    tensor's value: the value is read on the host, and each path is its own graph)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2)
        self.taken = []

    def forward(self, x):
        h = torch.tanh(self.a(x))
        self.taken.append(bool(h.abs().mean() > 0.45))
        if self.taken[-1]:
            h = torch.relu(self.b(h))
        return self.c(h)


def _batches():
    g = torch.Generator().manual_seed(0)
    sizes = [3, 5, 4, 5, 6, 3, 7, 4]  # a new batch size most steps
    return [(torch.randn(n, 4, generator=g) * (1 + i % 3), torch.randint(0, 2, (n,), generator=g))
            for i, n in enumerate(sizes)]


def _train(model, device, batches):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, counts = [], []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        xm.optimizer_step(opt, barrier=True) if device != "cpu" else opt.step()
        losses.append(loss.item())
        counts.append(compiles())
    return losses, counts, model


def test_changing_graph_trains_like_cpu_and_recompiles(dev):
    torch.manual_seed(0)
    model, batches = _Branchy(), _batches() * 2
    cpu_losses, _, cpu_model = _train(copy.deepcopy(model), "cpu", batches)
    losses, counts, xla_model = _train(copy.deepcopy(model), dev, batches)
    assert_same(torch.tensor(losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-6, device="cpu")
    assert xla_model.taken == cpu_model.taken and len(set(cpu_model.taken)) == 2, cpu_model.taken
    assert_same(list(xla_model.parameters()), list(cpu_model.parameters()), rtol=1e-4, atol=1e-5)
    first_pass = counts[len(batches) // 2 - 1]
    assert first_pass >= 6, counts  # new shapes and branches compiled during the first pass
    # The second pass over the same batches (same shapes; branches taken as before or
    # already seen) mostly reuses the programs of the first.
    assert counts[-1] - first_pass < first_pass - counts[0], counts


def test_debug_explains_new_input_shape(dev, monkeypatch, capsys):
    monkeypatch.setenv("PT_XLA_DEBUG", "1")
    model = nn.Linear(4, 3).to(dev)
    for n in (13, 13, 11):
        x = torch.randn(n, 4).to(dev)
        out = model(x).sum()
        xm.mark_step()  # the line that runs each graph
    err = capsys.readouterr().err
    reports = err.split("Compilation Analysis: ====")
    assert err.count("Compilation Cause") == 2, err  # the second step reused the first program
    last = [r for r in reports if "Compilation Cause" in r][-1]
    assert "input shapes or dtypes differ" in last, last
    assert "float32[13, 4] -> float32[11, 4]" in last, last
    assert "user torch_xla.sync" in last and "test_recompilation.py:" in last, last
    assert "xm.mark_step()  # the line that runs each graph" in last, last


def test_debug_explains_graph_change_and_host_read(dev, monkeypatch, capsys):
    monkeypatch.setenv("PT_XLA_DEBUG", "1")
    x = torch.randn(6, 5).to(dev)
    xm.mark_step()
    capsys.readouterr()
    for use_exp in (False, True):
        y = x.exp() if use_exp else x.sin()
        total = y.sum().item()  # the line that reads a value
        assert isinstance(total, float)
    err = capsys.readouterr().err
    reports = [r for r in err.split("Compilation Analysis: ====") if "Compilation Cause" in r]
    assert len(reports) == 2, err
    assert "the graph differs from program" in reports[1], reports[1]
    assert "aten.sin.default" in reports[1] and "aten.exp.default" in reports[1], reports[1]
    assert "most likely user code trying to access tensor value" in reports[1], reports[1]
    assert "total = y.sum().item()  # the line that reads a value" in reports[1], reports[1]


def test_debug_is_silent_without_the_switch(dev, monkeypatch, capsys):
    monkeypatch.delenv("PT_XLA_DEBUG", raising=False)
    torch.randn(3, 3).to(dev).cos().sum().item()
    captured = capsys.readouterr()
    assert "Compilation Analysis" not in captured.err + captured.out
