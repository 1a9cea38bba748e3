"""The dynamo bridge's helpers and settings torch_xla scripts use: the compile counter,
`config.skip_input_data_check`, `NoneRemover`, the aot_function backend."""
import copy

import pytest
import torch

import torch_xla
from torch_xla._lazy.graph.tensor import is_pending
import torch_xla.debug.metrics as met
from torch_xla._dynamo import config, dynamo_backend2
from torch_xla._dynamo.dynamo_bridge import NoneRemover
from tests.compare import assert_same


def _f(a):
    return a.cos() * 2


def test_the_aot_function_backend_compiles_one_program(dev):
    met.clear_counters()
    x = torch.randn(3, device=dev)
    out = torch.compile(_f, backend=dynamo_backend2.dynamo_backend)(x)
    assert_same(out, _f(x.cpu()))
    assert met.counter_value("DynamoExtractCompiledGraph") == 1


def test_skip_input_data_check_refuses_pending_inputs(dev, monkeypatch):
    monkeypatch.setattr(config, "skip_input_data_check", True)
    g = torch.compile(_f, backend="openxla")
    x = torch.randn(3, device=dev) * 2  # pending: the first call computes it, as it compiles
    assert_same(g(x), _f(x.cpu()))
    assert not is_pending(x)
    with pytest.raises(RuntimeError, match="can not be a pending ir"):
        g(x + 1)


@pytest.mark.parametrize("kind", [list, tuple])
def test_none_remover_round_trip(kind):
    values = kind(["a", None, "b", None])
    remover = NoneRemover()
    kept = remover.remove_nones(values)
    assert kept == kind(["a", "b"]) and remover.none_poslist == [1, 3]
    if kind is list:
        assert kept is values  # lists change in place
    assert remover.add_nones(kept) == kind(["a", None, "b", None])


def test_alias_with_buffer_donor_config_is_set_within_only():
    from torch_xla._dynamo.dynamo_bridge import alias_with_buffer_donor_config
    with alias_with_buffer_donor_config() as saved:
        assert saved is False and torch_xla._XLAC._xla_get_enable_alias_with_buffer_donor_config()
    assert not torch_xla._XLAC._xla_get_enable_alias_with_buffer_donor_config()


def test_a_buffer_marked_for_donation_changes_the_graph_hash_under_the_donor_config(dev):
    from torch_xla._dynamo.dynamo_bridge import alias_with_buffer_donor_config
    x = torch.randn(5, 5).to(dev)
    out = torch.cos(x)
    plain = torch_xla._XLAC._get_graph_hash([out])
    assert torch_xla._XLAC._set_buffer_donation(x, True)
    assert torch_xla._XLAC._get_graph_hash([out]) == plain  # a step without the config: same program
    with alias_with_buffer_donor_config():
        donating = torch_xla._XLAC._get_graph_hash([out])
        torch_xla._XLAC._set_buffer_donation(x, False)
        assert torch_xla._XLAC._get_graph_hash([out]) == plain
    assert donating != plain


def test_nodes_that_leave_the_device_are_collected_and_counters_kept(dev):
    import torch_xla._dynamo.dynamo_bridge as bridge

    def f(x):
        y = x + 1
        return y.cpu() * 2, y * 3

    gm = torch.fx.symbolic_trace(f)
    met.clear_counters()
    torch_xla._XLAC._xla_increment_counter("UncachedCompile", 3)
    collector = bridge.UnsupportedNodesCollector(gm)
    collector.run(torch.ones(2, device=dev))
    names = [n.name for n in collector.get_unsupported_nodes()]
    # the copy to the CPU, the op on its result, and the output returning it
    assert names == ["cpu", "mul", "output"], names
    assert met.counter_value("UncachedCompile") >= 3


def test_a_backend_of_its_own_can_call_an_extracted_graph_from_traced_code(dev):
    """A user backend on AOTAutograd whose forward compiler extracts the graph at the first
    real call: the extracted graph is called from a function dynamo traces."""
    from functorch.compile import aot_module_simplified, make_boxed_compiler
    import torch_xla._dynamo.dynamo_bridge as bridge

    def backend(gm, example_inputs):
        @make_boxed_compiler
        @torch._dynamo.disable
        def forward_compiler(graph, _):
            compiled = []

            def run(*args):
                if not compiled:
                    compiled.append(bridge.extract_compiled_graph(graph, args))
                return compiled[0](*args)
            return run
        return aot_module_simplified(gm, example_inputs, fw_compiler=forward_compiler)

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(dev)
    x = torch.randn(2, 4, device=dev, requires_grad=True)

    def step(m, inp):
        m(inp).mean().backward()
        return [p.grad for p in m.parameters()]

    expected = step(copy.deepcopy(model), x.detach().clone().requires_grad_())
    # as dynamo's own test cases run: errors raise, graph breaks in nested calls resume there
    with torch._dynamo.config.patch(suppress_errors=False, nested_graph_breaks=True):
        assert_same(torch._dynamo.optimize(backend, nopython=False)(step)(model, x), expected)
