"""Each private jax API the package uses (torch_xla/_lazy/base/jax_compat/), called on its own, so
that a jax release that moves one fails here, naming it, before it fails somewhere deep
(`executables`, the compiled programs taken apart and rebuilt: test_executables.py)."""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from torch_xla._lazy.base import jax_compat

COMPAT = pathlib.Path(jax_compat.__file__).resolve().parent
PACKAGE = COMPAT.parent.parent


def test_private_jax_is_used_only_in_the_compatibility_package():
    users = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if "jax._src" in p.read_text() and COMPAT not in p.parents)
    assert not users, users


def test_symbolic_size_arithmetic():
    n, = export.symbolic_shape("n")
    assert not jax_compat.is_constant_shape((n, 3)) and jax_compat.is_constant_shape((2, 3))
    assert jax_compat.definitely_equal(n, n) and not jax_compat.definitely_equal(n, 3)
    assert str(jax_compat.max_dim(n - 2, 0)) == "max(n - 2, 0)"
    assert str(jax_compat.min_dim(n, 4)) == "min(n, 4)"
    assert jax_compat.max_dim(5, 0) == 5


def test_weak_conversion_keeps_the_other_operand_dtype():
    x = jax_compat.convert_weak(jnp.float32(2.5), np.dtype(np.float32))
    assert x.weak_type
    assert (jnp.ones(2, jnp.bfloat16) * x).dtype == jnp.bfloat16


def test_trace_context_follows_the_configuration():
    before = jax_compat.trace_context()
    with jax.default_matmul_precision("highest"):
        assert jax_compat.trace_context() != before
    assert jax_compat.trace_context() == before


def test_pallas_interpret_mode_swaps_and_restores():
    previous = jax_compat.swap_pallas_interpret_mode(True)
    try:
        assert jax_compat.swap_pallas_interpret_mode(True) is True
    finally:
        jax_compat.set_pallas_interpret_mode(previous)


def test_threefry_unrolled_lowering_gives_jax_values():
    assert jax_compat.threefry_unrolled_lowering() is not None
    key = jax.random.key(3)
    # the package registers it for the CPU at import of its random lowerings
    import torch_xla._lazy.lowering.random as random_lowerings
    assert random_lowerings.THREEFRY_UNROLLED
    np.testing.assert_array_equal(jax.jit(lambda k: jax.random.bits(k, (4,)))(key),
                                  jax.random.bits(key, (4,)))


def test_runtime_state():
    jax.devices()
    assert jax_compat.backends_are_initialized()
    assert jax_compat.distributed_client() is None  # this process joined no group


def test_hlo_module_round_trip_through_an_export():
    lowered = jax.jit(lambda x, y: (x * y + 1.0,)).lower(jnp.ones(3, jnp.float32), jnp.ones(3, jnp.float32))
    text = lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=False)
    computation = jax_compat.stablehlo_to_xla_computation(
        text, jax_compat.lowered_tuple_args(lowered))
    serialized = computation.as_serialized_hlo_module_proto()
    options = jax_compat.hlo_print_options()
    options.print_percent = True
    assert "%" in jax_compat.XlaComputation(serialized).get_hlo_module().to_string(options)

    from jax.extend.mlir import hlo_to_stablehlo
    aval = jax.core.ShapedArray((3,), np.float32)
    exported = jax_compat.exported_module(hlo_to_stablehlo(serialized), fun_name="f",
                                          in_avals=(aval, aval), out_avals=(aval,),
                                          platform="cpu")
    out, = jax.jit(exported.call)(jnp.full(3, 2.0, jnp.float32), jnp.full(3, 3.0, jnp.float32))
    np.testing.assert_array_equal(out, np.full(3, 7.0, np.float32))


@pytest.mark.parametrize("name", ["custom_call", "eval_dynamic_shape_as_tensor"])
def test_lowering_helpers_are_there(name):
    """Both run inside lowering rules, which the custom-call and unbounded-dimension tests
    drive; here only that this jax still has them."""
    assert callable(getattr(jax_compat, name))
