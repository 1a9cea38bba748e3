"""call_jax: a jax function as one op of the lazy graph, fused into the step's program,
specialised once per function and argument signature; XlaCallable: the same for a function
of the XLA builder's `Op`s."""
import jax
import jax.numpy as jnp
import pytest
import torch

import torch_xla
import torch_xla.core.xla_builder as xb
from tests.compare import assert_same, check, compiles


def _sin_plus(a, b):
    return a + jnp.sin(b)


def test_values_and_pytrees(dev):
    a, b = torch.randn(3, 3), torch.randn(3, 3)

    def f(a, b):
        if a.device.type == "xla":
            return xb.call_jax(lambda d: {"s": _sin_plus(d["a"], d["b"]), "p": d["a"] @ d["b"]},
                               ({"a": a, "b": b},))
        return {"p": a @ b, "s": a + torch.sin(b)}  # (jax orders dict keys)
    check(f, a, b)


def test_static_arguments_specialise(dev):
    a = torch.ones(2, device=dev)

    def f(x, scale, dtype, none):
        assert none is None
        return (x * scale).astype(dtype)
    before = xb._jax_to_xla_computation_cache_elements()
    outs = [xb.call_jax(f, (a, s, torch.int32), {"none": None}) for s in (2.0, 3.0, 2.0)]
    assert xb._jax_to_xla_computation_cache_elements() - before == 2
    assert_same(outs, [torch.tensor([2, 2], dtype=torch.int32), torch.tensor([3, 3], dtype=torch.int32),
                       torch.tensor([2, 2], dtype=torch.int32)])


def test_fused_into_the_step_program_and_compiled_once(dev):
    counts, before = [], compiles()
    for step in range(3):
        x = torch.full((4,), float(step), device=dev)
        y = xb.call_jax(_sin_plus, (x * 2, x)) + 1  # torch ops before and after
        torch_xla.sync()
        counts.append(compiles())
        assert_same(y, torch.full((4,), float(step)) * 2 + torch.sin(torch.full((4,), float(step))) + 1)
    assert counts[0] - before == 1  # one program: the jax function is in the step's
    assert counts[2] == counts[1]   # the steady loop compiles nothing new


def test_call_jax_with_grad_matches_torch(dev):
    a, b = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)

    def f(a, b):
        if a.device.type == "xla":
            return xb.call_jax_with_grad(lambda a, b: jnp.tanh(a @ b), (a, b))
        return torch.tanh(a @ b)
    check(f, a, b, grads=True)


def test_jax_grad_called_through_call_jax(dev):
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    ga, gb = xb.call_jax(jax.grad(lambda a, b: jnp.sum(a + jnp.sin(b)), argnums=(0, 1)),
                         (a.to(dev), b.to(dev)))
    assert_same([ga, gb], [torch.ones(3, 3), torch.cos(b)])


def test_placeholder_traces_into_a_program_but_cannot_be_read(dev):
    import torch_xla
    import torch_xla.debug.metrics as met
    from torch_xla.core.xla_builder import create_placeholder_tensor
    met.clear_all()
    p = create_placeholder_tensor((2, 3), torch.bfloat16)
    assert p.device == dev and p.dtype == torch.bfloat16 and p.shape == (2, 3)
    assert torch_xla._XLAC._is_placecholder(p)
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([torch.sin(p) * 2])
    assert "bf16[2,3]" in hlo and met.metric_data("TransferToDeviceTime") is None
    with pytest.raises(RuntimeError):
        p.cpu()
    q = create_placeholder_tensor((2, 3), torch.bfloat16)
    handles = torch_xla._XLAC._get_tensors_handle([p, q])  # placeholders are named, apart
    assert handles[0] != handles[1]
    donated = torch.ones(2).to(dev)  # a buffer, as an input of the next program
    torch_xla._XLAC._xla_set_enable_alias_with_buffer_donor_config(True)
    torch_xla._XLAC._set_buffer_donation(donated, True)
    _ = donated + 1
    torch_xla.sync(wait=True)
    try:
        with pytest.raises(RuntimeError, match="deleted"):  # a donated buffer has no handle
            torch_xla._XLAC._get_tensors_handle([donated])
    finally:
        torch_xla._XLAC._xla_set_enable_alias_with_buffer_donor_config(False)


def test_flattened_input_func_splits_a_call_into_tensors_and_the_rest():
    def f(nested, items, scale=1):
        return {"sum": nested["a"]["b"] * scale + items[2], "n": len(items)}
    flat = xb.FlattenedInputFunc(f)
    t = torch.arange(3.0)
    tensors = flat.preprocess(({"a": {"b": t}}, [0, 1, t + 1]), {"scale": 2})
    assert len(tensors) == 2
    out = flat.postprocess(flat.flat_call((torch.ones(3), torch.zeros(3))))
    assert out["n"] == 3 and out["sum"].tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="before preprocess"):
        xb.FlattenedInputFunc(f).flat_call(())


def test_xla_callable_builds_one_computation_per_signature(dev):
    def f(pair, scale):
        a, b = pair
        return {"y": xb.Op.sin(a) * b, "z": [a + b * xb.Op.scalar(a.builder(), scale)]}
    fn = xb.XlaCallable(f)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = fn((a.to(dev), b.to(dev)), 2.0)
    assert_same(out["y"], torch.sin(a) * b)
    assert_same(out["z"][0], a + b * 2.0)
    fn((a.to(dev), b.to(dev)), 2.0)
    fn((a[:1].to(dev), b[:1].to(dev)), 2.0)
    fn((a.to(dev), b.to(dev)), 3.0)
    assert len(fn._cache) == 3  # one per shape and per scale


def test_computation_from_module_proto_runs_the_module_in_the_step(dev):
    """An HLO module's proto (a LoweringContext's, a jax function's) as a computation:
    applied to XLA tensors, it runs inlined in the step's program; its text is its HLO."""
    a = torch.tensor([1.0, 2.0, 3.0], device=dev)
    b = torch.tensor([4.0, 5.0, 6.0], device=dev)
    torch_xla.sync()
    ctx = torch_xla._XLAC.lowering.LoweringContext("scaled_sum")
    ctx.build([(a + b) * 2.5])
    comp = xb.computation_from_module_proto("scaled_sum", ctx.hlo())
    assert xb.get_computation_hlo(comp).startswith("HloModule scaled_sum")
    params = ctx.parameter_id_tensor_mapping()
    x, y = torch.ones(3, device=dev), torch.arange(3.0, device=dev)
    inputs = [x if i == ctx.tensor_parameter_id(a) else y if i == ctx.tensor_parameter_id(b)
              else params[i].to(dev) for i in sorted(params)]
    before = compiles()
    (out,) = torch_xla._XLAC._xla_user_computation("xla::scaled_sum", inputs, comp)
    assert_same(out * 2, (torch.ones(3) + torch.arange(3.0)) * 5)
    assert compiles() == before + 1  # one program: the module and the multiply after it

    low = jax.jit(lambda p, q: (_sin_plus(p, q), p.sum())).lower(
        jax.ShapeDtypeStruct((3,), jnp.float32), jax.ShapeDtypeStruct((3,), jnp.float32))
    func = xb.xla_computation_as_func(
        xb.computation_from_module_proto("f", low.compiler_ir("hlo").as_serialized_hlo_module_proto()))
    total, s = func([a, b])
    assert_same(total, torch.tensor([1.0, 2.0, 3.0]) + torch.sin(torch.tensor([4.0, 5.0, 6.0])))
    assert_same(s, torch.tensor(6.0))
