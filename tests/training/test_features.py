"""Training features on the device, each against the CPU: learning-rate schedulers,
gradient clipping, zero_grad, gradient accumulation, no_grad, frozen layers, weight tying,
state dicts, and `xm.optimizer_step` on one replica."""
import io

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler as sched

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.conftest import assert_same, compiles


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def _batch(step, n=5):
    g = torch.Generator().manual_seed(step)
    return torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)


def _step(model, device, step):
    x, y = (t.to(device) for t in _batch(step))
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


MODEL_TOL = dict(rtol=1e-5, atol=1e-6)  # parameters after several steps


# ---- learning-rate schedulers ---------------------------------------------------------------

SCHEDULERS = {
    "step": lambda o: sched.StepLR(o, 2, gamma=0.5),
    "multistep": lambda o: sched.MultiStepLR(o, [1, 3], gamma=0.3),
    "exponential": lambda o: sched.ExponentialLR(o, 0.8),
    "cosine": lambda o: sched.CosineAnnealingLR(o, 5),
    "cosine_restarts": lambda o: sched.CosineAnnealingWarmRestarts(o, 2),
    "lambda": lambda o: sched.LambdaLR(o, lambda s: 1 / (s + 1)),
    "multiplicative": lambda o: sched.MultiplicativeLR(o, lambda s: 0.9),
    "linear": lambda o: sched.LinearLR(o, 0.2, total_iters=4),
    "constant": lambda o: sched.ConstantLR(o, 0.5, total_iters=2),
    "polynomial": lambda o: sched.PolynomialLR(o, total_iters=6, power=2.0),
    "one_cycle": lambda o: sched.OneCycleLR(o, max_lr=0.3, total_steps=7),  # cycles momentum too
    "cyclic": lambda o: sched.CyclicLR(o, 0.01, 0.2, step_size_up=2),
    "sequential": lambda o: sched.SequentialLR(o, [sched.ConstantLR(o, 0.5, total_iters=2),
                                                   sched.ExponentialLR(o, 0.9)], milestones=[2]),
    "chained": lambda o: sched.ChainedScheduler([sched.ConstantLR(o, 0.5, total_iters=2),
                                                 sched.ExponentialLR(o, 0.9)]),
    "plateau": lambda o: sched.ReduceLROnPlateau(o, patience=0, factor=0.5),
}
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.1),
}


def _train_scheduled(device, make_opt, make_sched, steps=6):
    model = _model().to(device)
    opt = make_opt(model.parameters())
    scheduler = make_sched(opt)
    counts, lrs = [], []
    for step in range(steps):
        opt.zero_grad()
        loss = _step(model, device, step)
        opt.step()
        if device != "cpu":
            xm.mark_step()
        lrs.append(opt.param_groups[0]["lr"])
        scheduler.step(loss) if isinstance(scheduler, sched.ReduceLROnPlateau) else scheduler.step()
        counts.append(compiles())
    return model, counts, lrs


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
@pytest.mark.parametrize("sched_name", SCHEDULERS)
def test_scheduler_changes_rate_without_recompiling(dev, sched_name, opt_name):
    cpu_model, _, cpu_lrs = _train_scheduled("cpu", OPTIMIZERS[opt_name], SCHEDULERS[sched_name])
    xla_model, counts, lrs = _train_scheduled(dev, OPTIMIZERS[opt_name], SCHEDULERS[sched_name])
    assert lrs == cpu_lrs and len(set(lrs)) > 1, lrs
    assert_same(xla_model.state_dict(), cpu_model.state_dict(), **MODEL_TOL)
    assert counts[1] == counts[-1], f"recompiled when the rate changed: {counts}"


# ---- gradients: clipping, zero_grad, accumulation ------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm(dev, norm_type):
    results = []
    for device in ("cpu", dev):
        model = _model().to(device)
        _step(model, device, 0)
        total = nn.utils.clip_grad_norm_(model.parameters(), 0.1, norm_type=norm_type)
        results.append((total, [p.grad for p in model.parameters()]))
    (cpu_total, cpu_grads), (total, grads) = results
    assert_same(total, cpu_total)
    assert cpu_total > 0.1  # the gradients were clipped
    assert_same(grads, cpu_grads)


def test_clip_grad_norm_foreach_is_refused_by_pytorch(dev):
    """PyTorch's foreach kernels list the devices they support (not XLA), as for optimizers."""
    model = _model().to(dev)
    _step(model, dev, 0)
    with pytest.raises(RuntimeError, match="foreach=True was passed, but can't use the foreach API on xla tensors"):
        nn.utils.clip_grad_norm_(model.parameters(), 0.1, foreach=True)


