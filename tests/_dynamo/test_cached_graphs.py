"""A traced graph run again on other inputs, as torch_xla's first dynamo bridge does it:
the graph's device-data inputs, programs kept by graph hash, GraphInputMatcher."""
import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla._dynamo.dynamo_bridge import GraphInputMatcher

X = torch_xla._XLAC


def test_graph_inputs_are_the_buffers_read_with_their_tensors_ids(dev):
    a, b = torch.randn(3).to(dev), torch.randn(3).to(dev)
    out = (a + b) * b
    ids, inputs = X._get_tensors_xla_device_data_node([out])
    assert sorted(ids) == sorted([X._xla_get_tensor_id(a), X._xla_get_tensor_id(b)])
    assert sorted(X._get_tensors_handle(inputs)) == sorted(X._get_tensors_handle([a, b]))
    c = torch.randn(2).to(dev)  # asked after the graph gave its number: the same number
    ids, _ = X._get_tensors_xla_device_data_node([c * 2])
    assert ids == [X._xla_get_tensor_id(c)]


def test_warmed_up_graph_runs_on_new_inputs_without_running_at_warm_up(dev):
    a, b = torch.randn(3).to(dev), torch.randn(3).to(dev)
    torch_xla.sync()
    out = [a + b, a * b, b]  # b is an input, not an output of the program
    graph_hash = X._get_graph_hash(out)
    ids, _ = X._get_tensors_xla_device_data_node(out)
    met.clear_all()
    X._xla_warm_up_cache(out, [])
    assert met.metric_data("ExecuteTime") is None and met.metric_data("CompileTime")[0] == 1
    assert X._check_tensor_need_materialization(out[:1]) == [True]
    x, y = torch.randn(3), torch.randn(3)
    by_id = {X._xla_get_tensor_id(a): x, X._xla_get_tensor_id(b): y}
    results = X._run_cached_graph(graph_hash, [by_id[i] for i in ids])  # CPU inputs copied in
    assert len(results) == 2 and met.metric_data("CompileTime")[0] == 1
    assert torch.allclose(results[0].cpu(), x + y) and torch.allclose(results[1].cpu(), x * y)
    assert met.metric_data("RunCachedGraphInputData")[0] == 1
    with pytest.raises(KeyError, match="no program was warmed up"):
        X._run_cached_graph(b"unknown", [])


def test_matcher_takes_arguments_from_the_call_and_keeps_the_rest(dev):
    w, x = torch.randn(2, 2).to(dev), torch.randn(2).to(dev)
    torch_xla.sync()
    out = w @ x
    ids, values = X._get_tensors_xla_device_data_node([out])
    x_id = X._xla_get_tensor_id(x)
    matcher = GraphInputMatcher({x_id: 0}, ids, values, {x_id})
    assert matcher.graph_input_xla_values.count(None) == 1
    graph_hash = X._get_graph_hash([out])
    X._xla_warm_up_cache([out], [])
    x2 = torch.randn(2).to(dev)
    (result,) = X._run_cached_graph(graph_hash, matcher((x2,)))
    assert torch.allclose(result.cpu(), w.cpu() @ x2.cpu())


def test_base_seed_is_the_random_state(dev):
    xm.set_rng_state(23, str(dev))
    assert X._get_base_seed_as_tensor(str(dev)).item() == 23 == X._xla_get_rng_seed(str(dev))
    assert X._check_tensor_need_materialization([torch.ones(1)]) == [False]
