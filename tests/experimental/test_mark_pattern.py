"""StableHLO composites (`torch.ops.xla.mark_tensor`, `StableHLOCompositeBuilder`): the marked
region of a lazy program or of an exported one is one `stablehlo.composite`, with the
pattern's attributes as torch_xla types them; the program computes what the CPU does."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
from torch_xla import _XLAC, stablehlo
from torch_xla.experimental import xla_marker
from torch_xla.experimental.mark_pattern_utils import StableHLOCompositeBuilder
from tests.compare import assert_same


def scaled_gelu(x, w, builder):
    h = x * 3  # computed before the pattern: an operand of the composite
    (u,) = (builder.mark_inputs(h),)
    y = F.gelu(u, approximate="tanh") * w + 2.5  # w and 2.5 are read from outside the region
    return builder.mark_outputs(y).sum()


def composites(text):
    return re.findall(r'stablehlo\.composite "([^"]+)"', text)


def test_a_marked_region_is_one_composite_and_computes_what_the_cpu_does(dev):
    x, w = torch.randn(5), torch.randn(5)
    attr = {"approx": "tanh", "k": [1.5, 2.0], "n": 2, "on": True, "scale": 0.25}
    z = scaled_gelu(x.to(dev), w.to(dev), StableHLOCompositeBuilder("test.gelu", attr))
    text = xm.get_stablehlo([z])
    assert composites(text) == ["test.gelu"]
    assert ('{composite_attributes = {approx = "tanh", k = dense<[1.500000e+00, 2.000000e+00]> : '
            'tensor<2xf32>, n = 2 : i64, on = true, scale = 2.500000e-01 : f32}, '
            'decomposition = @test.gelu.impl}') in text
    assert "func.func private @test.gelu.impl(" in text  # the region is the decomposition
    assert "stablehlo.tanh" in text.split("@test.gelu.impl(")[1]
    assert_same(z, scaled_gelu(x, w, StableHLOCompositeBuilder("test.gelu", attr)))


def test_patterns_of_one_name_are_composites_of_their_own(dev):
    def f(x, y):
        outs = []
        for t, scale in ((x, 0.5), (y, 2)):
            b = StableHLOCompositeBuilder("test.scale", {"scale": scale})
            outs.append(b.mark_outputs(b.mark_inputs(t) * scale))
        return outs

    x, y = torch.randn(3), torch.randn(3)
    got = f(x.to(dev), y.to(dev))
    text = _XLAC._get_stablehlo(got)
    assert composites(text) == ["test.scale", "test.scale"]
    assert "decomposition = @test.scale.impl}" in text and "decomposition = @test.scale.impl_0}" in text
    assert "scale = 5.000000e-01 : f32" in text and "scale = 2 : i64" in text
    assert_same(got, f(x, y))


def test_an_exported_program_keeps_its_composites():
    class KV(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(1, 8, 4), persistent=False)

        def forward(self, pos, val):
            b = StableHLOCompositeBuilder("test.update_cache")
            cache, pos, val = b.mark_inputs(self.cache, pos, val)
            return b.mark_outputs(cache.index_copy_(1, pos, val)) * 2

    pos, val = torch.tensor([1, 5]), torch.randn(1, 2, 4)
    module = KV()
    shlo = stablehlo.exported_program_to_stablehlo(torch.export.export(module, (pos, val)))
    text = shlo.get_stablehlo_text()
    assert composites(text) == ["test.update_cache"]
    assert "decomposition = @test.update_cache.impl}" in text
    assert_same(shlo(pos, val), module(pos, val))


def test_a_mark_on_a_cpu_tensor_is_a_copy():
    x = torch.randn(4)
    y = torch.ops.xla.mark_tensor(x, "test.p", 0, "0", True)
    assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()


def test_attributes_are_checked_where_they_are_given():
    with pytest.raises(ValueError, match="Composite attr value must be"):
        xla_marker.serialize_composite_attr({"mixed": [1, 2.0]})
    with pytest.raises(ValueError, match="Composite attr name must be a Python str"):
        xla_marker.serialize_composite_attr({1: 2})


def test_a_region_reading_its_own_output_is_refused(dev):
    x, y = torch.randn(3, device=dev), torch.randn(3, device=dev)
    a = torch.ops.xla.mark_tensor(x, "test.p", 0, "0", True)
    first = torch.ops.xla.mark_tensor(y + 1, "test.p", 0, "0", False)
    second = torch.ops.xla.mark_tensor(a + first * 2, "test.p", 1, "0", False)  # reads `first`
    with pytest.raises(RuntimeError, match="'test.p': its region reads its own output"):
        xm.get_stablehlo([second])


def test_xlac_marks_a_tensor_from_its_boundary_as_json(dev):
    x = torch.randn(3, device=dev)
    info = '{"name": "test.j", "pos": 0, "id": "7", "is_input": true, "attr": null}'
    a = _XLAC._xla_mark_tensor(x, info)
    out = _XLAC._xla_mark_tensor(a * 2, info.replace("true", "false").replace("null", '{"k": 1}'))
    text = xm.get_stablehlo([out])
    assert composites(text) == ["test.j"] and "k = 1 : i64" in text
    assert_same(out, x.cpu() * 2)
