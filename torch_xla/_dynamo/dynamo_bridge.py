"""The bridge PyTorch's dynamo backends `openxla` and `openxla_eval` call
(`torch._dynamo.backends.torchxla`): each captured FX graph becomes one XLA program.

With `openxla`, AOTAutograd hands over the forward and the backward graph, each of ATen
ops; with `openxla_eval`, dynamo's graph of torch-level calls is traced down to ATen first.
The engine's graph capture (`torch_xla._lazy.graph_capture`) lowers the graph with the
same lowerings as the lazy path and compiles it once; later calls run the program.
"""
import torch

from torch_xla._lazy.graph_capture import compiled as _compiled


def extract_compiled_graph(xla_model: torch.fx.GraphModule, xla_args):
    """A callable computing `xla_model(*args)` on XLA tensors with one compiled program
    (its results a list, as dynamo's boxed calling convention wants)."""
    return _compiled.compile_graph(xla_model, xla_args)
