"""The bridge PyTorch's dynamo backends `openxla` and `openxla_eval` call
(`torch._dynamo.backends.torchxla`): each captured FX graph becomes one XLA program.

With `openxla`, AOTAutograd hands over the forward and the backward graph, each of ATen
ops; with `openxla_eval`, dynamo's graph of torch-level calls is traced down to ATen first.
The engine's graph capture (`torch_xla._lazy.graph_capture`) lowers the graph with the
same lowerings as the lazy path and compiles it once; later calls run the program.
"""
import contextlib

import torch

from torch_xla._dynamo import config
from torch_xla._lazy import counters as _counters
from torch_xla._lazy import donation as _donation
from torch_xla._lazy import tensor as _tensor
from torch_xla._lazy.graph_capture import compiled as _compiled


def extract_compiled_graph(xla_model: torch.fx.GraphModule, xla_args):
    """A callable computing `xla_model(*args)` on XLA tensors with one compiled program
    (its results a list, as dynamo's boxed calling convention wants). Counted as
    `DynamoExtractCompiledGraph`."""
    _counters.count("DynamoExtractCompiledGraph")
    graph = _compiled.compile_graph(xla_model, xla_args)

    def run(*args):
        if config.skip_input_data_check:
            _refuse_pending(args)
        return graph(*args)
    return run


def _refuse_pending(args) -> None:
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.device.type == "xla"]
    if any(_tensor.unwrap(t)._value.node is not None for t in tensors):
        raise RuntimeError("input data to dynamo graph can not be a pending ir: "
                           "torch_xla._dynamo.config.skip_input_data_check is set; sync the "
                           "inputs (torch_xla.sync()) before the call, or unset it")


class NoneRemover:
    """Takes the Nones out of a list (in place) or a tuple (a new one) and puts them back
    where they were (`none_poslist`: their positions)."""

    def __init__(self):
        self.none_poslist = []

    def remove_nones(self, values):
        self.none_poslist = [i for i, v in enumerate(values) if v is None]
        kept = [v for v in values if v is not None]
        if isinstance(values, tuple):
            return tuple(kept)
        values[:] = kept
        return values

    def add_nones(self, values):
        full = list(values)
        for i in self.none_poslist:
            full.insert(i, None)
        if isinstance(values, tuple):
            return tuple(full)
        values[:] = full
        return values


@contextlib.contextmanager
def alias_with_buffer_donor_config(should_alias: bool = True):
    """Within: `_xla_sync_multi` donates the buffers marked for donation
    (`_XLAC._set_buffer_donation`); yields the setting it replaced."""
    saved = _donation.with_sync_multi[0]
    _donation.with_sync_multi[0] = bool(should_alias)
    try:
        yield saved
    finally:
        _donation.with_sync_multi[0] = saved
