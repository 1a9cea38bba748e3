"""Eager mode: each op the user calls is computed without a sync; its errors raise at the op.

Two ways to run it. Fused (the default, `eager_fused`): ops are traced and run as fused
programs cut where steps repeat. Op by op (upstream torch_xla's eager mode: `op_by_op=True`,
XLA_EAGER_OP_BY_OP=1 or XLA_USE_EAGER_DEBUG_MODE=1): the dispatch entry traces an op as always
and then runs what its outputs need at once (`run_outputs`), as one program; the op's own
decomposition, the ops a kernel calls inside the engine, stay in that one program (only the
outermost dispatch on a thread runs its outputs). Programs are cached by the graph's
structure, as every program is, so a loop of the same ops compiles each op once; their
compilations and runs are counted as `EagerOpCompileTime` and `EagerOpExecuteTime` (not
`CompileTime`/`ExecuteTime`). A value check (an index out of range) is read at the op, so it
raises there.

The mode is one setting for the process, as in torch_xla; `torch_xla.compile` turns it off
while its function is traced.
"""
import os
import threading

from ..step import deferred_checks, execution
from . import eager_fused
from ..launch import op_programs
from ..inspect import graph_save
from ..runtime import pjrt
from ..graph.tensor import XLATensor

ON = [False]  # the setting, read by the dispatch entry at each op
OP_BY_OP = [os.environ.get("XLA_EAGER_OP_BY_OP", "0") == "1"
            or os.environ.get("XLA_USE_EAGER_DEBUG_MODE", "0") == "1"]
_depth = threading.local()  # per thread: an op of this thread is being dispatched


def set_enabled(enable: bool, op_by_op=None) -> None:
    """Eager mode on or off; `op_by_op` (None: as it was) picks how it runs."""
    ON[0] = bool(enable)
    if op_by_op is not None:
        OP_BY_OP[0] = bool(op_by_op)
    execution.time_as_eager(ON[0] and OP_BY_OP[0])
    eager_fused.set_enabled(ON[0] and not OP_BY_OP[0])


def enabled() -> bool:
    return ON[0]


def op_by_op() -> bool:
    """Whether eager mode, when on, runs each op as its own program."""
    return OP_BY_OP[0]


def outermost() -> bool:
    """Whether no op is being dispatched on this thread."""
    return not getattr(_depth, "inside", False)


def call(dispatch, func, args, kwargs):
    """`dispatch(func, args, kwargs)` as the outermost dispatch of the thread; then, op by
    op, the pending values of its outputs and arguments run (an op may write an argument its
    schema does not mark: batch norm's running statistics), or, fused, the op is counted
    towards the next cut."""
    fused = not OP_BY_OP[0]
    if fused:
        eager_fused.before_op()
    _depth.inside = True
    try:
        out = dispatch(func, args, kwargs)
    finally:
        _depth.inside = False
    if fused:
        eager_fused.after_op()
        return out
    values = _pending_values(args, _pending_values(out, []))
    if values:
        _run(values)
    return out


def _pending_values(out, found):
    """The pending values of the XLA tensors in `out` (nested tuples and lists), appended to
    `found`."""
    t = type(out)
    if t is XLATensor:
        value = out._value
        if value.node is not None:
            found.append(value)
    elif t is tuple or t is list:
        for o in out:
            _pending_values(o, found)
    return found


def _op_key(op_type, inputs):
    """The key of an op's program: its node's type (`ir.node_type`), its inputs' signatures
    and which inputs are the same value; None where an input is pending or carries value
    checks (the node's way carries them to the outputs)."""
    parts = [op_type]
    for v in inputs:
        if v.data is None or v.checks:
            return None
        parts.append(v.key)
        parts.append(inputs.index(v))  # (values compare by identity)
    return tuple(parts)


def _one_node(values):
    """The node all `values` are the outputs of, each once, in order; else None."""
    node = values[0].node
    if len(values) != len(node.avals):
        return None
    for i, v in enumerate(values):
        if v.node is not node or v.index != i:
            return None
    return node


def run_outputs(out) -> None:
    """Runs the pending values of `out` (a tensor, or a tuple or list of them) now."""
    values = _pending_values(out, [])
    if values:
        _run(values)


def _relaunchable(op) -> bool:
    """Whether an op of lowering `op` may run by its cached program alone: no collective,
    no value check waiting (a program of its device reads it), no SPMD."""
    return not op.collective and not deferred_checks.has_checks() and not pjrt.is_spmd()


def _run(values) -> None:
    """Runs the pending `values` of one op: an op seen before, on computed inputs,
    relaunches its program at once."""
    node = _one_node(values)
    key = None
    if node is not None and _relaunchable(node.op):
        key = _op_key(node.type, node.inputs)
        if key is not None:
            outputs = _launch(key, node.inputs, node.scalars, values[0].device)
            if outputs is not None:
                for v, o in zip(values, outputs):
                    v.set_data(o)
                return
    program = execution.materialize(values, eager=True)
    if key is not None and program is not None and len(program.plan) == 1:
        op_programs.remember(key, node, program)


def relaunch(op, op_type, inputs, scalars, device):
    """The output buffers of an op (lowering `op`, node type `op_type`) on `inputs` and
    `scalars`, from the program it ran as before, launched without making a node (the
    dispatch entry wraps them); None where the op takes the node's way (`_run`): no program
    yet, pending inputs or checks, a random op (its seed is drawn once, for the node)."""
    if op.rng or not _relaunchable(op):
        return None
    key = _op_key(op_type, inputs)
    if key is None:
        return None
    outputs = _launch(key, inputs, scalars, device)
    if outputs is not None:
        for v in inputs:
            v.as_input = True  # (as a node's making marks them)
    return outputs


def _launch(key, inputs, scalars, device):
    """`op_programs.launch`'s outputs; None while graphs are saved (a graph saved is walked:
    the general path)."""
    return None if graph_save.enabled() else op_programs.launch(key, inputs, scalars, device)
