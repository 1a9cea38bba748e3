"""The `torch_xla._XLAC` helpers that scripts call directly.

In torch_xla these live in the C++ extension; here they are thin functions over the lazy
engine with the same names and arguments.
"""

import json
import types

import jax
import torch

from torch_xla import _lazy
from torch_xla._lazy.runtime import device_info as _device_info
from torch_xla._lazy.hooks import device as _device
from torch_xla._lazy.launch import donation as _donation
from torch_xla._lazy.graph import dynamic_shape_detector as _detector
from torch_xla._lazy.step import execution as _execution
from torch_xla._lazy.inspect import graph_dump as _graph_dump
from torch_xla._lazy.inspect import lowering_context as _lowering_context
from torch_xla._lazy.graph import ir as _ir
from torch_xla._lazy.trace import collective_ops as _coll
from torch_xla._lazy.trace import ready as _ready
from torch_xla._lazy.base import scopes as _scopes
from torch_xla._lazy.trace import eager as _eager
from torch_xla._lazy.base import counters as _counters
from torch_xla._lazy.runtime import preemption as _preemption
from torch_xla._lazy.lowering import custom_call as _custom_call, precision as _precision
from torch_xla._lazy.lowering import quantized as _quantized
from torch_xla._lazy.trace import optimization_barrier as _barrier
from torch_xla._lazy.runtime import pjrt as _pjrt
from torch_xla._lazy.trace import mark_sharding as _sharding
from torch_xla._lazy.trace import op_sharding as _op_sharding
from torch_xla._lazy.graph import tensor as _tensor
from torch_xla._lazy.launch import transfers as _transfers
from torch_xla._lazy.graph import unbounded_dims as _unbounded_dims
from torch_xla._xlac_cached_graphs import (  # noqa: F401  (their _XLAC names)
    _get_base_seed_as_tensor, _get_seed_info_id, _get_tensors_xla_device_data_node,
    _run_cached_graph, _xla_get_rng_seed, _xla_get_tensor_id, _xla_warm_up_cache)


def _xla_mark_tensor(t, info: str):
    """`t` marked as a pattern's input or output (`info`: a `BoundaryMetadata` as JSON), as
    `torch.ops.xla.mark_tensor` marks it."""
    import torch_xla.experimental.xla_marker  # noqa: F401  (defines the op)
    info = json.loads(info)
    attr = info.get("attr")
    return torch.ops.xla.mark_tensor(t, info["name"], info["pos"], info["id"], info["is_input"],
                                     None if attr is None else tuple(attr.items()))


# torch_xla's `_XLAC.lowering` submodule.
lowering = types.SimpleNamespace(LoweringContext=_lowering_context.LoweringContext)


def _get_xla_tensors_text(tensors) -> str:
    """The pending IR behind `tensors` as text."""
    return _graph_dump.ir_text(list(tensors))


def _get_xla_tensors_hlo(tensors) -> str:
    """The HLO text of the program that would compute `tensors` (one holding a buffer is
    its parameter, returned as it is)."""
    return _graph_dump.tensors_hlo(list(tensors))


def _get_xla_tensors_dot(tensors) -> str:
    """The pending graph behind `tensors` in Graphviz dot."""
    return _graph_dump.dot(list(tensors))


def _get_stablehlo(tensors, device: str = "", devices=(), emit_bytecode: bool = False):
    """The StableHLO of the program that would compute `tensors` (all pending ones on the
    first device if empty): its text, or with `emit_bytecode` its bytecode (bytes)."""
    if emit_bytecode:
        return _graph_dump.program_bytecode(list(tensors) or None)
    return _graph_dump.program_text(list(tensors) or None, "stablehlo")


def _get_graph_hash(tensors) -> bytes:
    return _graph_dump.graph_hash(tensors)


def _xla_get_default_device() -> str:
    return _device_info.default_device()


