"""torch_xla._XLAC.lowering.LoweringContext: the HLO module of the program behind some
tensors (serialized, protobuf text, JSON), and the values its parameters take."""
import json

import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from torch_xla._lazy.inspect import hlo_proto


def _pending_sum(dev):
    a = torch.tensor([1.0, 2.0, 3.0], device=dev)
    b = torch.tensor([4.0, 5.0, 6.0], device=dev)
    torch_xla.sync()
    return a, b, (a + b) * 2.5


def _opcodes(module):
    return [i.opcode for c in module.computations for i in c.instructions]


def test_module_of_pending_tensors_without_running_them(dev):
    a, b, result = _pending_sum(dev)
    met.clear_all()
    ctx = torch_xla._XLAC.lowering.LoweringContext("MyCustomName")
    ctx.build([result])
    assert met.metric_data("ExecuteTime") is None and met.metric_data("CompileTime") is None
    text = ctx.hlo_text()
    assert text.startswith('name: "MyCustomName"\n')
    # a, b and the Python scalar 2.5 (a parameter, as torch_xla uploads it)
    assert text.count('opcode: "parameter"') == 3
    assert 'opcode: "add"' in text and 'opcode: "multiply"' in text
    module = hlo_proto.module(ctx.hlo())
    assert module.name == "MyCustomName" and ctx.hlo() == ctx.hlo()
    assert _opcodes(module).count("parameter") == 3
    as_json = json.loads(ctx.hlo_json())
    assert as_json["name"] == "MyCustomName"
    assert len(as_json["hostProgramShape"]["parameters"]) == 3
    assert result.cpu().tolist() == [12.5, 17.5, 22.5]  # still pending until now


def test_parameter_mappings(dev):
    a, b, result = _pending_sum(dev)
    ctx = torch_xla._XLAC.lowering.LoweringContext()
    ctx.build([result])
    ia, ib = ctx.tensor_parameter_id(a), ctx.tensor_parameter_id(b)
    assert sorted([ia, ib]) == [0, 1]
    assert ctx.tensor_parameter_id(result) == -1  # pending: no parameter
    assert ctx.tensor_parameter_id(torch.ones(3, device=dev)) == -1  # not read by the graph
    met.clear_all()
    on_host = ctx.parameter_id_tensor_mapping()
    assert met.metric_data("TransferFromDeviceTime")[0] == 2
    assert sorted(on_host) == [0, 1, 2] and all(t.device.type == "cpu" for t in on_host.values())
    assert on_host[ia].tolist() == [1.0, 2.0, 3.0] and on_host[ib].tolist() == [4.0, 5.0, 6.0]
    assert on_host[2].item() == 2.5
    met.clear_all()
    on_device = ctx.device_parameter_id_tensor_mapping()
    assert met.metric_data("TransferFromDeviceTime") is None
    assert all(t.device.type == "xla" for t in on_device.values())
    assert {i: t.cpu().tolist() for i, t in on_device.items()} == {
        i: t.tolist() for i, t in on_host.items()}


def test_tensor_holding_a_buffer_is_its_parameter(dev):
    a = torch.arange(4.0, device=dev)
    torch_xla.sync()
    ctx = torch_xla._XLAC.lowering.LoweringContext()
    ctx.build([a])
    module = hlo_proto.module(ctx.hlo())
    assert _opcodes(module) == ["parameter"]
    assert ctx.tensor_parameter_id(a) == 0
    assert ctx.parameter_id_tensor_mapping()[0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_parameters_shared_or_not_match_the_program_shape(dev):
    tensors = [torch.tensor(i // 3, device=dev) for i in range(9)]
    torch_xla.sync()
    result = sum(tensors[1:], tensors[0])
    ctx = torch_xla._XLAC.lowering.LoweringContext()
    ctx.build([result])
    parameters = json.loads(ctx.hlo_json())["hostProgramShape"]["parameters"]
    assert len(ctx.parameter_id_tensor_mapping()) == len(parameters)


def test_name_string_and_unbuilt_context():
    ctx = torch_xla._XLAC.lowering.LoweringContext("ctx")
    assert ctx.get_name_string() == ""
    ctx.set_name_string("bodyctx")
    assert ctx.get_name_string() == "bodyctx"
    with pytest.raises(RuntimeError, match="build"):
        ctx.hlo_text()
    with pytest.raises(ValueError, match="at least one"):
        ctx.build([])
