"""The `torch_xla._XLAC` helpers that scripts call directly.

In torch_xla these live in the C++ extension; here they are thin functions over the lazy
engine with the same names and arguments.
"""
from torch_xla._lazy import execution as _execution
from torch_xla._lazy import graph_dump as _graph_dump
from torch_xla._lazy import metrics as _metrics
from torch_xla._lazy import sharding as _sharding
from torch_xla._lazy import tensor as _tensor


def _get_xla_tensors_text(tensors) -> str:
    """The pending IR behind `tensors` as text."""
    return _graph_dump.ir_text(list(tensors))


def _get_xla_tensors_hlo(tensors) -> str:
    """The HLO text of the program that would compute `tensors`."""
    return _graph_dump.program_text(list(tensors), "hlo")


def _get_xla_tensors_dot(tensors) -> str:
    """The pending graph behind `tensors` in Graphviz dot."""
    return _graph_dump.dot(list(tensors))


def _get_stablehlo(tensors, device: str = "", devices=(), emit_bytecode: bool = False) -> str:
    """The StableHLO text of the program that would compute `tensors` (all pending ones on
    the first device if empty)."""
    if emit_bytecode:
        raise NotImplementedError("StableHLO bytecode: use jax.export on the lowered program")
    return _graph_dump.program_text(list(tensors) or None, "stablehlo")


def _xla_get_default_device() -> str:
    return "xla:0"


def _xla_get_default_device_ordinal() -> int:
    return 0


def _xla_sync_multi(tensors, devices=(), wait: bool = True, sync_xla_data: bool = True) -> None:
    """Materialises `tensors` (one program per device)."""
    _execution.materialize([_tensor.unwrap(t)._value for t in tensors])


def _xla_step_marker(device: str = "", devices=(), wait: bool = True) -> None:
    _execution.mark_step()


def _xla_metrics_report() -> str:
    return _metrics.metrics_report()


def _xla_counter_value(name: str):
    return _metrics.counter_value(name)


def _get_xla_sharding_spec(t) -> str:
    """`t`'s sharding as XLA prints it (`{devices=[2,1]0,1}`), '' if it has none."""
    return _sharding.spec_text(t)


def _get_xla_sharding_type(t):
    """`t`'s sharding type (an OpSharding type number), None if it has none."""
    return _sharding.spec_kind(t)
