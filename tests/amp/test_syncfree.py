"""torch_xla.amp.syncfree: with found_inf == 0 a step is torch.optim's on the CPU; with
found_inf != 0 nothing changes; deciding costs no execution before the step ends."""
import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from torch_xla.amp import syncfree
from tests.compare import EXACT, assert_same, to_xla

CASES = [
    (syncfree.SGD, torch.optim.SGD, dict(lr=0.1)),
    (syncfree.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.1)),
    (syncfree.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    (syncfree.Adam, torch.optim.Adam, dict(lr=0.01)),
    (syncfree.Adam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    (syncfree.AdamW, torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    (syncfree.AdamW, torch.optim.AdamW, dict(lr=0.01, amsgrad=True, maximize=True)),
]


def _grads(step):
    g = torch.Generator().manual_seed(step)
    return [torch.randn(3, 2, generator=g), torch.randn(2, generator=g)]


def _run(opt_cls, kwargs, device, skips):
    params = [torch.nn.Parameter(to_xla(p, device) if device else p.clone())
              for p in (torch.ones(3, 2) * 0.5, torch.arange(2.0))]
    opt = opt_cls(params, **kwargs)
    for step, skip in enumerate(skips):
        for p, g in zip(params, _grads(step)):
            p.grad = to_xla(g, device) if device else g
        if device:
            opt.step(found_inf=torch.tensor(float(skip)).to(device))
            torch_xla.sync()
        elif not skip:
            opt.step()
    return [p.detach().cpu() for p in params]


@pytest.mark.parametrize("xla_cls,torch_cls,kwargs", CASES)
def test_steps_match_torch_and_skipped_steps_change_nothing(xla_cls, torch_cls, kwargs, dev):
    skips = [0, 1, 0, 0, 1, 0]
    expected = _run(torch_cls, kwargs, None, skips)
    assert_same(_run(xla_cls, kwargs, dev, skips), expected, rtol=1e-5, atol=1e-6, device="cpu")


def test_a_skipped_first_step_leaves_no_momentum(dev):
    """The momentum buffer starts from the first step that is taken."""
    kwargs = dict(lr=0.1, momentum=0.9)
    assert_same(_run(syncfree.SGD, kwargs, dev, [1, 0, 0]), _run(torch.optim.SGD, kwargs, None, [1, 0, 0]),
                device="cpu")


def test_deciding_on_found_inf_runs_nothing_before_the_step_ends(dev):
    p = torch.nn.Parameter(torch.ones(4).to(dev))
    opt = syncfree.AdamW([p], lr=0.1)
    p.grad = torch.full((4,), float("inf")).to(dev)
    found_inf = torch.isinf(p.grad).any().float()
    torch_xla.sync()
    executions = met.counter_value("CachedCompile") or 0, met.counter_value("UncachedCompile") or 0
    opt.step(found_inf=found_inf)
    assert (met.counter_value("CachedCompile") or 0, met.counter_value("UncachedCompile") or 0) == executions
    torch_xla.sync()
    assert_same(p.detach(), torch.ones(4), **EXACT)


def test_found_inf_must_be_a_scalar(dev):
    p = torch.nn.Parameter(torch.ones(2).to(dev))
    p.grad = torch.ones(2).to(dev)
    with pytest.raises(ValueError, match="scalar"):
        syncfree.SGD([p], lr=0.1).step(found_inf=torch.zeros(2).to(dev))


def test_without_found_inf_a_step_is_torchs(dev):
    p = torch.nn.Parameter(torch.ones(2).to(dev))
    p.grad = torch.ones(2).to(dev)
    syncfree.Adam([p], lr=0.5).step()
    ref = torch.nn.Parameter(torch.ones(2))
    ref.grad = torch.ones(2)
    torch.optim.Adam([ref], lr=0.5).step()
    assert_same(p.detach(), ref.detach())
