"""The text of a failed program: the op whose lowering failed, the user's line that made it
(the first call with its signature, `meta_outputs`), its place in the graph and the ops
just before it."""
from ..base import user_code
from ..graph.ir import format_node


class ExecutionError(RuntimeError):
    """A step's program failed; the message names the op and its place in the graph."""


def op_names(nodes, shown=4):
    """The last `shown` ops of `nodes` by name ('..., ' before them if there are more)."""
    names = [n.op.name for n in nodes[-shown:]]
    return ("..., " if len(nodes) > shown else "") + ", ".join(names)


def program_failed(w, cause) -> ExecutionError:
    """The error of walk `w`'s program failing as a whole (not in one lowering)."""
    return ExecutionError(f"the program of {len(w.order)} ops on xla:{w.device} "
                          f"({op_names(w.order)}) failed: {type(cause).__name__}: {cause}")


def lowering_failed(w, position, cause) -> ExecutionError:
    """The error of node `position` of walk `w` failing to lower."""
    node = w.order[position]
    before = f"; after {op_names(w.order[:position])}" if position else ""
    return ExecutionError(
        f"{node.op.name} failed to compile: op {position} of {len(w.order)} in the graph on "
        f"xla:{w.device} ({format_node(node)}{before}), {_made_at(node)}: "
        f"{type(cause).__name__}: {cause}")


def _made_at(node) -> str:
    if node.origin is None:
        return "no user line known"
    where, source = user_code.describe(node.origin)
    source = f" (`{source}`)" if source else ""
    return f"made by the backward pass called at {where}{source}" if node.origin[3] else \
        f"made at {where}{source}"