def _xla_get_default_device_ordinal() -> int:
    return _pjrt.global_ordinal()


def _xla_real_devices(devices=()) -> list:
    """Runtime names ('CPU:3') of `devices` (default: this process's): the platform and the
    device's global index in the runtime."""
    return _device_info.real_devices(devices)


def _xla_device_kind(device: str) -> str:
    return _device_info.device_kind(device)


def _xla_get_device_attributes(device: str) -> dict:
    return _device_info.device_attributes(device)


def _xla_get_all_device_attributes() -> list:
    return _device_info.all_device_attributes()


def _xla_memory_info(device: str) -> dict:
    return _device_info.memory_info(device)


def _xla_sync_multi(tensors, devices=(), wait: bool = True, sync_xla_data: bool = True) -> None:
    """Materialises `tensors` (one program per device); while the buffer donor config is on,
    the programs take the buffers marked for donation."""
    _execution.materialize([_tensor.unwrap(t)._value for t in tensors],
                           donate=_donation.with_sync_multi[0])


def _xla_op_computation_from_module_proto(name: str, proto: bytes):
    """A computation of a serialized HloModuleProto (`xla_builder.computation_from_module_proto`)."""
    import torch_xla.core.xla_builder as xb
    return xb.computation_from_module_proto(name, proto)


def _xla_computation_text(computation) -> str:
    """The HLO text of an op builder's computation."""
    return computation.hlo_text()


def _xla_user_computation(opname: str, inputs, computation):
    """Runs `computation` (built with `xla_builder`'s op builder) on XLA tensors `inputs`
    as one op of the graph; returns its results as a list of tensors."""
    import torch_xla.core.xla_builder as xb
    return xb.xla_computation_as_func(computation, opname)(list(inputs))


def _clear_pending_irs(device: str) -> None:
    """Drops the pending graphs of the live tensors on `device` (they become placeholders:
    no value, nothing to compute)."""
    _device.clear_pending(device)


def _xla_step_marker(device: str = "", devices=(), wait: bool = True, reset_scope: bool = True) -> None:
    """Ends the step (`execution.mark_step`); with `wait`, returns once the programs have run;
    with `reset_scope`, raises if a profiler `Trace` region is open."""
    _execution.mark_step(wait=wait)
    if reset_scope:
        _scopes.reset()


def _xla_wait_device_ops(devices=()) -> None:
    """Blocks until everything queued on the devices has run."""
    _execution.wait_device_ops()


def _on_ready_callback(t, callback) -> None:
    """Calls `callback()` from another thread once `t`'s buffer is computed."""
    _ready.on_ready(t, callback)


def _set_use_eager_mode(enable: bool) -> None:
    """Eager mode on or off (`torch_xla.experimental.eager_mode`)."""
    _eager.set_enabled(enable)


def _get_use_eager_mode() -> bool:
    return _eager.enabled()


def _xla_metrics_report() -> str:
    return _counters.metrics_report()


def _xla_counter_value(name: str):
    return _counters.counter_value(name)


def _xla_optimization_barrier_(tensors) -> None:
    _barrier.optimization_barrier_(tensors)


def _get_xla_sharding_spec(t) -> str:
    """`t`'s sharding as XLA prints it (`{devices=[2,1]0,1}`), '' if it has none."""
    return _sharding.spec_text(t)


def _get_xla_sharding_type(t):
    """`t`'s sharding type (an OpSharding type number), None if it has none."""
    return _sharding.spec_kind(t)


def _get_xla_sharding_specs(tensors) -> list:
    return [_sharding.spec_text(t) for t in tensors]


OpSharding = _op_sharding.OpSharding


def _get_xla_op_sharding(t):
    """`t`'s sharding as an OpSharding, None if it has none or is in manual sharding mode."""
    s = _sharding.sharding_of(t)
    return None if s is None else OpSharding.of(s, len(t.shape))


