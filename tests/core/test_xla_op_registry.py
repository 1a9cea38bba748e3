"""torch_xla.core.xla_op_registry and xla_builder's op builder: ops written with `Op`s (jax
values here) run on XLA tensors as one op of the lazy graph, and match PyTorch on the CPU."""
import pytest
import torch

import torch_xla
import torch_xla.core.xla_builder as xb
import torch_xla.core.xla_op_registry as xor
import torch_xla.debug.metrics as met

from tests.compare import assert_same, to_xla


def _run(op, tensors, **kwargs):
    return op(*to_xla(tensors), **kwargs)


def test_binary_ops_and_broadcast_scalar():
    op = xor.register("affine", lambda a, b: a * b + xb.Op.scalar(a.builder(), 2.0) - b)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert_same(_run(op, [a, b]), a * b + 2.0 - b)


def test_conditional_takes_the_branch_its_predicate_picks():
    def op_fn(k, a, b, k0=None):
        cond = k > xb.Op.scalar(k.builder(), k0, dtype=k.shape().dtype)
        return cond.mkconditional((a, b), lambda a, b: a + b, lambda a, b: a - b)
    op = xor.register("conditional", op_fn)
    k, a, b = torch.tensor(0.2), torch.randn(2, 2), torch.randn(2, 2)
    assert_same(_run(op, [k, a, b], k0=0.1), a + b)
    assert_same(_run(op, [k, a, b], k0=0.9), a - b)


def test_while_loop_counts_to_its_limit():
    def op_fn(a, b, limit=None):
        def cond(counter, a, b):
            return counter < xb.Op.scalar(counter.builder(), limit, dtype=xb.Type.S32)

        def body(counter, a, b):
            one = xb.Op.scalar(counter.builder(), 1, dtype=xb.Type.S32)
            return xb.Op.tuple((counter + one, a + b, b))
        zero = xb.Op.scalar(a.builder(), 0, dtype=xb.Type.S32)
        return xb.Op.mkwhile((zero, a, b), cond, body).get_tuple_element(1)
    op = xor.register("while", op_fn)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    expected = a.clone()
    for _ in range(7):
        expected = expected + b
    assert_same(_run(op, [a, b], limit=7), expected)


def test_triangular_solve_reduce_and_tuple_of_two_dtypes():
    solve = xor.register("solve", lambda b, a: a.triangualr_solve(b, True, False, False, False))
    a, b = torch.randn(3, 3).triu() + 3 * torch.eye(3), torch.randn(3, 2)
    assert_same(_run(solve, [b, a]), torch.linalg.solve_triangular(a, b, upper=True),
                rtol=1e-4, atol=1e-5)
    rowsum = xor.register("rowsum", lambda x: x.reduce(
        xb.Op.scalar(x.builder(), 0.0), lambda p, q: p + q, (1,)))
    assert_same(_run(rowsum, [b]), b.sum(1))
    pair = xor.register("pair", lambda x: xb.Op.tuple((x, x.cast(xb.Type.BF16))))
    same, cast = _run(pair, [b])
    assert (same.dtype, cast.dtype) == (torch.float32, torch.bfloat16)
    assert_same(cast, b.to(torch.bfloat16))


def test_one_specialisation_per_shape_and_keywords():
    op = xor.register("scale", lambda a, k=1.0: a * xb.Op.scalar(a.builder(), k))
    x = torch.randn(4)
    xd = to_xla(x)
    torch_xla.sync()
    met.clear_all()
    outs = []
    for _ in range(3):
        outs.append(op(xd, k=3.0))
        torch_xla.sync()
    assert met.metric_data("CompileTime")[0] == 1
    assert met.metric_data("ExecuteTime")[0] == 3
    assert_same(outs[-1], x * 3.0)


def test_type_table_round_trips_and_shapes():
    for xla_type in xb._XLA_PT_TYPE_MAP:
        assert xb.Op.from_torch_type(xb.Op.to_torch_type(xla_type)) == xla_type
    shape = xb.tensor_shape(torch.zeros(2, 3, dtype=torch.int32))
    assert (shape.dtype, shape.sizes, shape.rank) == ("s32", (2, 3), 2)


def test_computation_as_function_and_hlo_text():
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    comp = xb.create_computation("product", lambda x, y: x * y,
                                 [xb.tensor_shape(a), xb.tensor_shape(b)])
    assert "multiply" in xb.get_computation_hlo(comp)
    (out,) = xb.xla_computation_as_func(comp)(to_xla([a, b]))
    assert_same(out, a * b)


def test_operations_jax_cannot_express_refuse_by_name():
    op = xor.register("dyn", lambda a: a.dynamic_reshape((2, 2)))
    with pytest.raises(NotImplementedError, match="DynamicReshape"):
        _run(op, [torch.randn(4)])
    with pytest.raises(NotImplementedError, match="no such XLA operation"):
        xb.mkop("Frobnicate", ())


def test_user_computations_of_one_function_compile_once():
    def spread(a, b):
        return xb.Op.tuple([xb.Op.max(a, b) - xb.Op.min(a, b)])
    x = to_xla(torch.tensor(10.0))
    torch_xla.sync()
    met.clear_all()
    for _ in range(2):
        inputs = [torch.sin(x), torch.cos(x)]
        comp = xb.create_computation("computation", spread, [xb.tensor_shape(p) for p in inputs])
        (out,) = torch_xla._XLAC._xla_user_computation("xla::computation", inputs, comp)
        torch_xla.sync()
    assert (met.counter_value("UncachedCompile"), met.counter_value("CachedCompile")) == (1, 1)
    assert_same(out, torch.tensor(abs(torch.sin(torch.tensor(10.0)) - torch.cos(torch.tensor(10.0)))))
