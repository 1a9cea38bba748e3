"""Looking inside the graph without running it: the pending IR as text, the StableHLO (text
or bytecode) or HLO text of the program that would run, and the graph as Graphviz dot.

All three use the lazy path's own walk (`graph_program.walk`), so what they show is exactly what
`mark_step` would compile for these tensors: the same nodes in the same order, and for
the program text, jax's lowering of the same function the runner compiles.
"""
import hashlib
import os

import torch

from ..launch import donation, graph_program, program_kinds
from . import hlo_proto
from ..runtime import runner
from ..graph import unbounded_dims
from ..runtime.compile_explanation import format_avals
from ..lowering import Lowering, composite
from ..graph.ir import In, Node, Value, fill_template, hlo_shape, ir_op_name, xla_shape
from ..graph.tensor import XLATensor, live_tensors, live_values, unwrap


def _values(tensors):
    """The values behind `tensors`; None: every live pending value of the first device."""
    if tensors is None:
        return [v for v in live_values(0) if v.node is not None]
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    values = [t._value if isinstance(t, XLATensor) else unwrap(t)._value for t in tensors]
    devices = {v.device for v in values}
    if len(devices) > 1:
        raise RuntimeError(f"tensors on several XLA devices: {sorted(devices)}")
    return values


def _walk(tensors):
    return graph_program.walk(_values(tensors))


# torch_xla's HLO of a tensor that holds a buffer is the program returning that parameter as
# it is (with its sharding under SPMD): a node of this identity stands for it in the dump.
_DEVICE_DATA = Lowering("xla::device_data", lambda x: x, False, False, False)


def _as_outputs(values):
    """`values` with each buffer made the pending output of a `_DEVICE_DATA` node."""
    return [Value(v.shape, v.dtype, v.device,
                  node=Node(_DEVICE_DATA, ((In(0),), ()), (v,), (), ((v.shape, v.dtype),)))
            if v.node is None and v.data is not None else v for v in values]


def _leaf_names(w):
    """Names of the program's buffer parameters, in program argument order."""
    donated, kept, _ = w.args
    return [f"p{i}" for i in range(len(donated) + len(kept))]


def _arguments(name):
    """(name, type) of each argument in the schema of ATen op `name` (`aten.add.Tensor`)."""
    namespace, _, rest = name.partition(".")
    packet, _, overload = rest.partition(".")
    try:
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")
        return [(a.name, str(a.type)) for a in op._schema.arguments]
    except (AttributeError, RuntimeError):
        return []


_CONSTANT_DTYPES = {int: torch.int64, float: torch.float64, bool: torch.bool, complex: torch.complex128}


def _names_in(arg):
    if isinstance(arg, _Name):
        return [arg]
    if isinstance(arg, (tuple, list)):
        return [n for a in arg for n in _names_in(a)]
    return []


def ir_text(tensors) -> str:
    """The IR behind `tensors` in torch_xla's layout: `%3 = f32[2,2]{1,0} aten::mm(%0, %2),
    xla_shape=f32[2,2]{1,0}`, one value a line, in torch_xla's order (post order, each
    node's operands visited last first). A buffer, or a dynamic scalar (a program
    parameter: equal scalars share one), is an `xla::device_data()` line, a number the
    program holds as a constant (a static Scalar argument, such as pow's exponent) a
    `prim::Constant()`, arguments that are not tensors follow as `name=value`, and each of
    `tensors` says `ROOT=k` (its place among them): one holding a buffer is its
    `xla::device_data()`."""
    return walk_text(graph_program.walk(_as_outputs(_values(tensors))))


