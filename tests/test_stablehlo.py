"""torch_xla.stablehlo: exported programs as StableHLO modules that run on the XLA device,
saved to a directory and loaded again in a fresh process without the model's code."""
import importlib.util
import os
import re
import textwrap

import pytest
import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
from torch_xla import _XLAC
from torch_xla import stablehlo
from torch_xla.utils import stablehlo_test_utils
from tests.compare import assert_same
from tests.fresh_process import python



class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x, scale):
        h = torch.relu(self.bn(self.conv(x))).flatten(1)
        return {"logits": self.fc(h) * scale, "mean": h.mean()}


def small_model():
    torch.manual_seed(0)
    model = Small().eval()
    with torch.no_grad():  # running statistics other than the initial ones
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model


def assert_outputs_equal(actual, expected):
    assert set(actual) == set(expected)
    for key in expected:
        assert actual[key].device.type == "xla"
        assert_same(actual[key], expected[key], rtol=1e-5, atol=1e-5)


def test_exports_text_and_bytecode_and_runs():
    model = small_model()
    x, scale = torch.randn(2, 3, 8, 8), torch.tensor(3.0)
    module = stablehlo.exported_program_to_stablehlo(torch.export.export(model, (x, scale)))
    text = module.get_stablehlo_text()
    assert "stablehlo.convolution" in text and "func.func public @main" in text
    bytecode = module.get_stablehlo_bytecode()
    assert bytecode.startswith(b"ML\xefR")  # MLIR bytecode
    with torch.no_grad():
        expected = model(x, scale)
    assert_outputs_equal(module(x, scale), expected)
    assert_outputs_equal(module(x.to(xm.xla_device()), scale), expected)  # inputs on the device


def test_saves_and_loads_in_a_fresh_process_without_the_model(tmp_path):
    pytest.importorskip("flatbuffers", reason="jax.export's serialized modules need flatbuffers "
                                              "(requirements-ci.txt installs it)")
    model = small_model()
    x, scale = torch.randn(2, 3, 8, 8), torch.tensor(0.5)
    stablehlo.save_torch_model_as_stablehlo(model, (x, scale), str(tmp_path / "model"))
    names = sorted(os.listdir(tmp_path / "model" / "functions"))
    assert names == ["forward.bytecode", "forward.jax", "forward.meta", "forward.mlir"]
    assert sorted(os.listdir(tmp_path / "model" / "data")) == sorted(model.state_dict())
    with torch.no_grad():
        expected = model(x, scale)
    torch.save({"x": x, "scale": scale, "expected": expected}, tmp_path / "io.pt")
    # A fresh process that knows nothing of Small: only the directory and the inputs.
    script = textwrap.dedent(f"""
        import torch
        from torch_xla.stablehlo import StableHLOGraphModule
        from tests.compare import assert_same
        io = torch.load({str(tmp_path / 'io.pt')!r})
        module = StableHLOGraphModule.load({str(tmp_path / 'model')!r})
        out = module(io["x"], io["scale"])
        for key, value in io["expected"].items():
            assert out[key].device.type == "xla", out[key].device
            assert_same(out[key], value, rtol=1e-5, atol=1e-5)
        print("loaded and ran", sorted(out))
    """)
    done = python("-c", script, cwd=tmp_path)
    assert "loaded and ran ['logits', 'mean']" in done.stdout


def test_dynamic_dimension_stays_symbolic():
    model = nn.Sequential(nn.Linear(6, 3), nn.Tanh()).eval()
    batch = torch.export.Dim("batch")
    ep = torch.export.export(model, (torch.randn(4, 6),), dynamic_shapes=({0: batch},))
    module = stablehlo.exported_program_to_stablehlo(ep)
    meta = module._bundle.stablehlo_funcs[0].meta
    user_input = meta.input_signature[[loc.type_ for loc in meta.input_locations].index(
        stablehlo.VariableType.INPUT_ARG)]
    assert user_input.dynamic_dims == [0]
    assert "tensor<?x6xf32>" in module.get_stablehlo_text()
    for n in (1, 4, 9):
        x = torch.randn(n, 6)
        with torch.no_grad():
            assert_same(module(x), model(x), rtol=1e-5, atol=1e-6)


