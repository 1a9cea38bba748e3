"""scan, scan_layers, while_loop and fori_loop: one XLA loop each (the body traced once),
values and gradients as a Python loop on the CPU, a training loop compiled once."""
import re

import pytest
import torch
from functorch.compile import default_partition, min_cut_rematerialization_partition
from torch._higher_order_ops.while_loop import while_loop as torch_while_loop

import torch_xla
import torch_xla.experimental.fori_loop  # noqa: F401  (PyTorch's while_loop on XLA tensors)
from tests.compare import assert_same, check, compiles
from torch_xla.experimental.fori_loop import fori_loop
from torch_xla.experimental.scan import scan
from torch_xla.experimental.scan_layers import scan_layers


def _loop(fn, init, xs):
    carry, ys = init, []
    for i in range(len(xs)):
        carry, y = fn(carry, xs[i])
        ys.append(y)
    return carry, torch.stack(ys)


def test_scan_matches_the_loop_with_gradients(dev):
    w = torch.randn(4, 4, requires_grad=True)

    def run(init, xs, w):
        def step(carry, x):  # closes over w
            h = torch.tanh(carry @ w + x)
            return h, h.sum(dim=1)
        return (scan if init.device.type == "xla" else _loop)(step, init, xs)
    check(run, torch.randn(2, 4, requires_grad=True), torch.randn(5, 2, 4, requires_grad=True),
          w, grads=True, rtol=1e-5, atol=1e-5)


def test_scan_pytrees_and_none_outputs(dev):
    init = {"a": torch.zeros(3, device=dev), "n": torch.zeros((), dtype=torch.int64, device=dev)}
    carry, ys = scan(lambda c, x: ({"a": c["a"] + x, "n": c["n"] + 1}, None), init,
                     torch.ones(4, 3, device=dev))
    assert ys is None
    assert_same(carry, {"a": torch.full((3,), 4.0), "n": torch.tensor(4)})


def test_scan_iterations_draw_other_random_numbers(dev):
    _, ys = scan(lambda c, x: (c, x + torch.rand(2, device=dev)), torch.zeros(2, device=dev),
                 torch.zeros(3, 2, device=dev))
    ys = ys.cpu()
    assert not torch.equal(ys[0], ys[1])


def test_scan_training_loop_compiles_once(dev):
    w = torch.randn(4, 4, device=dev, requires_grad=True)
    counts = []
    for _ in range(3):
        carry, _ = scan(lambda c, x: (torch.tanh(c @ w + x), None), torch.ones(2, 4, device=dev),
                        torch.randn(6, 2, 4, device=dev))
        carry.sum().backward()
        with torch.no_grad():
            w -= 0.01 * w.grad
            w.grad = None
        torch_xla.sync()
        counts.append(compiles())
    assert counts[1] == counts[2]


def test_rematerializing_partition_recomputes_the_forward_in_the_backward(dev):
    def step(carry, x):
        return torch.sin(torch.sin(carry)), torch.sin(x)

    def grads_and_sines(partition_fn):
        init = torch.linspace(0, 1, 4, device=dev).requires_grad_()
        xs = torch.linspace(-1, 1, 12, device=dev).reshape(3, 4).requires_grad_()
        carry, ys = scan(step, init, xs, partition_fn=partition_fn)
        torch_xla.sync()  # the forward runs: the backward's program is the backward alone
        (carry.sum() + ys.sum()).backward()
        hlo = torch_xla._XLAC._get_xla_tensors_hlo([init.grad, xs.grad])
        return (init.grad.cpu(), xs.grad.cpu()), len(re.findall(r" sine\(f32", hlo))
    saved, no_sines = grads_and_sines(default_partition)
    recomputed, sines = grads_and_sines(min_cut_rematerialization_partition)
    assert no_sines == 0 and sines >= 1, (no_sines, sines)  # sin(carry) again, for cos(sin(carry))
    torch.testing.assert_close(recomputed, saved)


def test_scan_layers_matches_sequential(dev):
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(4)]
    x = torch.randn(3, 8)
    expected = torch.nn.Sequential(*layers)(x)
    expected.sum().backward()
    on_dev = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).to(dev) for _ in range(4)]
    for a, b in zip(on_dev, layers):
        a.load_state_dict(b.state_dict())
    out = scan_layers(on_dev, x.to(dev))
    out.sum().backward()
    assert_same(out, expected, rtol=1e-5)
    for a, b in zip(on_dev, layers):
        assert_same(a[0].weight.grad, b[0].weight.grad, rtol=1e-5)


def test_while_loops(dev):
    def cond(i, x):
        return i > 0

    def body(i, x):
        return i - 1, x * 2 + 1
    counts = []
    for n in (3, 5):  # the trip count is a value: one program for both
        i, x = torch_while_loop(cond, body, (torch.tensor(n, device=dev), torch.ones(2, device=dev)))
        assert_same([i, x], [torch.tensor(0), torch.full((2,), 2.0 ** (n + 1) - 1)])
        counts.append(compiles())
    assert counts[0] == counts[1]
    _, y = fori_loop(torch.tensor(0, device=dev), torch.tensor(4, device=dev), lambda v: v + 3,
                     torch.zeros(2, device=dev))
    assert_same(y, torch.full((2,), 12.0))


def test_a_body_changing_an_outside_tensor_in_place_raises(dev):
    outside = torch.zeros(2, device=dev)

    def step(carry, x):
        outside.add_(1.0)
        return carry + x, None
    try:
        scan(step, torch.zeros(2, device=dev), torch.ones(3, 2, device=dev))
    except RuntimeError as e:
        assert "in place" in str(e)
    else:
        raise AssertionError("no error")
    assert_same(outside, torch.zeros(2))


def _norm_softmax_step(h, w):
    n = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 0.5)
    out = torch.softmax((n @ w) * 0.5, dim=-1) @ w.T
    return out, out.sum()


@pytest.mark.parametrize("partition_fn", [default_partition, min_cut_rematerialization_partition])
def test_scan_with_equal_scalars_matches_the_loop(dev, partition_fn):
    """The two 0.5s reach the program as one value: the residuals stay those traced."""
    def run(init, ws):
        if init.device.type == "xla":
            return scan(_norm_softmax_step, init, ws, partition_fn=partition_fn)
        return _loop(_norm_softmax_step, init, ws)
    check(run, torch.randn(3, 8, requires_grad=True), torch.randn(4, 8, 8, requires_grad=True),
          grads=True, rtol=1e-5, atol=1e-5)



class _NormMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))
        self.gate = torch.nn.Linear(8, 24, bias=False)
        self.up = torch.nn.Linear(8, 24, bias=False)
        self.down = torch.nn.Linear(24, 8, bias=False)

    def forward(self, h):
        n = self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))
        return h + self.down(torch.nn.functional.silu(self.gate(n)) * self.up(n))


def test_the_forward_loop_stacks_no_elementwise_result(dev):
    """Per layer jax's vjp alone saves 13 activations here, 5 of hidden size (the norm's
    products among them) and 5 of the MLP's; the loop saves the input, the norm's output,
    the two products and the sigmoid, and the norm's statistics."""
    saved = []
    layers = [_NormMLP().to(dev) for _ in range(3)]
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        scan_layers(layers, torch.randn(2, 5, 8, device=dev, requires_grad=True))
    activations = [tuple(t.shape) for t in saved if t.shape[:2] in ((3, 2), (3, 10))]
    assert len([s for s in activations if s[-1] in (8, 24)]) == 5, activations