def test_clip_grad_value_and_nonfinite_error(dev):
    model, cpu_model = _model().to(dev), _model()
    _step(model, dev, 0), _step(cpu_model, "cpu", 0)
    nn.utils.clip_grad_value_(model.parameters(), 0.01)
    nn.utils.clip_grad_value_(cpu_model.parameters(), 0.01)
    assert_same([p.grad for p in model.parameters()], [q.grad for q in cpu_model.parameters()])
    next(model.parameters()).grad[0, 0] = float("nan")
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(dev, set_to_none):
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _step(model, dev, 0)
    opt.zero_grad(set_to_none=set_to_none)
    for p in model.parameters():
        if set_to_none:
            assert p.grad is None
        else:
            assert p.grad.device.type == "xla" and not p.grad.cpu().any()
    _step(model, dev, 1)  # the next gradients are not added to the old ones
    cpu_model = _model()
    _step(cpu_model, "cpu", 1)
    assert_same([p.grad for p in model.parameters()], [q.grad for q in cpu_model.parameters()])


def _train_accumulating(device, steps=4, micro=3):
    model = _model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    counts = []
    for step in range(steps):
        opt.zero_grad()
        for m in range(micro):
            x, y = (t.to(device) for t in _batch(step * micro + m, n=4))
            (F.cross_entropy(model(x), y) / micro).backward()
        xm.optimizer_step(opt, barrier=True) if device != "cpu" else opt.step()
        counts.append(compiles())
    return model, counts


def test_gradient_accumulation(dev):
    cpu_model, _ = _train_accumulating("cpu")
    xla_model, counts = _train_accumulating(dev)
    assert_same(xla_model.state_dict(), cpu_model.state_dict(), **MODEL_TOL)
    assert counts[1] == counts[-1], counts


# ---- no_grad, frozen layers, weight tying -------------------------------------------------------

def test_no_grad(dev):
    model, cpu_model = _model().to(dev), _model()
    x, _ = _batch(0)
    with torch.no_grad():
        out = model(x.to(dev))
        for p in model.parameters():  # a hand-written update step
            p.mul_(0.5)
    assert out.grad_fn is None and not out.requires_grad
    with torch.no_grad():
        expected = cpu_model(x)
        for p in cpu_model.parameters():
            p.mul_(0.5)
    assert_same(out, expected)
    assert_same(model.state_dict(), cpu_model.state_dict(), **MODEL_TOL)
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())


def _train_frozen(device):
    model = _model()
    model[0].requires_grad_(False)
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        _step(model, device, step)
        opt.step()
    return model


def test_frozen_layers(dev):
    initial, cpu_model, xla_model = _model(), _train_frozen("cpu"), _train_frozen(dev)
    assert all(p.grad is None and not p.requires_grad for p in xla_model[0].parameters())
    assert_same(xla_model.state_dict(), cpu_model.state_dict(), **MODEL_TOL)
    assert_same(xla_model[0].weight, initial[0].weight)
    assert not torch.allclose(xla_model[2].weight.cpu(), initial[2].weight)


class _TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.tie_weights()

    def tie_weights(self):
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.embed(tokens)))


def _train_tied(device):
    """As torch_xla documents (and Hugging Face does on XLA), weights are tied again after
    the model moves: `Module.to` makes a new Parameter per reference to an XLA device."""
    torch.manual_seed(0)
    model = _TiedLM().to(device)
    model.tie_weights()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    tokens = torch.arange(8).view(2, 4).to(device)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(tokens).flatten(0, 1), ((tokens + 1) % 10).flatten()).backward()
        opt.step()
    return model


def test_weight_tying(dev):
    cpu_model, xla_model = _train_tied("cpu"), _train_tied(dev)
    assert xla_model.head.weight is xla_model.embed.weight
    assert len(list(xla_model.parameters())) == 1
    assert_same(xla_model.embed.weight, cpu_model.embed.weight, **MODEL_TOL)


# ---- state dicts ---------------------------------------------------------------------------

def _bn_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def _train_steps(model, opt, device, steps, start=0):
    for step in range(start, start + steps):
        opt.zero_grad()
        _step(model, device, step)
        opt.step()
        if device != "cpu":
            xm.mark_step()


