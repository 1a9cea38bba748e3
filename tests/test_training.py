"""Training on the device from the same weights as on the CPU: same losses, no recompiles."""
import copy

import pytest
import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, compiles


def _mlp():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 5))


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 3 * 3, 5)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = nn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def _train(model, device, batches, steps):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, counts = [], []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        xm.optimizer_step(opt, barrier=True) if device != "cpu" else opt.step()
        losses.append(loss.item())
        counts.append(compiles())
    return losses, counts, model


@pytest.mark.parametrize("make,shape", [(_mlp, (16, 20)), (_CNN, (8, 3, 16, 16))], ids=["mlp", "cnn"])
def test_training_matches_cpu_without_recompiling(dev, make, shape):
    torch.manual_seed(0)
    model = make()
    batches = [(torch.randn(*shape), torch.randint(0, 5, (shape[0],))) for _ in range(4)]
    cpu_losses, _, cpu_model = _train(copy.deepcopy(model), "cpu", batches, 20)
    xla_losses, counts, xla_model = _train(copy.deepcopy(model), dev, batches, 20)
    torch.testing.assert_close(torch.tensor(xla_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    assert counts[2] == counts[-1], f"recompiled after step 3: {counts}"
    assert cpu_losses[-1] < cpu_losses[0]
    assert_same(xla_model.state_dict(), cpu_model.state_dict(), rtol=1e-3, atol=1e-4)
