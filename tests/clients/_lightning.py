"""What the Lightning tests fit: a LightningModule on a regression, its data, the weights
plain SGD on the CPU reaches, and (run as a script) a fit through XLAStrategy on N devices
in a fresh process, since Lightning forks its replicas from the process that fits."""
import json
import os
import sys

import torch

SAMPLES, EPOCHS = 64, 4


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 4, generator=g)
    return x, x.sum(1, keepdim=True) - 1.0


def loader(world):
    """Batches of SAMPLES / world rows: each replica's one batch of an epoch, and so every
    step covers all the rows, whichever way Lightning's sampler deals them out."""
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data()), batch_size=SAMPLES // world)


def module():
    import lightning.pytorch as L

    class Regression(L.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, index):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Regression()


def reference_weights():
    """Full-batch gradient descent on the CPU, EPOCHS steps: what one device, or several
    replicas averaging their gradients (each with its share of the rows), must reach."""
    torch.manual_seed(0)
    net, (x, y) = torch.nn.Linear(4, 1), data()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(EPOCHS):
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
        opt.zero_grad()
    return {"net.weight": net.weight.detach(), "net.bias": net.bias.detach()}


def tell_device_count(n):
    """Lightning counts TPU chips to decide whether XLA is usable (0 on a host without
    TPUs); this tells it `n` devices instead. Nothing else about XLA is changed."""
    from lightning.fabric.accelerators.xla import XLAAccelerator
    XLAAccelerator.auto_device_count = staticmethod(lambda: n)
    XLAAccelerator.is_available.cache_clear()


def fit(accelerator, devices, root):
    """Fits the module, saves a checkpoint; returns the strategy's and accelerator's class
    names and the checkpoint's path."""
    import lightning.pytorch as L
    trainer = L.Trainer(accelerator=accelerator, devices=devices, max_epochs=EPOCHS, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=root)
    trainer.fit(module(), loader(devices))
    path = os.path.join(root, "final.ckpt")
    trainer.save_checkpoint(path)
    return {"strategy": type(trainer.strategy).__name__, "accelerator": type(trainer.accelerator).__name__,
            "checkpoint": path}


if __name__ == "__main__":
    count, root = int(sys.argv[1]), sys.argv[2]
    tell_device_count(count)
    result = fit("tpu", count, root)
    with open(os.path.join(root, "result.json"), "w") as f:
        json.dump(result, f)
