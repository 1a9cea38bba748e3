"""Op-by-op eager mode's relaunch: an op seen before, on computed inputs, runs by its cached
program at once, without a node (`eager.relaunch`); what it must not change: values, the
scalars a program's parameters share, random streams, checks carried to the outputs."""
import pytest
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla._lazy.launch import op_programs
from torch_xla._lazy.graph.tensor import unwrap
from torch_xla.experimental import eager_mode_context
from tests.compare import assert_same

aten = torch.ops.aten


@pytest.fixture
def op_by_op():
    xm.mark_step()
    with eager_mode_context(True, op_by_op=True):
        yield


def _relaunches():
    data = met.metric_data("EagerOpExecuteTime")
    return met.counter_value("CachedCompile") or 0, 0 if data is None else data[0]


def test_a_repeated_op_relaunches_its_program_and_makes_no_node(op_by_op):
    x = torch.randn(4, 4).to(xm.xla_device())
    w = torch.randn(4, 4).to(xm.xla_device())
    torch.tanh(x * w + 1.0)  # compiled once
    met.clear_all()
    y = torch.tanh(x * w + 1.0)
    assert not unwrap(y)._value.pending and unwrap(y)._value.node is None
    assert met.metric_data("EagerOpCompileTime") is None
    assert _relaunches() == (3, 3)
    assert_same(y, torch.tanh(x.cpu() * w.cpu() + 1.0))


@pytest.mark.parametrize("op", [lambda x, a, b: aten.add.Scalar(x, a, alpha=b),
                                lambda x, a, b: aten.clamp(x, a, b),
                                lambda x, a, b: aten.hardtanh(x, a, b)])
def test_scalars_equal_at_the_first_call_may_differ_later(op_by_op, op):
    """The first call's program shares one parameter between its equal scalars: a call with
    different ones must not run it."""
    x = torch.linspace(0, 1, 5)
    xx = x.to(xm.xla_device())
    op(xx, 0.5, 0.5)
    assert_same(op(xx, 0.2, 0.7), op(x, 0.2, 0.7))
    assert_same(op(xx, 0.5, 0.5), op(x, 0.5, 0.5))


def test_an_op_of_several_outputs_and_the_same_input_twice(op_by_op):
    x = torch.randn(5, 3)
    xx = x.to(xm.xla_device())
    for _ in range(2):
        values, indices = torch.max(xx, dim=1)
        product = xx * xx
    assert_same(values, torch.max(x, dim=1).values)
    assert_same(indices, torch.max(x, dim=1).indices)
    assert_same(product, x * x)
    y = torch.randn(5, 3).to(xm.xla_device())
    assert_same(xx * y, x * y.cpu())  # another input: not the program of x * x


def test_random_ops_draw_one_seed_each_cached_or_not(op_by_op):
    """A random op takes the node's way: the seeds it draws do not depend on whether its
    program was cached."""
    x = torch.ones(64).to(xm.xla_device())

    def draws():
        torch.manual_seed(7)
        return torch.stack([torch.nn.functional.dropout(x, 0.5) for _ in range(3)]).cpu()
    op_programs._table.clear()
    first = draws()  # the first dropout compiles, the others run its program
    assert torch.equal(draws(), first)
    assert not torch.equal(first[0], first[1])


def test_a_value_with_checks_carries_them_to_the_op_outputs():
    """An input still carrying a value check (an index out of range read later) takes the
    node's way, which carries the check on to what is computed from it."""
    xm.mark_step()
    x = torch.arange(4.0).to(xm.xla_device())
    with eager_mode_context(True, op_by_op=True):
        y = x + 1
        y = x + 1  # cached
    bad = x[torch.tensor([5]).to(xm.xla_device())]  # lazily: the check is deferred
    with eager_mode_context(True, op_by_op=True):
        with pytest.raises(Exception):
            (bad + 1).cpu()
    xm.mark_step()
    assert_same(y, torch.arange(4.0) + 1)
