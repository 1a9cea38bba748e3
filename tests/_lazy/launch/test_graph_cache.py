"""A step's graph found by its roots' hashes without a walk (`_lazy/launch/graph_cache`), what a
program outputs (no bases of views) and which buffer each output reuses (donation)."""
import re

import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.compare import ALLCLOSE, EXACT, assert_same, compiles
from torch_xla._lazy.launch import graph_cache, graph_program
from torch_xla._lazy.runtime import runner


@pytest.fixture
def walks(monkeypatch):
    """Counts the graph walks `mark_step` makes."""
    count = [0]
    real = graph_program.walk

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(graph_program, "walk", counted)
    return count


def _chain(x, scale):
    for _ in range(20):
        x = (x * scale + 0.5).relu()
    return x


def test_a_steady_loop_finds_its_graph_without_walking_it(dev, walks):
    x = torch.randn(4, 4, device=dev)
    xm.mark_step()
    y = _chain(x, 1.0)
    xm.mark_step()
    xm.mark_step()
    n, w = compiles(), walks[0]
    for step in range(4):
        y = _chain(x, 1.0 + step / 10)  # new scalars, same program
        xm.mark_step()
        assert_same(y, _chain(x.cpu(), 1.0 + step / 10), **ALLCLOSE)
    assert walks[0] == w and compiles() == n
    assert met.counter_value("CachedCompile") >= 4


def test_graphs_alike_but_for_shared_inputs_are_told_apart(dev, walks):
    """`x + y` and `x + x` hash alike (leaves hash by shape); the check tells them apart."""
    x, y = torch.randn(3, device=dev), torch.randn(3, device=dev)
    xm.mark_step()
    a = x + y
    xm.mark_step()
    w = walks[0]
    b = x + x
    xm.mark_step()
    assert walks[0] == w + 1
    assert torch.equal(a.cpu(), x.cpu() + y.cpu()) and torch.equal(b.cpu(), 2 * x.cpu())


def test_graphs_alike_but_for_an_argument_are_told_apart(dev):
    """hash(-1) == hash(-2) in Python: node types are interned, not hashed."""
    x = torch.randn(2, 3, 4, device=dev)
    xm.mark_step()
    results = []
    for dim in (-1, -2, -1, -2):
        s = x.sum(dim)
        xm.mark_step()
        results.append(s)
    assert_same(results[:2], [x.cpu().sum(-1), x.cpu().sum(-2)], **ALLCLOSE)
    assert_same(results[2:], results[:2], **EXACT)


def test_a_donation_pattern_change_takes_the_walk(dev, walks):
    """The same graph with an input still held (not donated) is another program."""
    w0 = torch.randn(8, device=dev)
    xm.mark_step()
    for _ in range(2):
        w0 = w0 * 0.5
        xm.mark_step()
    before = walks[0]
    keep = w0
    w0 = w0 * 0.5
    xm.mark_step()
    assert walks[0] == before + 1  # the old buffer is held: not donated, another program
    assert_same(w0, keep.cpu() * 0.5, **EXACT)


def _last_program():
    return runner.cached_programs()[-1]


def test_bases_of_views_are_no_outputs_and_keep_their_values(dev):
    x, y = torch.randn(3, 5, device=dev), torch.randn(5, 4, device=dev)
    xm.mark_step()
    a = x @ y          # the base
    b = a.t()          # a transposed view of it: functionalization keeps `a` alive
    c = a.sum(0).view(2, 2)
    xm.mark_step()
    assert len(_last_program().roots) == 2  # b and c; a is b transposed back
    expected = x.cpu() @ y.cpu()
    assert_same(b, expected.t(), rtol=1e-5, atol=1e-5)
    assert_same(c, expected.sum(0).view(2, 2), rtol=1e-5, atol=1e-5)
    assert_same(a, expected, rtol=1e-5, atol=1e-5)
    a.add_(1)  # writing the base updates its views
    assert_same(b, expected.t() + 1, rtol=1e-5, atol=1e-5)


def test_weight_gradients_are_outputs_once_and_training_matches_cpu(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    cpu.load_state_dict(model.state_dict())
    model.to(dev)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, cpu)]
    x = torch.randn(7, 6)
    for _ in range(3):
        for m, opt, inp in ((model, opts[0], x.to(dev)), (cpu, opts[1], x)):
            opt.zero_grad()
            m(inp).square().mean().backward()
            opt.step()
        xm.mark_step()
    # Outputs: 4 parameters, 4 momentum buffers, 4 gradients; no base of a gradient's view.
    assert len(_last_program().roots) == 12
    for p, q in zip(model.parameters(), cpu.parameters()):
        assert_same(p, q, rtol=1e-5, atol=1e-5)
        assert_same(p.grad, q.grad, rtol=1e-5, atol=1e-5)


def test_each_donated_buffer_goes_to_the_output_that_updates_it(dev):
    """jax gives a donated buffer to the first output of its shape; given to `g` (made
    first), the momentum's buffer would be overwritten before it is read: XLA would copy it."""
    x = torch.randn(4, 4, device=dev)
    w = torch.randn(4, 4, device=dev)
    m = torch.zeros(4, 4, device=dev)
    xm.mark_step()
    for _ in range(2):
        g = x * 2                 # an output of the same shape, not an update
        m = m * 0.9 + g
        w = w - 0.1 * m
        xm.mark_step()
    program = _last_program()
    copied = re.findall(r"copy\(%donated", program.compiled.as_text())
    assert program.n_donated == 2 and not copied
    assert_same(g, x.cpu() * 2, **ALLCLOSE)
