"""`stablehlo.custom_call`s (`stablehlo_custom_call`, `place_to_host`/`place_to_device`) in
lazy programs and exports, and ops of other libraries whose own kernel takes XLA tensors:
their kernel runs on the device, on the lazy path and in graphs, not on the CPU."""
import re

import pytest
import torch
from torch.library import Library, impl

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla import stablehlo
from torch_xla.experimental.stablehlo_custom_call import (
    extract_custom_call_outputs_shape_dtype, place_to_device, place_to_host, stablehlo_custom_call)
from tests.compare import assert_lowered, assert_same

_lib = Library("cc_test", "DEF")
_lib.define("tagged(Tensor x) -> Tensor")
_lib.define("halves(Tensor x) -> (Tensor, Tensor)")


@impl(_lib, "tagged", "Meta")
def _tagged_meta(x):
    return torch.empty(x.shape[1:], dtype=torch.int8, device="meta")


@impl(_lib, "tagged", "XLA")
def _tagged_xla(x):
    return stablehlo_custom_call((x,), "cc_tagged", [x.shape[1:]], [torch.int8], True, "cfg", 1)


@impl(_lib, "halves", "Meta")
def _halves_meta(x):
    return torch.empty_like(x), torch.empty(x.shape[:1], device="meta")


@torch.library.custom_op("cc_test::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, k: float) -> torch.Tensor:
    return torch.sin(x) * k + 1


@scaled_sin.register_fake
def _(x, k):
    return torch.empty_like(x)


def custom_calls(text):
    return [line for line in text.splitlines() if "stablehlo.custom_call" in line]


def test_a_custom_call_is_a_node_of_the_lazy_program_with_its_attributes(dev):
    x = torch.ones(2, 3, device=dev)
    a, b = stablehlo_custom_call([x.sin()], "cc_pair", [(2, 3), (4,)], [torch.float32, torch.int32],
                                 has_side_effect=True, backend_config="opaque",
                                 frontend_attributes={"k": "v"})
    assert (a.shape, a.dtype, b.shape, b.dtype) == ((2, 3), torch.float32, (4,), torch.int32)
    (call,) = custom_calls(xm.get_stablehlo([a, b]))
    assert "@cc_pair" in call and 'backend_config = "opaque"' in call
    assert "has_side_effect = true" in call and 'mhlo.frontend_attributes = {k = "v"}' in call
    assert re.search(r"\(tensor<2x3xf32>\) -> tuple<tensor<2x3xf32>, tensor<4xi32>>", call), call


def test_a_target_xla_does_not_know_fails_when_its_program_runs_naming_it(dev):
    y = stablehlo_custom_call([torch.ones(3, device=dev)], "cc_unknown", [(3,)], [torch.float32])
    with pytest.raises(RuntimeError, match="cc_unknown"):
        y.cpu()


def test_placement_annotations_carry_their_memory_and_pass_gradients(dev):
    a = torch.ones(4, device=dev, requires_grad=True)
    host = place_to_host(a)
    text = xm.get_stablehlo([host])
    assert 'mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}' in text
    assert '_xla_buffer_placement = "device"' in xm.get_stablehlo([place_to_device(host)])
    (place_to_device(host) * torch.arange(4.0, device=dev)).sum().backward()
    assert_same(a.grad, torch.arange(4.0))


def test_an_op_with_an_xla_kernel_of_its_own_is_exported_through_that_kernel():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.cc_test.tagged(torch.sin(x))

    ep = torch.export.export(M(), (torch.randn(3, 5),))
    (call,) = custom_calls(stablehlo.exported_program_to_stablehlo(ep).get_stablehlo_text())
    assert "@cc_tagged" in call and "(tensor<3x5xf32>) -> tensor<5xi8>" in call
    assert 'backend_config = "cfg"' in call and "has_side_effect = true" in call
    node = next(n for n in ep.graph.nodes if n.target is torch.ops.cc_test.tagged.default)
    assert extract_custom_call_outputs_shape_dtype(node) == ([torch.Size([5])], [torch.int8])


def test_an_op_without_a_kernel_is_kept_as_a_custom_call_only_where_allowed():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.cc_test.halves(x.cos())

    ep = torch.export.export(M(), (torch.randn(3, 2),))
    with pytest.raises(NotImplementedError, match="cc_test.halves.default"):
        stablehlo.exported_program_to_stablehlo(ep)
    options = stablehlo.StableHLOExportOptions(custom_ops_allowed_in_graph={"cc_test"})
    (call,) = custom_calls(stablehlo.exported_program_to_stablehlo(ep, options).get_stablehlo_text())
    assert "-> tuple<tensor<3x2xf32>, tensor<3xf32>>" in call


def test_an_op_of_another_library_runs_its_own_kernel_on_the_device(dev):
    x = torch.randn(6)
    met.clear_all()
    out = scaled_sin(x.to(dev), 2.5)
    assert_same(out, scaled_sin(x, 2.5))
    assert_lowered()
    assert met.counter_value("xla::sin") == 1

    compiled = torch.compile(lambda t: scaled_sin(t, 0.5) * 3, backend="openxla")
    assert_same(compiled(x.to(dev)), (torch.sin(x) * 0.5 + 1) * 3)
    assert_lowered()
