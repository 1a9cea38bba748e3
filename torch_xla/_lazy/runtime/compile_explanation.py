"""Why a new program was compiled, for the PT_XLA_DEBUG analysis (`graph_analysis`).

The cause is found by comparing the new graph with the closest program compiled before it
(the graph inputs whose shapes or dtypes changed, or the ops added and removed); the user's
source line that asked for it is named too. A program is described by the structural keys of
its nodes and the shapes of its inputs, the same things `graph_program`'s cache key is made
of, so a reported difference is one that caused the miss.
"""
import difflib

from ..base import user_code
from .graph_analysis import Explanation

_HISTORY = 32       # programs remembered for comparison
_SHOWN = 4          # differences listed per kind
_history = []       # [(number, Signature)]
_count = [0]

def format_aval(shape, dtype) -> str:
    """A value's dtype and shape as the engine writes them everywhere: `float32[2, 3]`."""
    return f"{str(dtype).removeprefix('torch.')}{list(shape)}"


def format_avals(avals) -> str:
    return ", ".join(format_aval(s, d) for s, d in avals)


class Signature:
    """What the compiler keys a program by, in a form that can be compared and described."""
    __slots__ = ("ops", "names", "inputs", "input_users", "n_outputs")

    def __init__(self, order, roots):
        self.ops = tuple(node.key for node in order)
        self.names = tuple(node.op.name for node in order)
        leaves, self.input_users = {}, []
        for node in order:
            for v in node.inputs:
                if v.node is None and id(v) not in leaves:
                    leaves[id(v)] = (tuple(v.shape), v.dtype)
                    self.input_users.append(node.op.name)
        self.inputs = tuple(leaves.values())
        self.n_outputs = len(roots)


def _short(obj, limit=100):
    text = repr(obj)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _closest(sig):
    """(number, signature) of the remembered program with the most ops in common."""
    best, best_ratio = None, -1.0
    for number, old in reversed(_history):
        m = difflib.SequenceMatcher(None, old.ops, sig.ops, autojunk=False)
        if m.real_quick_ratio() <= best_ratio or m.quick_ratio() <= best_ratio:
            continue
        ratio = m.ratio()
        if ratio > best_ratio:
            best, best_ratio = (number, old), ratio
    return best


def _input_changes(old, sig):
    changes = [f"input {i} (read by {sig.input_users[i]}): {format_aval(*a)} -> {format_aval(*b)}"
               for i, (a, b) in enumerate(zip(old.inputs, sig.inputs)) if a != b]
    if len(old.inputs) != len(sig.inputs):
        changes.append(f"{len(old.inputs)} -> {len(sig.inputs)} graph inputs")
    return changes


def _op_changes(old, sig):
    """(ops that compute other shapes or take other static arguments, ops added or gone)."""
    changed, structural = [], []
    m = difflib.SequenceMatcher(None, old.ops, sig.ops, autojunk=False)
    for tag, i1, i2, j1, j2 in m.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and old.names[i1:i2] == sig.names[j1:j2]:
            for j, a, b in zip(range(j1, j2), old.ops[i1:i2], sig.ops[j1:j2]):
                changed.append(f"op {j} {a[0]}: " + (
                    f"{format_avals(a[2])} -> {format_avals(b[2])}" if a[2] != b[2] else
                    f"arguments {_short(a[1])} -> {_short(b[1])}"))
            continue
        if i2 > i1:
            structural.append(f"{i2 - i1} op(s) gone at op {j1}: " + _fmt_ops(old.ops[i1:i2]))
        if j2 > j1:
            structural.append(f"{j2 - j1} new op(s) at op {j1}: " + _fmt_ops(sig.ops[j1:j2]))
    return changed, structural


def _fmt_ops(keys):
    return ", ".join(f"{k[0]} -> {format_avals(k[2])}" for k in keys[:3]) + (", ..." if len(keys) > 3 else "")


def _listed(title, items):
    lines = [title] + ["  " + item for item in items[:_SHOWN]]
    if len(items) > _SHOWN:
        lines.append(f"  ... and {len(items) - _SHOWN} more")
    return lines


def cause(sig):
    """Lines saying why `sig` is a new program, against the closest one compiled before."""
    closest = _closest(sig)
    if closest is None:
        return ["the first program compiled in this process (or since PT_XLA_DEBUG was set)"]
    number, old = closest
    changed, structural = _op_changes(old, sig)
    inputs = _input_changes(old, sig)
    lines = []
    if inputs:
        lines += _listed(f"input shapes or dtypes differ from program #{number}:", inputs)
    if structural:
        lines += _listed(f"the graph differs from program #{number} ({len(old.ops)} ops; this "
                         f"one has {len(sig.ops)}):", structural)
    if changed:
        lines += _listed(f"{len(changed)} op(s) compute other shapes or take other arguments "
                         f"than in program #{number}:", changed)
    if not lines:
        lines.append(f"same ops and inputs as program #{number}; the outputs kept "
                     f"({old.n_outputs} -> {sig.n_outputs}), the buffers donated or the "
                     "types of Python scalars differ")
    return lines


def _why_new(sig) -> list:
    """Lines saying why `sig` is a new program and where the user asked for it."""
    _count[0] += 1
    number = _count[0]
    lines = [f"program #{number}: {len(sig.ops)} ops, new because:"] + ["  " + line for line in cause(sig)]
    _history.append((number, sig))
    del _history[:-_HISTORY]
    where = user_code.user_frame()
    if where is not None:
        lines.append(f"at {where[0]}: {where[1]}")
    return lines


def of_walk(w) -> Explanation:
    """The analysis of walk `w`'s program, should it be compiled."""
    return Explanation((sum(len(a) for a in w.args), len(w.roots)),
                       lambda: _why_new(Signature(w.order, w.roots)))
