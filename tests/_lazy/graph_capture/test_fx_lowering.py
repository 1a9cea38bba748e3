"""FX graphs of ATen ops as one jax function, through the lazy path's lowerings."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torch_xla._lazy.graph_capture import decompose
from torch_xla._lazy.graph_capture.fx_lowering import GraphFunction, Unsupported
from tests.compare import assert_same

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
        assert_same(actual, expected, device="cpu")


def test_writes_into_inputs_are_returned():
    def f(x, buf):
        buf.mul_(0.9).add_(x)
        return x + 1

    x, buf = torch.randn(4), torch.randn(4)
    fn = GraphFunction(graph_of(f, x, buf))
    assert fn.mutated_inputs == [1]
    mutated, outs = run(fn, (x, buf))
    assert_same(mutated[0], buf * 0.9 + x, device="cpu")
    assert_same(outs[0], x + 1, device="cpu")


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
    assert_same(outs[0], f(x), device="cpu")


def test_aliased_outputs_are_one_output_and_views_of_inputs_can_be_deferred():
    def f(w, x):
        h = torch.relu(x @ w.t())
        return h, h.detach(), w.t(), x.detach(), w.t().unsqueeze(0)

    w, x = torch.randn(3, 4), torch.randn(2, 4)
    gm = graph_of(f, w, x)
    plain = GraphFunction(gm)
    assert [kind for kind, _ in plain.output_refs] == ["value", "value", "value", "alias", "value"]
    assert plain.output_refs[0] == plain.output_refs[1]   # h and h.detach(): one output
    assert len(plain.output_avals) == 3
    deferred = GraphFunction(gm, defer_views=True)
    kinds = [kind for kind, _ in deferred.output_refs]
    assert kinds == ["value", "value", "view", "alias", "view"]
    assert len(deferred.output_avals) == 1                # only h is computed
    position, steps = deferred.output_refs[4][1]
    assert position == 0 and len(steps) == 2              # t, then unsqueeze, on input w
    _, outs = run(plain, (w, x))
    for actual, expected in zip(outs, (f(w, x)[0], w.t(), f(w, x)[4])):
        assert_same(actual, expected, device="cpu")


def test_views_of_written_inputs_are_computed():
    def f(w, g):
        w.sub_(g)
        return w.t()

    w, g = torch.randn(3, 4), torch.randn(3, 4)
    fn = GraphFunction(graph_of(f, w, g), defer_views=True)
    assert [kind for kind, _ in fn.output_refs] == ["value"]
    mutated, outs = run(fn, (w, g))
    assert_same(outs[0], (w - g).t(), device="cpu")