def _xla_mark_sharding(t, op_sharding: OpSharding) -> None:
    """`mark_sharding` with an OpSharding."""
    _sharding.mark(t, op_sharding.sharding)


def _xla_annotate_custom_sharding(t, op_sharding: OpSharding) -> None:
    """`annotate_custom_sharding` with an OpSharding."""
    _sharding.annotate(t, op_sharding.sharding)


def _xla_clear_sharding(t) -> None:
    _sharding.clear(t)


def _spmd_full_to_shard_shape(t):
    """The per-device shard view of `t` in manual sharding mode, `t` laid out as its
    sharding says (`enable_manual_sharding` without the marking)."""
    s = _sharding.sharding_of(t)
    if s is None:
        raise RuntimeError("Input tensor is not sharded")
    return _sharding.enter_manual(t, s)


def _spmd_shard_to_full_shape(t, op_sharding: OpSharding, full_shape, dtype):
    """The global tensor of `full_shape` laid out by `op_sharding` whose shards are those of
    `t`, a tensor in manual sharding mode (`disable_manual_sharding`)."""
    if dtype != t.dtype:
        raise RuntimeError(f"_spmd_shard_to_full_shape: dtype {dtype} is not the tensor's "
                           f"{t.dtype}")
    return _sharding.leave_manual(t, op_sharding.sharding, tuple(full_shape))


def _mark_manual_sharding(t, op_sharding: OpSharding) -> None:
    _op_sharding.mark_manual(t, op_sharding)


def _xla_set_mat_mul_precision(precision: str) -> None:
    """Sets the precision of float32 products and convolutions ('default', 'high',
    'highest') for the programs compiled from now on."""
    _precision.set_level(precision)


def _xla_get_mat_mul_precision() -> str:
    return _precision.setting()


def _xla_dot_general(lhs, rhs, dimension_numbers, precision_config=None,
                     preferred_element_type=None):
    """XLA's DotGeneral of XLA tensors `lhs` and `rhs`: `dimension_numbers` is ((lhs
    contracting dims, rhs contracting dims), (lhs batch dims, rhs batch dims)) (a pair may be
    empty, a dim negative); the result has `preferred_element_type` (int32 for int8 operands:
    an s32 dot of s8 values) or the operands' promoted dtype. Operands of two dtypes (bfloat16
    activations, int8 weights) enter the dot as they are. Not differentiable."""
    if precision_config is not None:
        raise RuntimeError("_xla_dot_general: precision_config is not supported yet, default "
                           "precision setting will be applied.")
    for t, position in ((lhs, "first argument"), (rhs, "second argument")):
        if t.device.type != "xla":
            legacy_name = t.type().rsplit(".", 1)[-1].removesuffix("Tensor")
            raise RuntimeError(f"Expected input tensor ({position}) to be an actual XLA tensor. "
                               f"Got: {t.device.type.upper()}{legacy_name}Type. Consider moving "
                               f"it ({position}) to XLA.")
    ranks = (lhs.dim(), rhs.dim())
    numbers = tuple(tuple(tuple(_canonical_dim(d, rank) for d in side)
                          for side, rank in zip(tuple(pair) or ((), ()), ranks))
                    for pair in (list(dimension_numbers) + [()])[:2])
    dtype = preferred_element_type or torch.promote_types(lhs.dtype, rhs.dtype)
    out = jax.eval_shape(lambda a, b: jax.lax.dot_general(a, b, numbers),
                         jax.ShapeDtypeStruct(tuple(lhs.shape), "float32"),
                         jax.ShapeDtypeStruct(tuple(rhs.shape), "float32"))
    name = str(dtype).removeprefix("torch.")
    return _coll.apply(_quantized.DOT_GENERAL, [lhs, rhs], [(tuple(out.shape), dtype)],
                       dimension_numbers=numbers, dtype=name)[0]


def _canonical_dim(dim, rank):
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, "
                         f"{rank - 1}], but got {dim})")
    return int(dim) % rank