def walk_text(w) -> str:
    """`ir_text` of a walk (None: nothing pending); a node of `_DEVICE_DATA` is the buffer it
    reads."""
    if w is None:
        return "IR {\n  (no pending computation)\n}\n"
    donated, kept, _ = w.args
    params, slots = [*donated, *kept], w.program.slots
    # key -> (head, tail, operand _Names): ("p", i) a buffer, ("s", n) a scalar parameter,
    # ("n", i) a node (a `_DEVICE_DATA` node: the _Name of its buffer), ("c", k) a constant
    lines = {}

    def leaf(key, shape, dtype, op):
        if key not in lines:
            shape = hlo_shape(shape, dtype, layout=True)
            lines[key] = (f"{shape} {op}", f", xla_shape={shape}", ())
        return _Name(key)

    def constant(value):
        """A number the program holds, of its type's dtype (as a scalar parameter's)."""
        return leaf(("c", len(lines)), (), _CONSTANT_DTYPES[type(value)], "prim::Constant")

    def name(pos, index):
        """The _Name of output `index` of the walk's node `pos` (< 0: parameter `index`)."""
        if pos < 0:
            a = params[index]
            return leaf(("p", index), a.shape, a.dtype, "xla::device_data")
        line = lines[("n", pos)]
        if isinstance(line, _Name):
            return line
        return _Name(("n", pos), index if len(w.order[pos].avals) > 1 else None)

    for i, (node, (_, template, refs, s0, s1, avals)) in enumerate(zip(w.order, w.program.plan)):
        inputs = [name(pos, index) for pos, index in refs]
        if node.op is _DEVICE_DATA:
            lines[("n", i)] = inputs[0]  # the buffer itself
            continue
        scalars = [leaf(("s", slots[k]), (), w.program.slot_dtypes[slots[k]], "xla::device_data")
                   for k in range(s0, s1)]
        args, kwargs = fill_template(template, inputs, scalars)
        schema = _arguments(node.op.name)
        types = dict(schema)
        operands, attributes = [], []
        for (arg, kind), a in [*((schema[j] if j < len(schema) else (f"arg{j}", ""), a)
                                 for j, a in enumerate(args)),
                               *(((k, types.get(k, "")), v) for k, v in kwargs)]:
            found = _names_in(a)
            if found:
                operands += found
            elif kind == "number" and type(a) in _CONSTANT_DTYPES:  # a Scalar argument
                operands.append(constant(a))
            else:
                attributes.append((arg, a))
        extra = [f"{k}={v!r}" for k, v in attributes]
        if node.debug is not None and node.debug[0]:
            extra.append(f"scope={node.debug[0]}")
        shape = xla_shape(avals, node.bounded)
        lines[("n", i)] = (f"{shape} {ir_op_name(node.op.name)}",
                           f", xla_shape={shape}" + "".join(", " + e for e in extra), tuple(operands))
    return _emit(lines, [name(*ref).key for ref in w.program.roots])


def _emit(lines, roots) -> str:
    """The lines in torch_xla's order (`torch::lazy::Util::ComputePostOrder`: depth first
    from each root's line in turn, a line's operands pushed in order, so visited last
    first), each root's line marked `ROOT=k`."""
    numbers, order = {}, []
    for key in roots:
        stack = [key]
        while stack:
            k = stack[-1]
            if k in numbers:
                stack.pop()
                continue
            operands = [o.key for o in lines[k][2]]
            waiting = [o for o in operands if o not in numbers]
            if waiting:
                stack.extend(waiting)
                continue
            numbers[k] = len(order)
            order.append(k)
            stack.pop()
    marks = {}
    for r, key in enumerate(roots):
        marks.setdefault(key, []).append(r)
    out = ["IR {"]
    for k in order:
        head, tail, operands = lines[k]
        out.append(f"  %{numbers[k]} = {head}({', '.join(o.text(numbers) for o in operands)}){tail}"
                   + "".join(f", ROOT={r}" for r in marks.get(k, ())))
    return "\n".join(out) + "\n}\n"


def tensors_report(threshold: int, device=None, tensor_id=id) -> str:
    """torch_xla's report of the live tensors whose graph has more than `threshold` nodes
    (on XLA device `device`, if given): each tensor's id, shape, device and node count, the
    frames where its value was made (recorded under XLA_IR_DEBUG: `ir.IR_DEBUG`), and its
    IR. A tensor holding a buffer it was given counts as one node, `xla::device_data`."""
    out = []
    for t in live_tensors(device):
        v = t._value
        if v.node is not None:
            debug, text = v.node.debug, walk_text(graph_program.walk([v]))
        elif v.debug is not None:
            scope = f", scope={v.debug[0]}" if v.debug[0] else ""
            shape = hlo_shape(v.shape, v.dtype, layout=True)
            debug = v.debug
            text = f"IR {{\n  %0 = {shape} xla::device_data(), xla_shape={shape}{scope}, ROOT=0\n}}\n"
        else:
            continue
        nodes = text.count("\n  %")
        if nodes <= threshold:
            continue
        out.append(f"Tensor: id={tensor_id(t)}, shape={hlo_shape(v.shape, v.dtype, layout=True)}, "
                   f"device=xla:{v.device}, ir_nodes={nodes}\n")
        if debug is not None:
            out.append("Frames:\n" + "".join(line + "\n" for line in debug[1]))
        out.append(text + "\n\n")
    return "".join(out)


class _Name:
    """Stands for a value in a formatted node: the line of `key`, output `index` of it if the
    line computes several."""
    __slots__ = ("key", "index")

    def __init__(self, key, index=None):
        self.key, self.index = key, index

    def text(self, numbers):
        return f"%{numbers[self.key]}" + ("" if self.index is None else f".{self.index}")


def lowered(tensors):
    """jax's `Lowered` for the program `mark_step` would run for `tensors`, or None."""
    w = _walk(tensors)
    return None if w is None else walk_lowered(w)


