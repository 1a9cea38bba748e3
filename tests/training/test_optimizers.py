"""Every optimizer in torch.optim on device parameters, against the same optimizer on the CPU.

Each runs its default (per-tensor) code path, `foreach=True` and `capturable=True` where its
constructor offers them; `fused=True` is refused by PyTorch itself for XLA parameters (its
fused kernels exist for other devices only), which is checked to be PyTorch's own error.
State that PyTorch keeps on the CPU (`step` counters) or as Python numbers (LBFGS) works
as on the CPU, and after the step that creates the state nothing recompiles.
"""
import inspect
import os

import pytest
import torch
import torch.optim as optim

import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, compiles, fallbacks

ALL = sorted(n for n in dir(optim) if isinstance(getattr(optim, n), type)
             and issubclass(getattr(optim, n), optim.Optimizer) and n != "Optimizer")

# Non-default settings that exercise more of each optimizer's code.
SETTINGS = {
    "SGD": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "Adam": dict(lr=0.01, amsgrad=True),
    "AdamW": dict(lr=0.01, weight_decay=0.1),
    "Adadelta": dict(lr=0.5),
    "Adagrad": dict(lr=0.1, lr_decay=0.01),
    "Adamax": dict(lr=0.01),
    "ASGD": dict(lr=0.05),
    "NAdam": dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1),
    "RAdam": dict(lr=0.01),
    "RMSprop": dict(lr=0.01, momentum=0.5, centered=True),
    "Rprop": dict(lr=0.01),
    "Adafactor": dict(lr=0.01),
    "Muon": dict(lr=0.02),  # 2-D parameters only
    "LBFGS": dict(lr=0.5, max_iter=2),  # steps with a closure
    "SparseAdam": dict(),  # sparse gradients only
}


def _accepts(name, option):
    return option in inspect.signature(getattr(optim, name).__init__).parameters


def _run(name, device, steps, **options):
    """Parameters after `steps` steps, the compile count after each step, the optimizer."""
    torch.manual_seed(0)
    shapes = [(4, 3)] if name == "Muon" else [(4, 3), (3,)]
    params = [torch.randn(*s).to(device).requires_grad_() for s in shapes]
    opt = getattr(optim, name)(params, **SETTINGS[name], **options)
    counts = []
    for step in range(steps):
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(step)).to(device)

        def closure():
            opt.zero_grad()
            loss = ((x @ params[0] + sum(params[1:])) ** 2).mean()
            loss.backward()
            return loss
        if name == "LBFGS":
            opt.step(closure)
        else:
            closure()
            opt.step()
        if device != "cpu":
            xm.mark_step()
        counts.append(compiles())
    return [p.detach() for p in params], counts, opt


def test_every_optimizer_is_covered():
    assert set(ALL) == set(SETTINGS), "a new optimizer in torch.optim: add it here"


# Capturable optimizers whose per-tensor path PyTorch refuses on XLA (its own device list).
CAPTURABLE_REFUSED = {"Adadelta"}
CASES = [(n, {}) for n in ALL if n != "SparseAdam"] + [
    (n, {opt: True}) for n in ALL for opt in ("foreach", "capturable")
    if _accepts(n, opt) and not (opt == "capturable" and n in CAPTURABLE_REFUSED)]


@pytest.mark.parametrize("name,options", CASES, ids=[f"{n}-{'-'.join(o) or 'default'}" for n, o in CASES])
def test_optimizer_matches_cpu(dev, name, options):
    steps = 2 if name == "LBFGS" else 4
    before = fallbacks()
    got, counts, opt = _run(name, dev, steps, **options)
    expected, _, cpu_opt = _run(name, "cpu", steps, **{k: v for k, v in options.items() if k != "capturable"})
    assert_same(got, expected, rtol=1e-5, atol=1e-6)
    assert fallbacks() == before, f"ran on the CPU: {sorted(fallbacks() - before)}"
    if name != "LBFGS":  # LBFGS's history grows each step: a new graph each time, by design
        assert counts[1] == counts[-1], f"recompiled after the second step: {counts}"
    # State lives where PyTorch puts it: `step` counters on the CPU unless capturable.
    state, cpu_state = next(iter(opt.state.values())), next(iter(cpu_opt.state.values()))
    assert state.keys() == cpu_state.keys()
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            on_cpu = cpu_state[key].dim() == 0 and key in ("step", "mu_product") and not options.get("capturable")
            on_cpu = on_cpu and name != "ASGD"  # ASGD keeps its scalars with the parameter
            assert value.device.type == ("cpu" if on_cpu else "xla"), (key, value.device)
        else:
            assert type(value) is type(cpu_state[key]), key


def _raised_by_pytorch(info):
    raised_in = os.path.abspath(str(info.traceback[-1].path))
    return raised_in.startswith(os.path.dirname(torch.__file__) + os.sep)


@pytest.mark.parametrize("name", [n for n in ALL if _accepts(n, "fused")])
def test_fused_is_refused_by_pytorch(dev, name):
    """PyTorch's fused kernels exist for CUDA, CPU, MPS, XPU... not for XLA: its own check
    says so at the first step."""
    p = torch.zeros(3, device=dev, requires_grad=True)
    p.sum().backward()
    opt = getattr(optim, name)([p], fused=True)
    with pytest.raises(RuntimeError, match="`fused=True` requires all the params to be floating point "
                       "Tensors of supported devices: .* but torch.float32 and xla") as info:
        opt.step()
    assert _raised_by_pytorch(info)


@pytest.mark.parametrize("name,foreach", [("Adam", True), ("Adadelta", False)])
def test_capturable_refusals_are_pytorchs(dev, name, foreach):
    """Some capturable code paths list the devices they support without XLA."""
    p = torch.zeros(3, device=dev, requires_grad=True)
    p.sum().backward()
    opt = getattr(optim, name)([p], foreach=foreach, capturable=True)
    with pytest.raises(AssertionError, match="If capturable=True, params and state_steps must be on "
                       "supported devices") as info:
        opt.step()
    assert "xla" not in str(info.value) and _raised_by_pytorch(info)


def test_sparse_adam_refuses_dense_gradients_like_pytorch(dev):
    p = torch.zeros(3, device=dev, requires_grad=True)
    p.sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        optim.SparseAdam([p]).step()


def test_python_number_step_in_a_loaded_state(dev):
    """Old checkpoints keep `step` as a Python number: loading one converts it as on the CPU,
    and training goes on identically."""
    results = []
    for device in ("cpu", dev):
        torch.manual_seed(0)
        p = torch.randn(3).to(device).requires_grad_()
        opt = optim.Adam([p], lr=0.1)
        state = {"state": {0: {"step": 5, "exp_avg": torch.full((3,), 0.1).to(device),
                               "exp_avg_sq": torch.full((3,), 0.01).to(device)}},
                 "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
        opt.load_state_dict(state)
        for _ in range(3):
            opt.zero_grad()
            (p ** 2).sum().backward()
            opt.step()
        assert isinstance(opt.state[p]["step"], torch.Tensor)
        results.append(p.detach())
    assert_same(results[1], results[0], rtol=1e-6, atol=1e-6)
