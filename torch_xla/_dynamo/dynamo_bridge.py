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
from torch_xla._lazy.base import counters as _counters
from torch_xla._lazy.launch import donation as _donation
from torch_xla._lazy.step import execution as _execution
from torch_xla._lazy.graph import tensor as _tensor
from torch_xla._lazy.graph_capture import compiled as _compiled


@torch._dynamo.disable
def extract_compiled_graph(xla_model: torch.fx.GraphModule, xla_args):
    """A callable computing `xla_model(*args)` on XLA tensors with one compiled program
    (its results a list, as dynamo's boxed calling convention wants). Counted as
    `DynamoExtractCompiledGraph`.

    Called from code dynamo traces (a backend's wrapper of its own), the call is a graph
    break: dynamo never traces the compiling into the engine. (Traced, its graph breaks
    would be nested ones, and torch 2.10 and 2.11, under `nested_graph_breaks`, resume a
    nested frame holding cell variables, as this one does, in the root frame's module
    globals: NameError on this module's.)"""
    _counters.count("DynamoExtractCompiledGraph")
    if config.skip_input_data_check:  # the graph's later inputs must be data: so are these
        _execution.materialize([_tensor.unwrap(t)._value for t in _xla_tensors(xla_args)])
    graph = _compiled.compile_graph(xla_model, xla_args)

    def run(*args):
        if config.skip_input_data_check:
            _refuse_pending(args)
        return graph(*args)
    # called from traced code, like the extraction: a graph break
    return torch._dynamo.disable(run)


def _xla_tensors(args):
    return [a for a in args if isinstance(a, torch.Tensor) and a.device.type == "xla"]


def _refuse_pending(args) -> None:
    if any(_tensor.is_pending(t) for t in _xla_tensors(args)):
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


class GraphInputMatcher:
    """The inputs of a traced graph for a later call (torch_xla's first dynamo bridge): the
    graph's device-data inputs (`_XLAC._get_tensors_xla_device_data_node`) are either the
    call's arguments, taken from the call each time, or other tensors (weights, constants),
    kept from the trace.

    Args:
      tensor_id_to_arg_idx: tensor id -> index of the argument it was at tracing.
      graph_input_tensor_ids, graph_input_xla_values: the graph's inputs, ids and tensors.
      xla_args_tensor_id: the ids of the arguments (their traced tensors are not kept).
    """

    def __init__(self, tensor_id_to_arg_idx, graph_input_tensor_ids, graph_input_xla_values,
                 xla_args_tensor_id):
        self.tensor_id_to_arg_idx = tensor_id_to_arg_idx
        self.graph_input_tensor_ids = graph_input_tensor_ids
        self.graph_input_xla_values = [
            None if tid in xla_args_tensor_id else value
            for tid, value in zip(graph_input_tensor_ids, graph_input_xla_values)]
        self.arg_idxs = [tensor_id_to_arg_idx.get(tid) for tid in graph_input_tensor_ids]

    def __call__(self, args):
        """The graph's inputs for a call on `args`, in the graph's order."""
        inputs = []
        for traced, arg_idx in zip(self.graph_input_xla_values, self.arg_idxs):
            if arg_idx is None:
                if traced is None:
                    raise RuntimeError("a graph input that is no argument of the call was not "
                                       "kept from the trace")
                inputs.append(traced)
            else:
                inputs.append(args[arg_idx])
        return inputs


class UnsupportedNodesCollector(torch.fx.Interpreter):
    """Runs a graph node by node on real arguments and collects the nodes that cannot be part
    of an XLA program (torch_xla's partitioning helper): those that ran an op through the CPU
    fallback, and those with a tensor argument or result that is not an XLA tensor. The
    counters are left as the nodes' runs make them (none is cleared)."""

    def __init__(self, module):
        super().__init__(module)
        self._unsupported_nodes = []

    def run_node(self, n: torch.fx.Node):
        before = _fallback_counts()
        result = super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        if _fallback_counts() != before or not all(
                _on_xla(v) for v in (result, *args, *kwargs.values())):
            self._unsupported_nodes.append(n)
        return result

    def get_unsupported_nodes(self):
        return self._unsupported_nodes


def _fallback_counts():
    return {name: _counters.counter_value(name) for name in _counters.fallback_counters()}


def _on_xla(value) -> bool:
    """Whether every tensor in `value` (a tensor, or lists and tuples of them) is an XLA tensor."""
    if isinstance(value, torch.Tensor):
        return value.device.type == "xla"
    if isinstance(value, (list, tuple)):
        return all(_on_xla(v) for v in value)
    return True
