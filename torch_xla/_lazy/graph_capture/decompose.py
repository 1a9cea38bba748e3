"""Bringing captured graphs down to ATen ops that have lowerings.

`to_aten(gm, args)` traces a dynamo graph of torch-level calls (what `openxla_eval` gets)
into a functional ATen graph, on fake tensors shaped like `args`: views become view ops and
in-place ops functional ones, with a `copy_` into each input the graph writes.
`decompose(gm)` replaces ops without a lowering by PyTorch's decompositions, as the lazy
dispatch does op by op (the graph is traced again only when it holds such ops).
`specialize(gm, args)` traces a graph with symbolic sizes again for the concrete sizes of
`args`. Every traced node carries its shape and dtype in `meta['val']`.
"""
import functools

import torch
from torch import fx
from torch._decomp import decomposition_table
from torch._export.utils import _get_decomp_for_cia
from torch.export._remove_effect_tokens_pass import _remove_effect_tokens
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from .fx_lowering import handled


@functools.lru_cache(maxsize=None)
def _decompositions():
    """PyTorch's decompositions of the ops the lowerings do not cover."""
    return {op: fn for op, fn in decomposition_table.items() if not handled(op)}


def decompose_exported(ep, kept_namespaces=frozenset()):
    """`ep` (an ExportedProgram) decomposed down to ops with lowerings: torch.export's own
    decompositions (down to core ATen), less those of ops lowered as they are, plus
    PyTorch's others for ops without a lowering; composite ops torch.export keeps (they
    have no entry in its table) are decomposed too when they have no lowering. Ops of the
    namespaces in `kept_namespaces` stay as they are (they become custom calls)."""
    table = _export_table()
    for op in list(table):
        if getattr(op, "namespace", None) in kept_namespaces:
            table.pop(op)
    while True:
        # effect tokens order side effects (linalg's error checks) between ops: one program
        # runs its ops in data order and raises nothing, so they go
        done = _remove_effect_tokens(ep.run_decompositions(table))
        kept = {n.target for n in done.graph_module.graph.nodes if n.op == "call_function"
                and not handled(n.target) and _composite(n.target) and n.target not in table
                and getattr(n.target, "namespace", None) not in kept_namespaces}
        if not kept:
            return done
        table.update({op: _get_decomp_for_cia(op) for op in kept})


def _export_table():
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if handled(op):
            table.pop(op)
        elif _composite(op):  # its C++ composite, as dispatch runs it on the lazy path
            table[op] = _get_decomp_for_cia(op)
    table.update({op: fn for op, fn in _decompositions().items() if not _composite(op)})
    return table


def _composite(op) -> bool:
    return isinstance(op, torch._ops.OpOverload) and torch._C._dispatch_has_kernel_for_dispatch_key(
        op.name(), torch._C.DispatchKey.CompositeImplicitAutograd)


def _fakes(mode, args):
    """Fake tensors in `mode` with the shapes, strides, dtypes and devices of `args`'
    tensors (other arguments as they are)."""
    def fake(a):
        if not isinstance(a, torch.Tensor):
            return a
        with mode:
            return torch.empty_strided(tuple(a.shape), _strides(a), dtype=a.dtype, device=a.device)
    return [fake(a) for a in args]


def _strides(t):
    try:
        return tuple(t.stride())
    except RuntimeError:  # a tensor without strides: contiguous ones
        return torch.empty(tuple(t.shape), device="meta").stride()


def _trace(fn, args):
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = _fakes(mode, args)
    with mode:
        return make_fx(fn, decomposition_table=_decompositions())(*fakes)


def is_aten_graph(gm: fx.GraphModule) -> bool:
    """Whether every call in `gm` is an ATen op or Python arithmetic on sizes, with shapes
    and dtypes recorded (AOTAutograd's and torch.export's graphs)."""
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_method"):
            return False
        if node.op == "call_function" and not (
                isinstance(node.target, torch._ops.OpOverload) or handled(node.target)):
            return False
        if node.op in ("call_function", "placeholder") and "val" not in node.meta:
            return False
    return True


def to_aten(gm: fx.GraphModule, args) -> fx.GraphModule:
    functional = torch.func.functionalize(gm, remove="mutations_and_views")
    with torch.no_grad():
        return _trace(functional, args)


def decompose(gm: fx.GraphModule) -> fx.GraphModule:
    """`gm` with its ops that have no lowering decomposed (itself if it has none)."""
    table = _decompositions()
    if not any(n.op == "call_function" and n.target in table for n in gm.graph.nodes):
        return gm
    return specialize(gm, [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"])


def is_symbolic(gm: fx.GraphModule) -> bool:
    """Whether `gm`'s inputs have symbolic sizes or are symbolic numbers."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(val, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in val.shape):
            return True
    return False


def specialize(gm: fx.GraphModule, args) -> fx.GraphModule:
    """`gm` traced again (decomposed) on arguments shaped like `args`, sizes concrete."""
    return _trace(gm, args)
