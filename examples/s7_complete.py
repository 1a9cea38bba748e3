# The seed's complete example (tutorial section 7): one device, then all devices.
import torch
import torch.nn as nn
import torch.optim as optim
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.distributed.xla_multiprocessing as xmp
from _data import train_loader


class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 2)

    def forward(self, x):
        return self.fc(x)


def train_single_device():
    device = xm.xla_device()
    model = SimpleModel().train().to(device)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01)

    for data, target in train_loader:
        optimizer.zero_grad()
        data = data.to(device)
        target = target.to(device)
        output = model(data)
        loss = loss_fn(output, target)
        loss.backward()
        xm.optimizer_step(optimizer, barrier=True)
    print(f"single device: last loss {loss.item():.4f}")


def _mp_fn(index):
    device = xm.xla_device()
    para_loader = pl.ParallelLoader(train_loader, [device])
    model = SimpleModel().train().to(device)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01)

    for data, target in para_loader.per_device_loader(device):
        optimizer.zero_grad()
        output = model(data)
        loss = loss_fn(output, target)
        loss.backward()
        xm.optimizer_step(optimizer)
    print(f"process {index}: last loss {loss.item():.4f}")


if __name__ == '__main__':
    train_single_device()
    xmp.spawn(_mp_fn, args=())
