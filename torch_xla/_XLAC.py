"""The `torch_xla._XLAC` helpers that scripts call directly.

In torch_xla these live in the C++ extension; here they are thin functions over the lazy
engine with the same names and arguments.
"""
from torch_xla._lazy import execution as _execution
from torch_xla._lazy import graph_dump as _graph_dump
from torch_xla._lazy import metrics as _metrics
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


def _get_stablehlo(tensors, device: str = "", devices=(), emit_bytecode: bool = False):
    """The StableHLO of the program that would compute `tensors` (all pending ones on the
    first device if empty): its text, or with `emit_bytecode` its bytecode (bytes)."""
    if emit_bytecode:
        return _graph_dump.program_bytecode(list(tensors) or None)
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
