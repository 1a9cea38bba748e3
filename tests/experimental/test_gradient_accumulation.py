"""gradient_accumulation: the mean loss over the steps, the gradients of that mean added to
`.grad`, carried tensors passed along, the same as a loop on the CPU."""
import pytest
import torch

from torch_xla.experimental.gradient_accumulation import gradient_accumulation
from tests.compare import assert_same


def _model(device):
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1).to(device)


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 5, 3, generator=g), torch.randn(4, 5, 1, generator=g)


def test_matches_accumulating_on_the_cpu(dev):
    x, y = _data()
    cpu = _model("cpu")
    cpu.weight.grad = torch.ones_like(cpu.weight)  # gradients already there are kept, and added to
    total = 0.0
    for i in range(4):
        loss = torch.nn.functional.mse_loss(cpu(x[i]), y[i]) / 4
        loss.backward()
        total += loss.item()
    model = _model(dev)
    model.weight.grad = torch.ones_like(model.weight)
    counter = torch.tensor(0, device=dev)

    def step(xb, yb, count):
        return torch.nn.functional.mse_loss(model(xb), yb), count + 1
    loss, count = gradient_accumulation(step, (x.to(dev), y.to(dev)), model, counter)
    assert loss.dtype == torch.float32 and loss.item() == pytest.approx(total, rel=1e-5)
    assert count.item() == 4
    assert_same(model.weight.grad, cpu.weight.grad)
    assert_same(model.bias.grad, cpu.bias.grad)


def test_inputs_are_checked(dev):
    model = _model(dev)
    with pytest.raises(ValueError, match="cannot be empty"):
        gradient_accumulation(lambda: None, (), model)
    with pytest.raises(ValueError, match="inconsistent first dimension"):
        gradient_accumulation(lambda a, b: None, (torch.ones(2, 1, device=dev), torch.ones(3, 1, device=dev)), model)


def test_a_carried_tensor_changed_in_place_is_carried_through(dev):
    x, y = _data()
    model = _model(dev)
    counter = torch.tensor(0, device=dev)

    def step(xb, yb, count):
        count += 1  # in place, as a loop of plain steps may do
        return torch.nn.functional.mse_loss(model(xb), yb), count
    _, count = gradient_accumulation(step, (x.to(dev), y.to(dev)), model, counter)
    assert count.item() == counter.item() == 4  # the tensor passed in is the one changed