def test_state_dict_round_trip_resumes_training_exactly(dev):
    """A model and optimizer saved mid-training (torch.save of their state dicts, moved to
    the CPU by xm.save) and loaded into fresh ones on the device go on exactly like the
    uninterrupted run."""
    model = _bn_model().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    _train_steps(model, opt, dev, 3)
    buf = io.BytesIO()
    xm.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    _train_steps(model, opt, dev, 2, start=3)

    buf.seek(0)
    saved = torch.load(buf)
    assert all(t.device.type == "cpu" for t in saved["model"].values())
    resumed = _bn_model().to(dev)
    resumed.load_state_dict(saved["model"])
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=0.05)
    resumed_opt.load_state_dict(saved["opt"])
    assert resumed_opt.state[next(resumed.parameters())]["exp_avg"].device.type == "xla"
    _train_steps(resumed, resumed_opt, dev, 2, start=3)
    assert_same(resumed.state_dict(), model.state_dict(), rtol=0, atol=0)
    assert resumed[1].num_batches_tracked.item() == 5


def test_transfer_copies(dev):
    """A CPU tensor changed in place after its transfer (a reused batch buffer, a CPU
    model trained on) leaves the device copy as it was, and the other way round."""
    t = torch.zeros(4)
    x = t.to(dev)
    t.add_(1)
    y = x.cpu()
    y.add_(1)
    assert x.cpu().tolist() == [0.0] * 4 and t.tolist() == [1.0] * 4


def test_state_dicts_move_between_cpu_and_device(dev):
    """State dicts from a CPU run load on the device and the other way round."""
    cpu_model = _bn_model()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    _train_steps(cpu_model, cpu_opt, "cpu", 2)
    xla_model = _bn_model().to(dev)
    xla_model.load_state_dict(cpu_model.state_dict())
    xla_opt = torch.optim.SGD(xla_model.parameters(), lr=0.1, momentum=0.9)
    xla_opt.load_state_dict(cpu_opt.state_dict())
    _train_steps(cpu_model, cpu_opt, "cpu", 2, start=2)
    _train_steps(xla_model, xla_opt, dev, 2, start=2)
    assert_same(xla_model.state_dict(), cpu_model.state_dict(), **MODEL_TOL)

    back = _bn_model()
    back.load_state_dict(xla_model.state_dict())
    back_opt = torch.optim.SGD(back.parameters(), lr=0.1, momentum=0.9)
    back_opt.load_state_dict(xla_opt.state_dict())
    assert back_opt.state[next(back.parameters())]["momentum_buffer"].device.type == "cpu"
    _train_steps(back, back_opt, "cpu", 1, start=4)
    _train_steps(cpu_model, cpu_opt, "cpu", 1, start=4)
    for p, q in zip(back.parameters(), cpu_model.parameters()):
        assert_same(p, q, rtol=1e-5, atol=1e-6, device="cpu")


# ---- xm.optimizer_step on one replica ----------------------------------------------------------

def test_optimizer_step_returns_what_step_returns(dev):
    model = _model().to(dev)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=2)

    def closure():
        opt.zero_grad()
        return _step(model, dev, 0)
    loss = xm.optimizer_step(opt, optimizer_args={"closure": closure})
    assert isinstance(loss, torch.Tensor) and loss.device.type == "xla"
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    assert xm.optimizer_step(sgd) is None


def test_optimizer_step_barrier(dev):
    """Without a barrier the step stays pending (the caller ends it); with one, it ends
    there: the new parameters are computed by one program, with no transfer."""
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xm.mark_step()
    _step(model, dev, 0)
    steps, cached, uncached = (met.counter_value(n) or 0 for n in ("MarkStep", "CachedCompile", "UncachedCompile"))
    xm.optimizer_step(opt)
    assert (met.counter_value("MarkStep") or 0) == steps
    assert (met.counter_value("CachedCompile") or 0) + (met.counter_value("UncachedCompile") or 0) == cached + uncached
    _step(model, dev, 1)
    xm.optimizer_step(opt, barrier=True)
    assert met.counter_value("MarkStep") == steps + 1
    assert (met.counter_value("CachedCompile") or 0) + compiles() == cached + uncached + 1
    cpu_model = _model()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    for step in range(2):  # no zero_grad: gradients accumulate, as above
        _step(cpu_model, "cpu", step)
        cpu_opt.step()
    assert_same(model.state_dict(), cpu_model.state_dict(), **MODEL_TOL)
