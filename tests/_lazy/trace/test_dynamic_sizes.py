"""Bounded dynamic sizes (`XLA_EXPERIMENTAL=nonzero:masked_select`): nonzero and
masked_select give tensors padded to a bound whose sizes are SymInts the program computes;
later ops keep them symbolic, reductions over them count the real elements, and a model
trained on data filtered by them compiles once for every real size."""
import pytest
import torch
import torch.nn.functional as F

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.compare import assert_same, compiles


@pytest.fixture(autouse=True)
def bounded(monkeypatch):
    monkeypatch.setenv("XLA_EXPERIMENTAL", "nonzero:masked_select")
    # what torch_xla's users enable too: ops given a SymInt size (expand(n)) go through
    # PyTorch's Python decompositions
    guard = torch._C._EnablePythonDispatcher()
    yield
    del guard


def _data(step, n=16, features=4):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(n, features, generator=g)
    y = torch.randn(n, 1, generator=g)
    keep = torch.rand(n, generator=g) < (0.2 + 0.6 * (step % 5) / 4)  # 3 to 13 rows of 16
    keep[step % n] = True
    return x, y, keep


def test_nonzero_size_is_a_bounded_symint(dev):
    t = torch.tensor([[1, 0, 0, 5, 0, 6]], device=dev)
    rows = torch.nonzero(t)
    assert isinstance(rows.shape[0], torch.SymInt) and str(rows.shape[0]) == "<=6"
    assert rows.shape[1] == 2 and isinstance(rows.shape[1], int)
    assert "s64[<=6,2]" in torch_xla._XLAC._get_xla_tensors_text([rows])
    assert_same(rows, torch.nonzero(t.cpu()))
    assert int(rows.shape[0] + 1) == 4 and str(rows.shape[0] + 1) == "<=7"


def test_ops_keep_the_size_and_reduce_over_the_real_elements(dev):
    x = torch.randn(8, 3)
    keep = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0], dtype=torch.bool)
    xd = x.to(dev)
    rows = torch.nonzero(keep.to(dev)).squeeze(1)
    picked = xd.index_select(0, rows)
    assert str(picked.shape[0]) == "<=8"
    expected = x[keep]
    for fn in (lambda t: t * 2 + 1, lambda t: t.sum(0), lambda t: t.mean(), lambda t: t.amax(0),
               lambda t: t.amin(), lambda t: t.softmax(0), lambda t: t.t() @ t,
               lambda t: F.mse_loss(t, torch.zeros_like(t)), lambda t: t.sort(0).values):
        assert_same(fn(picked), fn(expected))
    selected = torch.masked_select(xd, keep.to(dev)[:, None])
    assert_same(selected.view(-1, 3), x[keep])


def test_sizes_that_must_agree_are_checked_on_the_real_sizes(dev):
    a = torch.nonzero(torch.tensor([1, 0, 3, 5, 0, 6], device=dev))
    b = torch.nonzero(torch.tensor([1, 1, 0, 1, 0, 1], device=dev))
    c = torch.nonzero(torch.tensor([1, 1, 0, 0, 0, 0], device=dev))
    assert_same(a + b, torch.tensor([[0], [2], [3], [5]]) + torch.tensor([[0], [1], [3], [5]]))
    with pytest.raises(RuntimeError):
        a + c
    with pytest.raises(RuntimeError):
        a.view(2, 3)


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _train(device, filtered, steps=20):
    torch.manual_seed(0)
    model = _Model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        x, y, keep = (t.to(device) for t in _data(step))
        xs, ys = filtered(x, y, keep)
        loss = F.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if device != "cpu":
            xm.mark_step()
        losses.append(loss.detach().cpu())
    return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]


def _by_nonzero(x, y, keep):
    rows = torch.nonzero(keep).squeeze(1)
    return x.index_select(0, rows), y.index_select(0, rows)


def _by_masked_select(x, y, keep):
    mask = keep[:, None]
    return torch.masked_select(x, mask).view(-1, x.shape[1]), y[torch.nonzero(mask)[:, 0]]


def test_training_on_filtered_batches_compiles_once(dev):
    assert len({int(_data(s)[2].sum()) for s in range(20)}) > 5  # the real sizes vary
    met.clear_all()
    before = compiles()
    losses, params = _train(dev, _by_nonzero)
    assert compiles() - before == 1
    assert not met.counter_value("DynamicSizeRead")
    cpu_losses, cpu_params = _train("cpu", _by_nonzero)
    assert_same(losses, cpu_losses, device="cpu")
    assert_same(params, cpu_params, device="cpu")


def test_training_on_masked_select(dev):
    losses, params = _train(dev, _by_masked_select, steps=6)
    cpu_losses, cpu_params = _train("cpu", _by_masked_select, steps=6)
    assert_same(losses, cpu_losses, device="cpu")
    assert_same(params, cpu_params, device="cpu")
