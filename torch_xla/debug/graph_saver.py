"""Saving the pending graph of some tensors to a file, one file per call:
`SAVE_DIR/NAME-THREAD-N.FMT`, in the format `SAVE_GRAPH_FMT` names (`text`, the IR one node a
line; `dot`, Graphviz; `hlo`, the HLO text of the program that would run)."""
import collections
import os
import threading

import torch_xla

__all__ = ["save_tensors_graph"]

_FORMATS = {"text": "_get_xla_tensors_text", "dot": "_get_xla_tensors_dot",
            "hlo": "_get_xla_tensors_hlo"}
_lock = threading.Lock()
_numbers = collections.defaultdict(dict)  # thread -> name -> files written


def save_tensors_graph(save_dir, name, tensors):
    """Writes the graph behind `tensors` into `save_dir`; the files of one `name` and thread
    are numbered from 0."""
    fmt = os.environ.get("SAVE_GRAPH_FMT", "text")
    if fmt not in _FORMATS:
        raise RuntimeError(f"Invalid save graph format: {fmt} (SAVE_GRAPH_FMT: one of "
                           f"{', '.join(_FORMATS)})")
    graph = getattr(torch_xla._XLAC, _FORMATS[fmt])(tensors)
    thread = threading.current_thread().ident
    with _lock:
        number = _numbers[thread].get(name, 0)
        _numbers[thread][name] = number + 1
    with open(os.path.join(save_dir, f"{name}-{thread}-{number}.{fmt}"), "w") as f:
        f.write(graph)
