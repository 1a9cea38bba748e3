"""Buffers users mark for donation, in graphs `torch.compile` captures: an input marked with
`_XLAC._set_buffer_donation`, or by the graph itself with `torch.ops.xla.dynamo_set_buffer_donor_`,
goes to the program when an output can take it; the tensor then is a placeholder."""
import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from tests.compare import assert_same
from torch_xla._lazy.graph.tensor import unwrap

XLAC = torch_xla._XLAC


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _placed(dev):
    x = torch.randn(5, 5)
    return x, x.to(dev)


def test_a_marked_input_the_graph_only_reads_is_donated(dev):
    x, t = _placed(dev)
    compiled = torch.compile(lambda a: a + 1, backend="openxla")
    assert XLAC._set_buffer_donation(t, True)
    out = compiled(t)
    assert_same(out, x + 1)
    assert XLAC._is_placecholder(t) and XLAC._get_buffer_donation(t)
    assert "Data Handle: Deleted" in XLAC._get_xla_tensor_debug_info(t)
    with pytest.raises(RuntimeError, match="deleted"):
        t.cpu()


def test_an_unmarked_input_is_kept_and_marks_do_not_leak_into_other_calls(dev):
    x, t = _placed(dev)
    compiled = torch.compile(lambda a: a * 2, backend="openxla")
    assert_same(compiled(t), x * 2)
    assert not XLAC._is_placecholder(t)
    _, marked = _placed(dev)
    XLAC._set_buffer_donation(marked, True)
    compiled(marked)
    assert XLAC._is_placecholder(marked)
    assert_same(compiled(t), x * 2) and not XLAC._is_placecholder(t)  # the kept program again


@pytest.mark.parametrize("returned", [False, True])
def test_a_marked_input_no_output_can_take_or_one_returned_is_kept(dev, returned):
    x, t = _placed(dev)
    fn = (lambda a: (a, a.sum())) if returned else (lambda a: a.sum())
    XLAC._set_buffer_donation(t, True)
    out = torch.compile(fn, backend="openxla")(t)
    assert not XLAC._is_placecholder(t)
    assert_same(t, x)
    assert_same(out[1] if returned else out, x.sum())


def test_the_graph_marks_its_input_with_the_donor_op_at_every_call(dev):
    def scale(a):
        torch.ops.xla.dynamo_set_buffer_donor_(a, True)
        return a * 1.1

    compiled = torch.compile(scale, backend="openxla")
    met.clear_all()
    for calls in range(1, 4):
        x, t = _placed(dev)
        assert_same(compiled(t), x * 1.1)
        assert XLAC._is_placecholder(t) and XLAC._get_buffer_donation(t)
        assert met.counter_value("XlaSetBufferDonation") == calls
    assert met.counter_value("DynamoCompile") == 1


def test_an_input_written_in_place_and_marked_is_donated_from_the_first_call(dev):
    def update(a):
        torch.ops.xla.dynamo_set_buffer_donor_(a, True)
        a += 0.5 * torch.sin(a)

    compiled = torch.compile(update, backend="openxla")
    x, t = _placed(dev)
    torch_xla.sync()
    met.clear_all()
    for _ in range(5):
        before = unwrap(t)._value.data
        compiled(t)
        assert before.is_deleted()        # its buffer went to the program, the first call too
        x = x + 0.5 * torch.sin(x)
    assert_same(t, x)
    assert not XLAC._get_buffer_donation(t)  # the new buffer is not marked
    assert met.metric_data("CompileTime")[0] == 1


def test_the_donor_op_outside_a_graph(dev):
    _, t = _placed(dev)
    out = torch.ops.xla.dynamo_set_buffer_donor_(t, True)
    assert XLAC._get_buffer_donation(t) and out.device == t.device
    assert torch.ops.xla.dynamo_set_buffer_donor_(t, False) is not None
    assert not XLAC._get_buffer_donation(t)
    cpu = torch.ones(2)
    assert torch.ops.xla.dynamo_set_buffer_donor_(cpu, True) is cpu  # other devices: nothing


def test_the_old_module_of_the_donor_op_only_warns():
    import importlib
    import sys
    sys.modules.pop("torch_xla.experimental.dynamo_set_buffer_donor", None)
    with pytest.warns(UserWarning, match="auto registered"):
        importlib.import_module("torch_xla.experimental.dynamo_set_buffer_donor")
    assert torch.ops.xla.dynamo_set_buffer_donor_.default is not None
