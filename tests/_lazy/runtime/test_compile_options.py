"""XLA's options per program on the CPU: a program without matrix products is compiled with
XLA's LLVM IR fusion emitters (faster to compile, the same bits), one with products with
XLA's default."""
import jax.numpy as jnp
import numpy as np

from torch_xla._lazy.runtime import runner


def _options(fn, *args):
    return runner.on_device(0).options(runner.lower(fn, args))


def test_ir_emitters_for_programs_without_products_only():
    x = np.ones((4, 8), np.float32)
    assert _options(lambda a: jnp.exp(a - a.max(1, keepdims=True)), x)["xla_cpu_use_fusion_emitters"] is False
    assert "xla_cpu_use_fusion_emitters" not in _options(lambda a: jnp.tanh(a @ a.T), x)
    looped = lambda a: __import__("jax").lax.fori_loop(0, 3, lambda i, b: b @ b, a @ a.T)  # noqa: E731
    assert "xla_cpu_use_fusion_emitters" not in _options(looped, x)  # a product in a region


def test_both_kinds_compute_the_same_bits():
    x = np.random.default_rng(0).standard_normal((16, 33)).astype(np.float32)
    fn = lambda a: jnp.tanh(a) * 0.9 + jnp.exp(-a * a) / (1 + jnp.abs(a))  # noqa: E731
    lowered = runner.lower(fn, (x,))
    ir = lowered.compile(runner.on_device(0).options(lowered))(x)
    default = runner.lower(fn, (x,)).compile(runner.on_device(0).options())(x)
    assert np.array_equal(np.asarray(ir), np.asarray(default))