def _xla_custom_call(args, call_target, output_shapes, output_dtypes, has_side_effect=False,
                     backend_config="", api_version=0, frontend_attributes=None):
    """`stablehlo.custom_call @call_target` on XLA tensors `args`: a list of tensors of the
    given shapes and dtypes. Not differentiable; XLA resolves the target when the program
    is compiled (an unknown one fails there, naming it)."""
    if len(output_shapes) != len(output_dtypes):
        raise ValueError(f"{len(output_shapes)} output shapes and {len(output_dtypes)} dtypes")
    attributes = _custom_call.call_attributes(call_target, zip(output_shapes, output_dtypes),
                                              has_side_effect, backend_config, api_version,
                                              frontend_attributes or {})
    avals = [(shape, dtype) for (shape, _), dtype in zip(attributes["results"], output_dtypes)]
    return _coll.apply(_custom_call.CUSTOM_CALL, list(args), avals, **attributes)


def _set_allow_execution(allow: bool) -> None:
    """Whether programs may run from now on: when not, any execution raises a RuntimeError
    (for code that must only record, such as a compiled function's body)."""
    _execution.allow_execution[0] = bool(allow)


def _ir_text(v, data_device) -> str:
    """A value's IR as the debug info shows it: a pending node as torch_xla names its op
    (`aten::add`), then as the engine prints it; a buffer an op has read, or uploaded for a
    use, as the `xla::device_data` node torch_xla then holds for it (on `data_device`);
    else `None`."""
    node = v.node
    if node is not None:
        name = _ir.ir_op_name(node.op.name)
        return f"{name} {_ir.format_node(node)}" if name != node.op.name else _ir.format_node(node)
    if not v.as_input or data_device is None:
        return "None"
    return (f"{_ir.hlo_shape(v.shape, v.dtype)} xla::device_data, "
            f"xla_shape={_ir.hlo_shape(v.shape, v.dtype, layout=True)}, device={data_device}")


def _get_xla_tensor_debug_info(t) -> str:
    """What the engine holds for `t`: its id, device, shape, sharding, IR and device data, in
    torch_xla's layout (`XLA Shape: f32[4,2]`, `Data Shape: ...`)."""
    if t.device.type != "xla":
        return "Not a XLATensor\n"
    v = _tensor.unwrap(t)._value
    spec = _sharding.spec_text(t)
    host = _transfers.on_host(v)
    where = None
    if host is not None or v.data is None:
        data = ["XLAData: None"]
    else:
        devices = v.data.sharding.device_set  # known after the buffer was donated too
        sharded = len(devices) > 1 or bool(spec)  # data laid out on the mesh, or an SPMD output
        where = "SPMD:0" if sharded else _device_info.real_name(next(iter(devices)))
        data = ["XLAShardedData: " if sharded else "XLAData: ", f"  Data Device: {where}",
                f"  Data Shape: {_ir.hlo_shape(v.shape, v.dtype)}"]
        data += [f"  OpSharding: {spec or '{replicated}'}", f"  NumShards: {len(devices)}"] if sharded else \
            [f"  Data Handle: {'Deleted' if v.data.is_deleted() else v.data.unsafe_buffer_pointer()}"]
    device = "SPMD:0" if _pjrt.is_spmd() else f"xla:{v.device}"  # the virtual device
    lines = ["XLATensor {", f"TensorID: {_xla_get_tensor_id(t)}", f"Device: {device}",
             f"XLA Shape: {_ir.hlo_shape(v.shape, v.dtype)}", f"ShardingSpec: {spec or 'None'}",
             f"IR: {_ir_text(v, where)}", *data,
             f"Tensor on host: {'None' if host is None else f'with size {list(host.shape)}'}", "}"]
    return "\n".join(lines) + "\n"


