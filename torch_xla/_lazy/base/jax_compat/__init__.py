"""Every private jax or jaxlib API the package uses, in one place, each with why no public one
serves; what differs between the jax releases pyproject.toml admits is decided here by
asking the running jax (the presence of a name), not by its version number.

A jax release that moves one of these breaks this package, and tests/_lazy/base/jax_compat/ calls
each, so that it breaks there first. `executables` takes a compiled program apart into its
XLA executable's bytes and a plain description, and puts it back together (program_store).
Public replacements already used elsewhere: `jax.extend.mlir` (ir, dialects, `hlo_to_stablehlo`), `jax.extend.backend`
(`register_backend_factory`), `jax.extend.random.threefry2x32_p`, `jax.core.ShapedArray`.

Checked against jax's changelog for 0.11.0 and the unreleased 0.12 (which drop Python 3.11,
remove names from `jax.core` and `jax.interpreters.pxla`, make `jnp.empty` uninitialized and
refuse to deserialize exports older than 2026-01-15): none of those names is used, the package
never calls `jnp.empty`, and the exports it builds
(`exported_module`) are never serialized, so each of those changes leaves it working.
"""
import dataclasses
import functools

from jax._src import config as _config
from jax._src import core as _core
from jax._src import distributed as _distributed
from jax._src import xla_bridge as _xla_bridge
from jax._src.export import _export
from jax._src.interpreters import mlir as _mlir
from jax._src.lax import lax as _lax
from jax._src.lib import _jax, hlo as _hlo, xla_client as _xla_client

# Symbolic sizes (shape polymorphism): jax's arithmetic on them has no public API.
is_constant_shape = _core.is_constant_shape
definitely_equal = _core.definitely_equal
max_dim = _core.max_dim
min_dim = _core.min_dim

# A lowering rule's helpers that `jax.interpreters.mlir` does not export: the run-time shape
# of a value with symbolic sizes, and a `stablehlo.custom_call` of any API version with a
# string backend config (the public `jax.ffi.ffi_call` makes typed-FFI calls only).
eval_dynamic_shape_as_tensor = _mlir.eval_dynamic_shape_as_tensor
custom_call = _mlir.custom_call


def convert_weak(x, dtype):
    """`x` converted to `dtype` and marked weakly typed, as jax marks a Python scalar:
    `jax.lax.convert_element_type` has no `weak_type` argument."""
    return _lax._convert_element_type(x, dtype, weak_type=True)


def trace_context():
    """jax's configuration that a traced function depends on (jit's own cache key part)."""
    return _config.trace_context()


def swap_pallas_interpret_mode(value):
    """Sets Pallas's interpret mode for this thread and returns the previous setting (give it
    back to `set_pallas_interpret_mode`). jax's public `force_tpu_interpret_mode` sets TPU
    interpret mode (a simulated TPU), not the plain interpreter the CPU needs."""
    return _config.pallas_tpu_interpret_mode_context_manager.swap_local(value)


def set_pallas_interpret_mode(value) -> None:
    _config.pallas_tpu_interpret_mode_context_manager.set_local(value)


def threefry_unrolled_lowering():
    """jax's threefry2x32 lowering with its 20 rounds unrolled (what jax uses off the CPU), or
    None where this jax lacks the `use_rolled_loops` switch."""
    try:
        from jax._src.random.threefry2x32 import _threefry2x32_lowering
    except ImportError:
        return None
    return functools.partial(_threefry2x32_lowering, use_rolled_loops=False)


# The runtime: whether jax's backends started, the distributed client that `jax.distributed`
# made (its key-value store and barriers), and the CPU client made with gloo collectives
# listening at an address of our choosing.
def backends_are_initialized() -> bool:
    return _xla_bridge.backends_are_initialized()


def distributed_client():
    """`jax.distributed`'s client (barriers, key-value store), or None before it joined."""
    return _distributed.global_state.client


def cpu_client_factory_with_gloo(address: str):
    """A factory of jax's CPU client whose collectives are gloo's, listening at `address`."""
    collectives = _jax.make_gloo_tcp_collectives(distributed_client=distributed_client(),
                                                 hostname=address)
    return functools.partial(_xla_bridge.make_cpu_client, collectives=collectives)


# HLO modules: jaxlib's XlaComputation, its printer's options, StableHLO -> HLO.
XlaComputation = _xla_client.XlaComputation


def hlo_print_options():
    """XLA's `HloPrintOptions` (jaxlib's HLO printer; jax's `as_text` prints with fixed ones)."""
    return _hlo.HloPrintOptions()


def stablehlo_to_xla_computation(text: str, use_tuple_args: bool):
    return _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=use_tuple_args)


def lowered_tuple_args(lowered) -> bool:
    """Whether jax's `Lowered` passes its arguments as one tuple (many arguments on TPU)."""
    return lowered._lowering.compile_args["tuple_args"]


def exported_module(stablehlo: bytes, *, fun_name, in_avals, out_avals, platform):
    """A `jax.export.Exported` of a StableHLO module (bytes of its text or bytecode) whose
    arguments and results are `in_avals`/`out_avals`, on one device of `platform`: its
    `call(*arrays)` inlines the module into the jax function calling it. jax makes Exported
    only by exporting a jax function; its fields are filled here, the ones this jax has."""
    import jax
    from jax.extend.mlir import ir
    with _mlir.make_ir_context():
        body = _export._module_to_bytecode(ir.Module.parse(stablehlo))
    n_in, n_out = len(in_avals), len(out_avals)
    fields = dict(
        fun_name=fun_name, in_tree=jax.tree.structure(((0,) * n_in, {})), in_avals=in_avals,
        out_tree=jax.tree.structure((0,) * n_out), out_avals=out_avals,
        _has_named_shardings=False, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out, nr_devices=1, platforms=(platform,),
        ordered_effects=(), unordered_effects=(), disabled_safety_checks=(),
        mlir_module_serialized=body,
        calling_convention_version=_export.minimum_supported_calling_convention_version,
        module_kept_var_idx=tuple(range(n_in)), uses_global_constants=False, _get_vjp=None)
    known = {f.name for f in dataclasses.fields(jax.export.Exported)}
    return jax.export.Exported(**{k: v for k, v in fields.items() if k in known})