def walk_lowered(w):
    """jax's `Lowered` of walk `w`'s program: its arguments the buffers (`w.leaves`), then
    `walk_scalars(w)`."""
    return program_kinds.of_walk(w).lowered(w)


def walk_scalars(w):
    """The scalar arguments `walk_lowered(w)` passes after the buffers (packed, but over the
    mesh)."""
    return program_kinds.of_walk(w).scalars(w)


def program_text(tensors, dialect: str = "stablehlo") -> str:
    """The program's text: `dialect` 'stablehlo' (MLIR) or 'hlo' (XLA HLO). Empty if nothing
    is pending. Dims marked unbounded (`unbounded_dims`) are symbolic in the StableHLO."""
    w = _walk(tensors)
    return "" if w is None else walk_program_text(w, dialect)


def tensors_hlo(tensors) -> str:
    """The HLO text of the program computing `tensors`, those holding buffers among its
    outputs as their parameters (torch_xla's `_get_xla_tensors_hlo`)."""
    w = tensors_walk(tensors)
    return "" if w is None else walk_program_text(w, "hlo")


def tensors_walk(tensors):
    """The walk of the program computing `tensors` as torch_xla lowers them: those holding
    buffers are among its outputs as their parameters. None if `tensors` is empty."""
    return graph_program.walk(_as_outputs(_values(tensors)))


def walk_program_text(w, dialect: str = "stablehlo") -> str:
    """`program_text` of a walk. Under XLA_DUMP_POST_OPTIMIZATIONS=1 the HLO is XLA's after
    its optimizations (and, under SPMD, its partitioning: the collectives it inserted), of
    the very program the sync runs (compiled now, and cached, if new)."""
    if dialect == "hlo":
        if os.environ.get("XLA_DUMP_POST_OPTIMIZATIONS", "0").lower() in ("1", "true"):
            return program_kinds.of_walk(w).compiled(w).compiled.as_text()
        return hlo_text(walk_lowered(w))
    symbolic = _symbolic_args(w)
    if symbolic is not None:
        return composite.upstream_names(runner.export(w.program.run_packed, symbolic).mlir_module())
    return composite.upstream_names(walk_lowered(w).as_text(dialect=dialect))


def _symbolic_args(w):
    """The program's arguments with the dims marked unbounded symbolic, or None (no marks;
    over the mesh marks are not read)."""
    if program_kinds.of_walk(w) is program_kinds.MESH:
        return None
    return unbounded_dims.symbolic_args(w.leaves, w.call_args)


def hlo_text(low) -> str:
    """The HLO text of jax's `Lowered` (`hlo_proto.hlo_text`)."""
    return hlo_proto.hlo_text(hlo_proto.computation(low).get_hlo_module())


def program_bytecode(tensors) -> bytes:
    """The program's StableHLO as a portable artifact (versioned MLIR bytecode, as
    `jax.export` writes it). Empty if nothing is pending."""
    w = _walk(tensors)
    if w is None:
        return b""
    exported = runner.export(w.program.run_packed, _symbolic_args(w) or w.call_args)
    return bytes(exported.mlir_module_serialized)


def dot(tensors) -> str:
    """The pending graph as a Graphviz digraph: buffer parameters, op nodes, data edges."""
    return walk_dot(_walk(tensors))


def walk_dot(w) -> str:
    """`dot` of a walk (None: nothing pending)."""
    lines = ["digraph G {"]
    if w is not None:
        for name in _leaf_names(w):
            lines.append(f'  {name} [label="{name}", shape=box];')
        for i, (node, (_, _, refs, _, _, avals)) in enumerate(zip(w.order, w.program.plan)):
            lines.append(f'  n{i} [label="{node.op.name}\\n{format_avals(avals)}"];')
            for k, (pos, index) in enumerate(refs):
                src = f"p{index}" if pos < 0 else f"n{pos}"
                lines.append(f'  {src} -> n{i} [label="{k}"];')
        for r, (pos, index) in enumerate(w.program.roots):
            lines.append(f'  root{r} [label="root {r}", shape=plaintext];')
            lines.append(f'  {"p" if pos < 0 else "n"}{index if pos < 0 else pos} -> root{r};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_hash(tensors) -> bytes:
    """A digest of the pending graph behind `tensors` (all pending ones on the first device
    if empty): equal for graphs that compile to the same program, whatever their data.
    Under the buffer-donor config (`_xla_sync_multi` donates the marked buffers), which of
    its parameters are marked for donation is part of it: they change the program."""
    w = _walk(list(tensors) or None)
    text = walk_text(w)
    if donation.with_sync_multi[0] and w is not None:
        donated, kept, _ = w.args
        marked = [i for i, v in enumerate([*donated, *kept]) if donation.is_donor(v)]
        text += f"donors={marked}\n" if marked else ""
    return hashlib.sha256(text.encode()).digest()