def _set_ir_debug(enabled: bool) -> None:
    """Whether nodes and uploaded values record where they were made (XLA_IR_DEBUG)."""
    _ir.IR_DEBUG[0] = bool(enabled)


def _get_ir_debug() -> bool:
    return _ir.IR_DEBUG[0]


def _xla_tensors_report(nodes_threshold: int = 100, device: str = "") -> str:
    """The live tensors (on `device`, if given) whose graph has more than `nodes_threshold`
    nodes: id, shape, device, node count, where their value was made (under XLA_IR_DEBUG)
    and their IR."""
    index = (torch.device(device).index or 0) if device else None
    return _graph_dump.tensors_report(nodes_threshold, index, tensor_id=_xla_get_tensor_id)


def _check_tensor_need_materialization(tensors) -> list:
    """Per tensor, whether its value is still pending (a sync would compute it); False for
    a tensor not on an XLA device."""
    return [t.device.type == "xla" and _tensor.is_pending(t) for t in tensors]


def _get_executed_fallback_ops() -> list:
    """The ATen ops that ran through the CPU fallback since the counters were cleared."""
    return _counters.fallback_counters()


def _init_xla_lazy_backend() -> None:
    """Installs the engine into PyTorch (done at `import torch_xla`: a later call finds it
    installed)."""
    _lazy.install()


def _xla_increment_counter(name: str, n: int = 1) -> None:
    _counters.count(name, n)


def _get_xla_tensor_dimension_size(t, dim: int):
    """Size `dim` of `t` as an int32 tensor on its device: a bounded dynamic size as the
    program computes it (nothing read on the host)."""
    from torch_xla._lazy.trace import dynamic_sizes
    node = dynamic_sizes.node_of(t.shape[dim])
    if node is None:
        return torch.tensor(t.shape[dim], dtype=torch.int32, device=t.device)
    return _tensor.to_functional(_tensor.wrap(node.device_value())).to(torch.int32)


def _xla_tensors_from_aten(tensors, devices) -> list:
    """CPU tensors copied to the XLA devices named (one per tensor)."""
    return [t.to(torch.device(d)) for t, d in zip(tensors, devices)]


def _get_git_revs() -> dict:
    from torch_xla import version
    return {"torch": torch.version.git_version, "xla": version.__version__}


def _global_tensor_from_cpu_shards(shards, op_sharding: OpSharding, global_shape=None):
    """(SPMD) The global tensor laid out by `op_sharding` whose block on local device i is
    `shards[i]`; `global_shape` defaults to the blocks' shape times the layout's tiles."""
    return _sharding.from_cpu_shards(list(shards), op_sharding.sharding, global_shape)


def _set_buffer_donation(t, donate: bool) -> bool:
    """Marks `t`'s device buffer for donation to the next program that reads it (the tensor
    then becomes a placeholder); False if `t` has no buffer (it is pending)."""
    return _donation.set_donor(_tensor.unwrap(t)._value, donate)


def _get_buffer_donation(t) -> bool:
    data = _tensor.unwrap(t)._value.data
    return data is not None and _donation.is_donor(data)


def _is_placecholder(t) -> bool:
    """Whether `t`'s buffer was donated to a program (reading it raises)."""
    data = _tensor.unwrap(t)._value.data
    return data is not None and data.is_deleted()


def _xla_set_enable_alias_with_buffer_donor_config(enable: bool) -> None:
    """Whether `_xla_sync_multi(..., sync_xla_data=False)` donates the marked buffers too."""
    _donation.with_sync_multi[0] = bool(enable)


def _xla_get_enable_alias_with_buffer_donor_config() -> bool:
    return _donation.with_sync_multi[0]


def _xla_runtime_is_initialized() -> bool:
    return _device_info.is_initialized()


def _xla_get_auto_sharding() -> bool:
    """Whether XLA's auto-sharding is on: never here (`use_spmd(auto=True)` raises)."""
    return False


