"""The lowering of products over integer weights: which backends' programs keep a dot's
operands of two dtypes (TPU; the CPU for 8-bit operands) and which widen them first, and that
both give the product of the values. (The op `xla::quantized_matmul` on XLA tensors is
tested with its public module, tests/experimental/test_xla_quantized_matmul.py.)"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch_xla._lazy.lowering.quantized import dot_general

LINEAR = (((1,), (1,)), ((), ()))


def _dot_operands(fn, platform, *avals):
    """The operand types of the dot_general in `fn`'s StableHLO for `platform`."""
    text = jax.export.export(jax.jit(fn), platforms=[platform])(*avals).mlir_module()
    return re.findall(r"stablehlo\.dot_general .*: \((tensor<[^>]*>), (tensor<[^>]*>)\)", text)


@pytest.mark.parametrize("platform, kept", [("cpu", True), ("tpu", True), ("cuda", False)])
def test_an_int8_weight_enters_the_dot_as_it_is_where_the_backend_compiles_that(platform, kept):
    operands = _dot_operands(lambda x, w: dot_general(x, w, LINEAR, jnp.bfloat16), platform,
                             jax.ShapeDtypeStruct((3, 5), jnp.bfloat16),
                             jax.ShapeDtypeStruct((8, 5), jnp.int8))
    assert operands == [("tensor<3x5xbf16>", "tensor<8x5xi8>" if kept else "tensor<8x5xbf16>")]


@pytest.mark.parametrize("platform, kept", [("cpu", False), ("tpu", True), ("cuda", False)])
def test_an_int4_weight_is_widened_first_except_on_tpu(platform, kept):
    operands = _dot_operands(lambda x, w: dot_general(x, w.astype(jnp.int4), LINEAR, jnp.bfloat16),
                             platform, jax.ShapeDtypeStruct((3, 5), jnp.bfloat16),
                             jax.ShapeDtypeStruct((8, 5), jnp.int8))
    assert operands == [("tensor<3x5xbf16>", "tensor<8x5xi4>" if kept else "tensor<8x5xbf16>")]


@pytest.mark.parametrize("weight_dtype", [jnp.int8, jnp.int4])
def test_mixed_products_are_the_products_of_the_values(weight_dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = rng.integers(-8, 8, (6, 16)).astype(np.int8)
    out = jax.jit(lambda a, b: dot_general(a, b.astype(weight_dtype), LINEAR, jnp.float32))(x, w)
    np.testing.assert_allclose(np.asarray(out), x @ w.T.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_operands_of_one_dtype_make_jax_s_own_dot_in_the_preferred_type():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (3, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (5, 64)).astype(np.int8)
    fn = lambda a, b: dot_general(a, b, LINEAR, jnp.int32)
    assert _dot_operands(fn, "cpu", a, b) == [("tensor<3x64xi8>", "tensor<5x64xi8>")]
    out = jax.jit(fn)(a, b)
    assert out.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(out), a.astype(np.int32) @ b.T.astype(np.int32))
