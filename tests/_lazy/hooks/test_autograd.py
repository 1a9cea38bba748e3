"""Autograd above the lazy device: gradients traced like the forward, living on the device."""
import torch

import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, to_xla


def _grads(fn, *inputs):
    inputs = [i.detach().requires_grad_() for i in inputs]
    fn(*inputs).backward()
    return [i.grad for i in inputs]


def test_gradients_match_the_cpu(dev):
    torch.manual_seed(0)
    x, w = torch.randn(5, 3), torch.randn(3, 4)

    def fn(x, w):
        return ((x @ w).tanh() * 2 + x.sum(1, keepdim=True)).pow(2).mean()
    expected = _grads(fn, x, w)
    actual = _grads(fn, *to_xla([x, w]))
    assert_same(actual, expected, rtol=1e-5, atol=1e-6)


def test_backward_is_lazy_until_needed(dev):
    from torch_xla.debug import metrics as met
    w = torch.randn(4, 4, device=dev, requires_grad=True)
    xm.mark_step()
    before = met.metric_data("ExecuteTime")[0]
    (w * w).sum().backward()
    assert met.metric_data("ExecuteTime")[0] == before
    assert_same(w.grad, 2 * w.detach().cpu())


def test_gradients_accumulate_and_no_grad_is_respected(dev):
    w = torch.ones(3, device=dev, requires_grad=True)
    for _ in range(3):
        (w * 2).sum().backward()
    assert w.grad.cpu().tolist() == [6.0, 6.0, 6.0]
    with torch.no_grad():
        y = w * 3
    assert not y.requires_grad
    z = w.detach() * 3
    assert not z.requires_grad and z.cpu().tolist() == [3.0] * 3


def test_autograd_grad_and_retain_graph(dev):
    x = torch.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
    y = (x ** 3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert g.cpu().tolist() == [3.0, 12.0, 27.0]
    (g2,) = torch.autograd.grad(g.sum(), x)
    assert g2.cpu().tolist() == [6.0, 12.0, 18.0]


def test_backward_runs_on_the_calling_thread_and_on_autograds_thread_when_asked(dev):
    """The engine turns autograd's multithreading off on its thread: the backward pass of XLA
    tensors runs there (hooks see it), and with it turned on again, on autograd's own thread
    for the device, with the same gradients."""
    import threading
    assert not torch.autograd.is_multithreading_enabled()
    grads = []
    for device_thread in (False, True):
        w = torch.arange(6.0).reshape(2, 3).to(dev).requires_grad_()
        seen = []
        w.register_hook(lambda g: seen.append(threading.current_thread()))
        with torch.autograd.set_multithreading_enabled(device_thread):
            (w * w).sum().backward()
        assert (seen[0] is threading.current_thread()) is not device_thread, seen
        grads.append(w.grad)
    assert torch.autograd.is_multithreading_enabled() is False
    assert_same(grads[0], torch.arange(6.0).reshape(2, 3) * 2)
    assert_same(grads[1], grads[0])
