"""FX graphs of ATen ops as one jax function, through the lazy path's lowerings."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torch_xla._lazy.graph_capture import decompose
from torch_xla._lazy.graph_capture.fx_lowering import GraphFunction, Unsupported

aten = torch.ops.aten


def graph_of(fn, *args):
    """A functional ATen graph of fn, its nodes carrying shapes and dtypes."""
    return make_fx(torch.func.functionalize(fn, remove="mutations_and_views"),
                   tracing_mode="fake")(*args)


def run(fn, args, seeds=()):
    inputs = tuple(jnp.asarray(a.numpy()) for a in args)
    mutated, outs = jax.jit(fn)(inputs, seeds)
    as_torch = lambda xs: [torch.from_numpy(np.array(x)) for x in xs]  # noqa: E731
    return as_torch(mutated), as_torch(outs)


def test_replays_the_graph_with_pytorch_dtypes_and_promotion():
    def f(x, i):
        y = torch.sigmoid(x) * 0.5 + i          # a float tensor meets an int tensor, a Python float
        values, indices = torch.max(y, dim=1)   # several outputs, getitem
        return y.t().reshape(-1), values, indices, (i * 3).sum()

    x, i = torch.randn(3, 4), torch.arange(12).reshape(3, 4)
    fn = GraphFunction(graph_of(f, x, i))
    _, outs = run(fn, (x, i))
    for actual, expected in zip(outs, f(x, i)):
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected)


def test_writes_into_inputs_are_returned():
    def f(x, buf):
        buf.mul_(0.9).add_(x)
        return x + 1

    x, buf = torch.randn(4), torch.randn(4)
    fn = GraphFunction(graph_of(f, x, buf))
    assert fn.mutated_inputs == [1]
    mutated, outs = run(fn, (x, buf))
    torch.testing.assert_close(mutated[0], buf * 0.9 + x)
    torch.testing.assert_close(outs[0], x + 1)


def test_random_ops_take_their_seeds_from_the_call():
    def f(x):
        return torch.rand_like(x) + x

    x = torch.zeros(32)
    fn = GraphFunction(graph_of(f, x))
    assert fn.n_rng == 1
    a, b, a2 = (run(fn, (x,), (s,))[1][0] for s in (1, 2, 1))
    assert not torch.equal(a, b) and torch.equal(a, a2)
    assert 0 <= a.min() and a.max() < 1


def test_ops_that_cannot_be_one_program_are_named():
    def f(x):
        return torch.nonzero(x)                 # its shape depends on the values

    gm = make_fx(f, tracing_mode="real")(torch.tensor([0.0, 1.0]))
    for node in gm.graph.nodes:
        if node.op == "call_function":
            node.meta["val"] = torch.empty(1, 1, dtype=torch.int64)
        elif node.op == "placeholder":
            node.meta["val"] = torch.empty(2)
    with pytest.raises(Unsupported, match="aten.nonzero.default"):
        GraphFunction(gm)


def test_ops_without_lowering_are_decomposed():
    def f(x):
        return torch.celu(x, alpha=0.7)

    x = torch.randn(6)
    gm = graph_of(f, x)
    assert any(n.target is aten.celu.default for n in gm.graph.nodes)
    with pytest.raises(Unsupported, match="aten.celu.default"):
        GraphFunction(gm)
    decomposed = decompose.decompose(gm)
    assert not any(n.target is aten.celu.default for n in decomposed.graph.nodes)
    _, outs = run(GraphFunction(decomposed), (x,))
    torch.testing.assert_close(outs[0], f(x))