def test_a_full_slice_of_a_dynamic_dimension_keeps_it_symbolic():
    """slice(x, 0, 0, INT64_MAX) on the dynamic dim: its bounds clamped to the symbolic size."""
    model = stablehlo_test_utils.wrap_func_as_nn_module(torch.ops.aten.slice.Tensor)
    args = (torch.randn(4, 3), 0, 0, torch.iinfo(torch.int64).max)
    ep = torch.export.export(model, args, dynamic_shapes=(({0: torch.export.Dim("n")}, None, None, None),))
    module = stablehlo.exported_program_to_stablehlo(ep)
    assert "tensor<?x3xf32>" in module.get_stablehlo_text()
    for n in (2, 7):
        x = torch.randn(n, 3)
        assert_same(module(x, *args[1:]), model(x, *args[1:]))


def test_random_ops_draw_from_the_device_generator():
    class Noisy(nn.Module):
        def forward(self, x):
            return x + torch.rand_like(x)

    module = stablehlo.exported_program_to_stablehlo(
        torch.export.export(Noisy(), (torch.zeros(64),)))
    a, b = module(torch.zeros(64)).cpu(), module(torch.zeros(64)).cpu()
    assert not torch.equal(a, b)
    assert 0 <= a.min() and a.max() < 1


class Scaled(nn.Module):
    def forward(self, x):
        return x * 2.5 + 1


def test_constants_become_inputs_without_inline_all_constant(tmp_path):
    x = torch.randn(3)
    ep = torch.export.export(Scaled(), (x,))
    inlined = stablehlo.exported_program_to_stablehlo(ep)
    assert "2.5" in inlined.get_stablehlo_text()
    options = stablehlo.StableHLOExportOptions(inline_all_constant=False)
    module = stablehlo.exported_program_to_stablehlo(ep, options)
    meta = module._bundle.stablehlo_funcs[0].meta
    kinds = [loc.type_ for loc in meta.input_locations]
    assert kinds == [stablehlo.VariableType.INPUT_ARG, stablehlo.VariableType.CONSTANT]
    assert [float(c) for c in module._bundle.additional_constants] == [2.5]   # 1 stays inlined
    assert "2.5" not in module.get_stablehlo_text()
    assert_same(module(x), x * 2.5 + 1)
    module.save(tmp_path, options)
    assert os.listdir(tmp_path / "constants") == ["0"]
    assert_same(stablehlo.StableHLOGraphModule.load(tmp_path)(x), x * 2.5 + 1)
    half = torch.randn(3).half()  # a constant input keeps PyTorch's promotion: float16 stays
    out = stablehlo.exported_program_to_stablehlo(torch.export.export(Scaled(), (half,)), options)(half)
    assert out.dtype == torch.float16
    assert_same(out, half * 2.5 + 1)


def test_node_metadata_goes_into_the_locations():
    ep = torch.export.export(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), (torch.randn(1, 2),))
    plain = stablehlo.exported_program_to_stablehlo(ep).get_stablehlo_text()
    text = stablehlo.exported_program_to_stablehlo(
        ep, stablehlo.StableHLOExportOptions(export_node_metadata=True)).get_stablehlo_text()
    assert "nn_module_stack" not in plain
    located = [line for line in text.splitlines() if line.startswith("#loc") and "nn_module_stack" in line]
    assert any("torch.nn.modules.activation.ReLU" in line for line in located), located[:3]


@torch.library.custom_op("shlo_test::scale", mutates_args=())
def _scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@_scale.register_fake
def _(x, factor):
    return torch.empty_like(x)


class UsesCustomOp(nn.Module):
    def forward(self, x):
        return torch.ops.shlo_test.scale(x + 1, 3.0).sin()


