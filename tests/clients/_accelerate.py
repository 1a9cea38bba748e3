"""What the accelerate tests run in each replica (this process, or one of torch_xla.launch's),
and the weights plain SGD on the CPU reaches on the same data."""
import json
import os

import torch

STEPS_DATA, BATCH = 64, 8


def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(STEPS_DATA, 4, generator=g)
    return x, x.sum(1, keepdim=True) + 0.5


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def reference_weights(world, epochs=2):
    """SGD on the CPU over global batches of world * BATCH rows: what data parallelism over
    `world` replicas with accelerate's sharding (replica r takes batch r of each group of
    `world`) must reach."""
    net, (x, y) = model(), data()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    step = world * BATCH
    for _ in range(epochs):
        for i in range(0, STEPS_DATA, step):
            torch.nn.functional.mse_loss(net(x[i:i + step]), y[i:i + step]).backward()
            opt.step()
            opt.zero_grad()
    return [p.detach().tolist() for p in net.parameters()]


def train(out_dir, epochs=2, safe_serialization=False):
    """Accelerator(), prepare, a loop with accelerator.backward and gather, save_state and
    load_state; returns what a test checks."""
    from accelerate import Accelerator
    acc = Accelerator()
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data()), batch_size=BATCH)
    net, opt, loader = acc.prepare(net, opt, loader)
    gathered = []
    for _ in range(epochs):
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(net(xb), yb)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            gathered.append(acc.gather(loss.detach()).cpu().tolist())
    trained = [p.detach().cpu().clone() for p in net.parameters()]
    acc.save_state(out_dir, safe_serialization=safe_serialization)
    acc.wait_for_everyone()  # the main process writes the model: load once it has
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    acc.load_state(out_dir)
    return {"device": str(acc.device), "processes": acc.num_processes, "index": acc.process_index,
            "gathered": gathered, "weights": [t.tolist() for t in trained],
            "restored": all(torch.equal(t, p.detach().cpu()) for t, p in zip(trained, net.parameters())),
            "files": sorted(os.listdir(out_dir))}


def replica(index, out_dir):
    """A replica of torch_xla.launch: trains, writes its result as JSON."""
    result = train(os.path.join(out_dir, "state"))
    with open(os.path.join(out_dir, f"replica{index}.json"), "w") as f:
        json.dump(result, f)
