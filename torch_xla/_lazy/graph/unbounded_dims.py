"""Dimensions of tensors marked unbounded-dynamic (`_XLAC._xla_mark_dynamic(t, dim)`).

A mark says that dim of the tensor's buffer may have any size in the program's StableHLO
(`xm.get_stablehlo`, `get_stablehlo_bytecode`): there the graph is lowered with each marked
dim a jax symbolic dimension of its own (`?` in the module's types; broadcasts against it
by torch_xla's rule: `lowering/_unbounded`). Programs still compile and run at the buffers'
sizes, and the HLO text is theirs.
"""
import weakref

import jax

from .tensor import unwrap

_marked = weakref.WeakKeyDictionary()  # Value -> the dims marked on it


def mark(t, dim: int) -> None:
    """Marks dim `dim` of XLA tensor `t` (a buffer: a tensor not computed by a pending
    graph) unbounded-dynamic."""
    if t.device.type != "xla":
        raise RuntimeError(f"_xla_mark_dynamic takes an XLA tensor, got one on {t.device}")
    v = unwrap(t)._value
    if not -len(v.shape) <= dim < max(len(v.shape), 1) or not v.shape:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-len(v.shape)}, {len(v.shape) - 1}], but got {dim})")
    if v.data is None:
        raise NotImplementedError(
            "_xla_mark_dynamic of a tensor computed by a pending graph: only a tensor's buffer "
            "(a transferred or computed tensor, after torch_xla.sync()) takes a mark here")
    _marked[v] = _marked.get(v, frozenset()) | {dim % len(v.shape)}


def symbolic_args(leaves, args):
    """The program's arguments (donated, kept, scalars) with each leaf that has marked dims
    as a jax.ShapeDtypeStruct whose marked dims are symbolic; None if no leaf is marked."""
    marks = [_marked.get(v, ()) for v in leaves]
    count = sum(len(m) for m in marks)
    if not count:
        return None
    symbols = iter(jax.export.symbolic_shape(", ".join(f"d{i}" for i in range(count))))
    specs = []
    for v, dims in zip(leaves, marks):
        if dims:
            shape = tuple(next(symbols) if d in dims else s for d, s in enumerate(v.shape))
            specs.append(jax.ShapeDtypeStruct(shape, v.data.dtype))
        else:
            specs.append(v.data)
    donated, kept, scalars = args
    return tuple(specs[:len(donated)]), tuple(specs[len(donated):]), scalars