def test_custom_ops_allowed_in_graph_become_custom_calls():
    ep = torch.export.export(UsesCustomOp(), (torch.randn(4),))
    x = torch.randn(4)
    own = stablehlo.exported_program_to_stablehlo(ep)   # not allowed: its own kernel, lowered
    assert "stablehlo.custom_call" not in own.get_stablehlo_text()
    assert_same(own(x), UsesCustomOp()(x))
    module = stablehlo.exported_program_to_stablehlo(
        ep, stablehlo.StableHLOExportOptions(custom_ops_allowed_in_graph={"shlo_test"}))
    text = module.get_stablehlo_text()
    calls = [line for line in text.splitlines() if "stablehlo.custom_call" in line]
    assert len(calls) == 1 and "@shlo_test.scale.default" in calls[0], calls
    assert "(tensor<4xf32>) -> tensor<4xf32>" in calls[0]
    assert "stablehlo.sine" in text
    with pytest.raises(Exception, match="shlo_test.scale.default"):
        module(torch.randn(4))                         # this runtime has no such target


def test_weights_left_out_must_be_given():
    ep = torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))
    module = stablehlo.exported_program_to_stablehlo(
        ep, stablehlo.StableHLOExportOptions(export_weights=False))
    with pytest.raises(RuntimeError, match="weight 'weight' is not in this module"):
        module(torch.randn(1, 2))


def _module_text(bytecode):
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo as hlo
    with ir.Context() as context:
        hlo.register_dialect(context)
        return str(hlo.deserialize_portable_artifact(context, bytecode))


def test_bytecode_of_the_pending_graph(dev):
    a = torch.randn(3, 3, device=dev)
    b = torch.tanh(a) * 2.5
    for bytecode in (xm.get_stablehlo_bytecode([b]), _XLAC._get_stablehlo([b], "xla:0", [], True)):
        assert bytecode.startswith(b"ML\xefR")  # MLIR bytecode
        text = _module_text(bytecode)
        assert "stablehlo.tanh" in text and "stablehlo.multiply" in text
    xm.mark_step()
    assert xm.get_stablehlo_bytecode([b]) == b""  # nothing pending any more


def test_stablehlo_test_utils_wrap_a_function_for_export():
    from torch_xla.utils import stablehlo_test_utils as st
    m = st.wrap_func_as_nn_module(lambda a, b: a * b + 1)
    assert not m.training
    ep = torch.export.export(m, (torch.ones(2), torch.full((2,), 3.0)))
    assert ep.module()(torch.ones(2), torch.full((2,), 3.0)).tolist() == [4.0, 4.0]
    assert st.has_tf_package() == (importlib.util.find_spec("tensorflow") is not None)


def test_save_functions_are_reachable_from_the_package():
    """torch_xla exports `save_as_stablehlo` and `save_torch_model_as_stablehlo` at its top
    (upstream's tests import them from there); other names still raise AttributeError."""
    import pytest
    import torch_xla
    import torch_xla.stablehlo as stablehlo
    from torch_xla import save_as_stablehlo, save_torch_model_as_stablehlo
    assert save_as_stablehlo is stablehlo.save_as_stablehlo
    assert save_torch_model_as_stablehlo is stablehlo.save_torch_model_as_stablehlo
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        torch_xla.not_a_name


def test_write_mlir_debuginfo_names_the_exported_op(dev):
    """xla::write_mlir_debuginfo(x, name) puts `name` in the location of the op computing x
    in the exported StableHLO; on XLA tensors it is x."""
    import torch_xla.experimental.xla_mlir_debuginfo  # noqa: F401  (defines the op)
    from torch_xla.stablehlo import exported_program_to_stablehlo

    class M(torch.nn.Module):
        def forward(self, x, y):
            x = torch.ops.xla.write_mlir_debuginfo(x + y, "MY_ADD")
            return torch.ops.xla.write_mlir_debuginfo(x - y, "MY_SUB")

    args = (torch.rand(10), torch.rand(10))
    text = exported_program_to_stablehlo(torch.export.export(M(), args)).get_stablehlo_text()
    assert re.search(r'loc\("[^"]*/MY_ADD/add"', text) and re.search(r'loc\("[^"]*/MY_SUB/sub"', text)
    x = torch.rand(3)
    assert torch.equal(torch.ops.xla.write_mlir_debuginfo(x.to(dev) * 2, "A").cpu(), x * 2)
