"""XLA_SAVE_TENSORS_FILE: every graph a sync runs, and every run of a torch.compile graph,
appended to a file in torch_xla's layout, to compare steps' graphs (a recompilation shows
as a new `Graph Hash`) and see which Python line synced.

The file is XLA_SAVE_TENSORS_FILE with the ordinal of the device appended (`graphs.txt.0`;
in a runtime of several processes, the process's global ordinal); the graph's format is
XLA_SAVE_TENSORS_FMT: `text` (the IR as `_get_xla_tensors_text` prints it, the default),
`dot`, `hlo` or `stablehlo` (the program's text). A sync's graph is the record

    [ScheduleSyncTensorsGraph]
    TensorsGraphInfo:
      <function> (<file>:<line>)        the Python frames of the sync, innermost first

    Root Hashes: (<a hash of each output's graph>)

    ## BEGIN_GRAPH
    <the graph>

    Graph Hash: <a hash of the whole graph>

    ## END_GRAPH

then, in the `hlo` format for a program partitioned over the SPMD devices, each output's
shape and sharding between `#OUTPUT_SHARDING_BEGIN` and `#OUTPUT_SHARDING_END`. A
torch.compile graph is written when compiled and again at each run, as `[dynamo]`: its FX
graph (`text`, `dot`) or its compiled program's HLO (`hlo`, `stablehlo`).
"""
import hashlib
import os
import threading

from . import graph_dump
from ..runtime import pjrt
from ..base import user_code
from ..graph.ir import hlo_shape
from ..graph import spmd_layout as spmd

FORMATS = ("text", "dot", "hlo", "stablehlo")
_lock = threading.Lock()
_captured = {}  # a torch.compile program's key -> its record


def enabled() -> bool:
    return bool(os.environ.get("XLA_SAVE_TENSORS_FILE"))


def path(device: int) -> str:
    ordinal = pjrt.global_ordinal() if pjrt.process_count() > 1 else device
    return f"{os.environ['XLA_SAVE_TENSORS_FILE']}.{ordinal}"


def _format() -> str:
    fmt = os.environ.get("XLA_SAVE_TENSORS_FMT", "text")
    if fmt not in FORMATS:
        raise ValueError(f"XLA_SAVE_TENSORS_FMT={fmt!r}: expected one of {', '.join(FORMATS)}")
    return fmt


def _append(device, text) -> None:
    with _lock, open(path(device), "a") as f:
        f.write(text)


def _digest(text) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _frames() -> str:
    return "".join(line + "\n" for line in user_code.stack_lines())


def _root_hashes(w) -> list:
    """Per root of walk `w`, a hash of the graph computing it (its nodes' keys, its
    parameters' shapes), equal for equal graphs whatever their data."""
    donated, kept, _ = w.args
    params = [*donated, *kept]
    hashes = []

    def of(pos, i):  # a reference's hash: a parameter's shape and dtype, or a node's output
        return f"p{params[i].shape}{params[i].dtype}" if pos < 0 else f"{hashes[pos]}.{i}"
    for node, (_, _, refs, _, _, _) in zip(w.order, w.program.plan):
        hashes.append(_digest(f"{node.key!r}{[of(pos, i) for pos, i in refs]}"))
    return [of(pos, i) for pos, i in w.program.roots]


def save_sync(w, device: int) -> None:
    """Appends the record of walk `w`, the graph a sync is about to run on `device`."""
    text, fmt = graph_dump.walk_text(w), _format()
    roots = ", ".join(_digest(h) for h in _root_hashes(w))
    if fmt == "text":
        graph = text
    elif fmt == "dot":
        graph = graph_dump.walk_dot(w)
    else:
        graph = graph_dump.walk_program_text(w, fmt)
    _append(device, f"[ScheduleSyncTensorsGraph]\nTensorsGraphInfo:\n{_frames()}\n"
                    f"Root Hashes: ({roots})\n\n## BEGIN_GRAPH\n{graph}\n"
                    f"Graph Hash: {_digest(text)}\n\n## END_GRAPH\n\n")


def save_output_shardings(values, device: int) -> None:
    """In the `hlo` format, after an SPMD program ran: each output's shape (no layout, as
    XLA's `Shape::ToString` writes it) and sharding."""
    if _format() != "hlo" or not pjrt.is_spmd():
        return
    rows = "".join(f"{hlo_shape(v.shape, v.dtype)} "
                   f"{spmd.describe(v.data.sharding, len(v.shape)) if v.data is not None else '{unknown}'}\n"
                   for v in values)
    _append(device, f"\n#OUTPUT_SHARDING_BEGIN\n\n{rows}\n#OUTPUT_SHARDING_END\n\n")


def save_captured_run(key, gm, program, device: int) -> None:
    """Appends the record of a torch.compile graph (FX graph `gm`, compiled `program`,
    cached under `key`) as it runs on `device`."""
    record = _captured.get(key)
    if record is None:
        fmt = _format()
        graph = str(gm.graph) if fmt in ("text", "dot") else program.compiled.as_text()
        record = _captured[key] = (f"TensorsGraphInfo:\n{_frames()}\n## BEGIN_GRAPH\n{graph}\n"
                                   f"Graph Hash: {_digest(f'{key!r}')}\n\n## END_GRAPH\n\n")
    _append(device, f"[dynamo]\n{record}\n")
