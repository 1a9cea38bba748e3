"""torch_xla's FX passes for programs with dynamic dimensions
(torch_xla/experimental/unbounded_dynamism_export.py) and the ops they emit
(xla_dynamic_reshape_ops): the rewritten graph computes what it computed, and still exports
with the dimension symbolic."""
import torch
from torch.export import Dim, export

from torch_xla import stablehlo
from torch_xla.experimental import unbounded_dynamism_export as passes

from tests.compare import assert_same


class _Flatten(torch.nn.Module):
    def forward(self, x, y):
        flat = x.view(x.shape[0] * x.shape[1], -1)
        return flat, y.expand([x.shape[0], -1, -1])


def _program():
    batch = Dim("batch")
    args = (torch.randn(3, 2, 4), torch.randn(1, 1, 5))
    return export(_Flatten(), args, dynamic_shapes=({0: batch}, None)), args


def test_views_and_expands_to_symbolic_sizes_become_xla_ops_with_the_same_results():
    ep, args = _program()
    before = ep.module()(*args)
    passes.process_exported_program_with_symbolic_input(ep)
    code = ep.graph_module.code
    assert "xla.dynamic_view" in code and "xla.dynamic_expand" in code
    assert "aten.view" not in code and "aten.expand" not in code
    assert_same(ep.module()(*args), before, device="cpu")
    assert passes.exported_program_has_symbolic_input_shape(ep)


def test_the_rewritten_program_exports_with_the_dimension_symbolic():
    ep, _ = _program()
    passes.process_exported_program_with_symbolic_input(ep)
    module = stablehlo.exported_program_to_stablehlo(ep)
    assert "tensor<?x2x4xf32>" in module.get_stablehlo_text()
    y = torch.randn(1, 1, 5)
    for n in (1, 5):  # sizes other than the one traced
        x = torch.randn(n, 2, 4)
        assert_same(module(x, y), _Flatten()(x, y))


def test_select_and_unsqueeze_of_a_symbolic_input_become_slices_and_views():
    class M(torch.nn.Module):
        def forward(self, x):
            return x.select(1, -1).unsqueeze(1)
    x = torch.randn(3, 4, 2)
    ep = export(M(), (x,), dynamic_shapes=({0: Dim("batch")},))
    passes.decompose_dynamic_shape_select(ep.graph_module)
    passes.dynamic_unsqueeze_to_view(ep.graph_module)
    ep.graph_module.recompile()
    assert "aten.select" not in ep.graph_module.code and "aten.unsqueeze" not in ep.graph_module.code
    assert_same(ep.module()(x), M()(x), device="cpu")


def test_group_norm_math_matches_pytorch_for_groups_of_several_channels():
    x, w, b = torch.randn(2, 6, 5), torch.randn(6), torch.randn(6)
    expected = torch.ops.aten.native_group_norm(x, w, b, 2, 6, 5, 3, 1e-5)[0]
    assert_same(passes.native_group_norm_impl(x, w, b, 2, 6, 5, 3, 1e-5), expected,
                rtol=1e-5, atol=1e-5, device="cpu")