def _device_buffer(t):
    v = _tensor.unwrap(t)._value
    _execution.materialize([v])
    if v.data.is_deleted():
        raise RuntimeError("the tensor's device buffer is deleted (donated to a program)")
    return v.data


def _unsafe_buffer_pointer(t) -> int:
    """The device address of `t`'s buffer (computed first if pending)."""
    return _device_buffer(t).unsafe_buffer_pointer()


def _get_tensors_handle(tensors) -> list:
    """Per tensor, a number naming its device buffer (its address; a placeholder's own
    number); RuntimeError for a buffer deleted by donation."""
    return [_tensor_handle(t) for t in tensors]


def _tensor_handle(t) -> int:
    data = _tensor.unwrap(t)._value.data
    if data is not None and _device.placeholder_buffers.get(id(data)) is data:
        return id(data)
    return _device_buffer(t).unsafe_buffer_pointer()


_client = []  # the first start's outcome: None, or the error it raised


def _init_computation_client() -> None:
    """Starts the runtime (the PJRT client of PJRT_DEVICE) if it has not started. The first
    outcome is kept, as torch_xla keeps its client: after a failed start every call raises
    that error, whatever PJRT_DEVICE says since."""
    if not _client:
        try:
            _pjrt.device_type()  # (the device type first: jax's devices may be cached)
            _pjrt.jax_devices()
            _client.append(None)
        except RuntimeError as e:
            _client.append(e)
    if _client[0] is not None:
        raise _client[0]


def _xla_get_all_devices() -> list:
    """Runtime names ('CPU:3') of every device of the runtime, all processes'."""
    return _device_info.all_real_devices()


def _ensure_xla_coordinator_initialized(global_rank: int, world_size: int, master_addr: str,
                                        master_port: str = "8547") -> None:
    """That the processes' coordination service is up for `world_size` processes, this one
    `global_rank`. Here processes join jax.distributed's service when the runtime starts
    (xmp.spawn, or the TORCH_XLA_COORDINATOR variables): a runtime of one process needs
    none; a runtime that was not started as those processes cannot join them afterwards."""
    count, index = _pjrt.process_count(), _pjrt.process_index()
    if (count, index) != (int(world_size), int(global_rank)):
        raise RuntimeError(
            f"the runtime runs as process {index} of {count}, not {global_rank} of {world_size} "
            f"(coordinator {master_addr}:{master_port}): processes join when the runtime "
            "starts (xmp.spawn, or TORCH_XLA_COORDINATOR, TORCH_XLA_NUM_PROCESSES and "
            "TORCH_XLA_PROCESS_ID set before it)")


def _activate_preemption_sync_manager() -> None:
    """Starts watching for preemption notices (a SIGTERM here; several processes agree on
    the step through jax's sync point): `_sync_point_reached` reports them."""
    _preemption.activate()


def _deactivate_preemption_sync_manager() -> None:
    _preemption.deactivate()


def _sync_point_reached(step: int) -> bool:
    """Whether `step` is the first asked after a preemption notice."""
    return _preemption.reached(step)


def _get_xla_tensor_shape_type(t) -> str:
    """The element type of `t` as XLA names it ('f16', 's64', 'pred')."""
    return _ir.hlo_shape((), t.dtype).removesuffix("[]")


# The dynamic shape detector (what torch_xla.compile(max_different_graphs=N) uses), by
# torch_xla's names.
_dynamic_shape_detector_start_session = _detector.start_session
_dynamic_shape_detector_end_session = _detector.end_session
_dynamic_shape_detector_remove_session = _detector.remove_session
_dynamic_shape_detector_set_max_different_graphs = _detector.set_max_different_graphs
_dynamic_shape_detector_get_max_different_graphs = _detector.max_different_graphs

# torch_xla's unbounded dynamism: a dim of a tensor symbolic (`?`) in the StableHLO text
_xla_mark_dynamic = _unbounded_dims.mark
