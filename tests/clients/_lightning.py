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


def fabric_fsdp(count, root):
    """Fabric with XLAFSDPStrategy on `count` devices: the regression's net (its Linear
    auto-wrapped, the root around it) trained EPOCHS full-batch steps; each replica saves
    its shards as torch_xla documents (`fabric.save` races in Lightning 2.6: a replica can
    write its shard before another checks that the directory is empty). Returns the
    strategy's class name and the shard files' prefix."""
    import lightning.fabric as lf
    from lightning.fabric.strategies import XLAFSDPStrategy
    prefix = os.path.join(root, "shard-")
    fabric = lf.Fabric(accelerator="tpu", devices=count,
                       strategy=XLAFSDPStrategy(auto_wrap_policy={torch.nn.Linear}))
    fabric.launch(_fabric_fit, prefix)
    return {"strategy": type(fabric.strategy).__name__, "prefix": prefix}


def _fabric_fit(fabric, prefix):
    import torch_xla.core.xla_model as xm
    torch.manual_seed(0)
    net = torch.nn.Sequential()
    net.add_module("net", torch.nn.Linear(4, 1))
    model = fabric.setup_module(net)
    opt = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))
    data = fabric.setup_dataloaders(loader(fabric.world_size))
    for _ in range(EPOCHS):
        for x, y in data:
            opt.zero_grad()
            fabric.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
    wrapped = model._forward_module
    xm.save({"model": wrapped.state_dict(), "shard_metadata": wrapped.get_shard_metadata(),
             "class": type(wrapped).__name__},
            f"{prefix}{fabric.global_rank}-of-{fabric.world_size}.pth", master_only=False)


if __name__ == "__main__":
    mode, count, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tell_device_count(count)
    result = fabric_fsdp(count, root) if mode == "fsdp" else fit("tpu", count, root)
    with open(os.path.join(root, "result.json"), "w") as f:
        json.dump(result, f)
