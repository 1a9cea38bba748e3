"""torch_xla._XLAC's script helpers that are not about graph text or sharding: XLA's
DotGeneral on XLA tensors, the execution guard."""
import re

import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from tests.compare import assert_same
from tests.fresh_process import python


def test_dot_general_contracts_the_dimensions_given(dev):
    t, w = torch.randn(2, 3), torch.randn(3, 4)
    y = torch_xla._XLAC._xla_dot_general(t.to(dev), w.to(dev), (([1], [0]), ()))
    assert_same(y, t @ w)


def test_dot_general_with_batch_dimensions_and_a_result_dtype(dev):
    a, b = torch.randn(3, 4, 5), torch.randn(3, 2, 5)
    y = torch_xla._XLAC._xla_dot_general(a.to(dev), b.to(dev), (([2], [2]), ([0], [0])),
                                         preferred_element_type=torch.float64)
    assert y.dtype == torch.float64 and y.shape == (3, 4, 2)
    assert_same(y, torch.einsum("bik,bjk->bij", a.double(), b.double()))


def test_dot_general_reads_pending_in_place_updates(dev):
    t = torch.ones(2, 1, device=dev)
    t[0][0] = 0
    y = torch_xla._XLAC._xla_dot_general(t, torch.ones(1, 2, device=dev), (([1], [0]), ()))
    assert y.cpu().tolist() == [[0, 0], [1, 1]]


def test_dot_general_counts_negative_dims_from_the_end(dev):
    a, b = torch.randn(3, 2, 4), torch.randn(3, 4, 5)
    y = torch_xla._XLAC._xla_dot_general(a.to(dev), b.to(dev), (([-1], [-2]), ([-3], [0])))
    assert_same(y, a @ b)
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 3"):
        torch_xla._XLAC._xla_dot_general(a.to(dev), b.to(dev), (([3], [1]), ()))


def test_dot_general_of_int8_values_accumulates_in_the_preferred_int32(dev):
    a = torch.randint(-128, 128, (2, 64, 8), dtype=torch.int8)
    b = torch.randint(-128, 128, (2, 8, 64), dtype=torch.int8)
    y = torch_xla._XLAC._xla_dot_general(a.to(dev), b.to(dev), (([2], [1]), ([0], [0])),
                                         preferred_element_type=torch.int32)
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([y])
    assert re.search(r"s32\[2,64,64\].* dot\(s8\[2,64,8\].*, s8\[2,8,64\]", hlo), hlo
    assert_same(y, a.int() @ b.int())  # exactly, where int8 results would wrap


def test_dot_general_keeps_an_int8_operand_beside_a_bfloat16_one(dev):
    x = torch.randn(3, 5).bfloat16()
    w = torch.randint(-128, 128, (4, 5), dtype=torch.int8)
    y = torch_xla._XLAC._xla_dot_general(x.to(dev), w.to(dev), (([1], [1]), ()))
    hlo = torch_xla._XLAC._get_xla_tensors_hlo([y])
    assert re.search(r"bf16\[3,4\].* dot\(bf16\[3,5\].*, s8\[4,5\]", hlo), hlo
    assert_same(y, (x.float() @ w.float().t()).bfloat16())


def test_dot_general_refuses_cpu_tensors_and_precision_configs(dev):
    a, b = torch.randn(2, 3, dtype=torch.bfloat16), torch.randn(3, 2, dtype=torch.bfloat16)
    for args, position in (((a, b.to(dev)), "first argument"), ((a.to(dev), b), "second argument")):
        with pytest.raises(RuntimeError) as e:
            torch_xla._XLAC._xla_dot_general(*args, (([1], [0]), ()))
        assert str(e.value) == (f"Expected input tensor ({position}) to be an actual XLA tensor. "
                                f"Got: CPUBFloat16Type. Consider moving it ({position}) to XLA.")
    with pytest.raises(RuntimeError, match="precision_config is not supported"):
        torch_xla._XLAC._xla_dot_general(a.to(dev), b.to(dev), (([1], [0]), ()), "highest")


def test_disallowed_execution_raises_and_leaves_the_graph_pending(dev):
    x = torch.ones(2, device=dev) + 1
    torch_xla._XLAC._set_allow_execution(False)
    try:
        met.clear_counters()
        with pytest.raises(RuntimeError, match="Unexpected execution"):
            x.cpu()
        assert met.counter_value("UncachedCompile") is None
    finally:
        torch_xla._XLAC._set_allow_execution(True)
    assert x.cpu().tolist() == [2, 2]


def test_tensor_debug_info_shows_shapes_ir_and_data(dev):
    x = torch.randn(4, 2, device=dev)
    torch_xla.sync()
    info = torch_xla._XLAC._get_xla_tensor_debug_info(x)
    assert "XLA Shape: f32[4,2]" in info and "IR: None" in info
    assert "Data Shape: f32[4,2]" in info and "Data Device: CPU:0" in info
    pending = torch_xla._XLAC._get_xla_tensor_debug_info(x.to(torch.complex64) * 2)
    assert "XLA Shape: c64[4,2]" in pending and "XLAData: None" in pending and "aten.mul" in pending
    # once an op has read its buffer, a tensor's IR is the node of that data, as torch_xla's
    info = torch_xla._XLAC._get_xla_tensor_debug_info(x)
    assert "IR: f32[4,2] xla::device_data, xla_shape=f32[4,2]{1,0}, device=CPU:0" in info
    assert torch_xla._XLAC._get_xla_tensor_debug_info(torch.ones(1)) == "Not a XLATensor\n"


def test_tensor_ids_are_stable_and_distinct(dev):
    a, b = torch.ones(2, device=dev), torch.ones(2, device=dev)
    ids = [torch_xla._XLAC._xla_get_tensor_id(t) for t in (a, b, a)]
    assert ids[0] == ids[2] != ids[1]
    a.add_(1)
    assert torch_xla._XLAC._xla_get_tensor_id(a) == ids[0]


def test_materialization_needs_and_fallback_ops(dev):
    x = torch.ones(2, device=dev)
    torch_xla.sync()
    y = x + 1
    assert torch_xla._XLAC._check_tensor_need_materialization([x, y]) == [False, True]
    met.clear_counters()
    torch_xla._XLAC._xla_increment_counter("aten::made_up", 2)
    assert torch_xla._XLAC._get_executed_fallback_ops() == ["aten::made_up"] == met.executed_fallback_ops()
    assert met.counter_value("aten::made_up") == 2


def test_a_buffer_marked_for_donation_goes_to_the_next_step(dev):
    t0, t1 = torch.randn(4, 2).to(dev), torch.randn(4, 2).to(dev)
    expected = t0.cpu() + t1.cpu()
    assert torch_xla._XLAC._set_buffer_donation(t0, True)
    assert torch_xla._XLAC._get_buffer_donation(t0) and not torch_xla._XLAC._get_buffer_donation(t1)
    met.clear_all()
    t2 = t0 + t1
    torch_xla.sync(wait=True)
    assert met.metric_data("InputOutputAliasCount")[1] == 1
    assert torch_xla._XLAC._is_placecholder(t0) and not torch_xla._XLAC._is_placecholder(t1)
    assert_same(t2, expected)
    assert not torch_xla._XLAC._set_buffer_donation(t1 * 2, True)  # pending: no buffer yet


@pytest.mark.parametrize("config", [True, False])
def test_sync_multi_donates_marked_buffers_only_under_the_donor_config(dev, config):
    t0, t1 = torch.randn(4, 2).to(dev), torch.randn(4, 2).to(dev)
    assert torch_xla._XLAC._set_buffer_donation(t0, True)
    t2 = t0 + t1
    t1 += 2  # its old buffer is no tensor's: a step would donate it, sync_multi does not
    met.clear_all()
    torch_xla._XLAC._xla_set_enable_alias_with_buffer_donor_config(config)
    try:
        torch_xla._XLAC._xla_sync_multi([t0, t1, t2], [str(dev)], True, False)
    finally:
        torch_xla._XLAC._xla_set_enable_alias_with_buffer_donor_config(False)
    assert met.metric_data("InputOutputAliasCount")[1] == int(config)
    assert torch_xla._XLAC._is_placecholder(t0) == config


def test_buffer_handles_and_runtime_state(dev):
    a, b = torch.tensor(42).to(dev), torch.arange(5, device=dev)
    handles = torch_xla._XLAC._get_tensors_handle([a, b])
    assert len(set(handles)) == 2 and torch_xla._XLAC._unsafe_buffer_pointer(a) == handles[0]
    torch_xla._XLAC._set_buffer_donation(a, True)
    c = a + 1
    torch_xla.sync(wait=True)
    with pytest.raises(RuntimeError, match="deleted"):
        torch_xla._XLAC._get_tensors_handle([a])
    assert c.item() == 43
    assert torch_xla._XLAC._xla_runtime_is_initialized()
    assert torch_xla._XLAC._xla_get_auto_sharding() is False
    assert torch_xla._XLAC._xla_get_all_devices() == ["CPU:0"]


def test_a_failed_runtime_start_is_kept(monkeypatch):
    monkeypatch.setattr(torch_xla._XLAC, "_client", [])
    for device in ("DUMMY_DEVICE", "CPU"):
        monkeypatch.setenv("PJRT_DEVICE", device)
        with pytest.raises(RuntimeError, match="No PjRtPlugin registered for: DUMMY_DEVICE"):
            torch_xla._XLAC._init_computation_client()
    monkeypatch.setattr(torch_xla._XLAC, "_client", [])
    torch_xla._XLAC._init_computation_client()  # CPU: started, no error


def test_coordinator_of_one_process_is_this_runtime_and_another_world_is_refused(dev):
    torch_xla._XLAC._ensure_xla_coordinator_initialized(0, 1, "localhost")
    with pytest.raises(RuntimeError, match="process 0 of 1, not 0 of 2"):
        torch_xla._XLAC._ensure_xla_coordinator_initialized(0, 2, "localhost")


def test_sync_point_is_the_first_step_asked_after_a_sigterm(dev):
    import os
    import signal
    xlac = torch_xla._XLAC
    with pytest.raises(RuntimeError, match="not watched"):
        xlac._sync_point_reached(0)
    before = signal.getsignal(signal.SIGTERM)
    xlac._activate_preemption_sync_manager()
    try:
        assert not xlac._sync_point_reached(1)
        os.kill(os.getpid(), signal.SIGTERM)  # delivered to the main thread before the next line
        assert xlac._sync_point_reached(2) and xlac._sync_point_reached(2)
        assert not xlac._sync_point_reached(3)
    finally:
        xlac._deactivate_preemption_sync_manager()
    assert signal.getsignal(signal.SIGTERM) is before


def test_shape_type_is_xla_s_element_type_name(dev):
    t = torch.rand(3, dtype=torch.half).to(dev).mul_(torch.tensor(7, dtype=torch.double).to(dev))
    assert t.dtype == torch.half and torch_xla._XLAC._get_xla_tensor_shape_type(t) == "f16"
    assert torch_xla._XLAC._get_xla_tensor_shape_type(torch.ones(2, dtype=torch.bool).to(dev)) == "pred"


def test_clear_pending_irs_leaves_placeholders_and_nothing_to_run(dev):
    a, b = torch.ones(4, device=dev), torch.ones(4, device=dev)
    torch_xla.sync()
    total = a + b
    product = total * b
    torch_xla._XLAC._xla_sync_multi([product], devices=[], wait=True)
    assert "aten::add" in torch_xla._XLAC._get_xla_tensors_text([total])
    met.clear_all()
    torch_xla._XLAC._clear_pending_irs(str(dev))
    assert "aten::add" not in torch_xla._XLAC._get_xla_tensors_text([total])
    torch_xla.sync()
    assert met.metric_data("ExecuteTime") is None  # nothing was left to run
    assert product.cpu().tolist() == [2.0] * 4
    with pytest.raises(RuntimeError):
        total.cpu()


def test_the_engine_is_installed_once_at_import():
    code = ("import torch, torch_xla, torch_xla.debug.metrics as met\n"
            "torch_xla._XLAC._init_xla_lazy_backend(); torch_xla._XLAC._init_xla_lazy_backend()\n"
            "print(met.counter_value('RegisterXLAFunctions'), (torch.ones(2, device='xla') + 1).tolist())")
    assert python("-c", code).stdout.split("\n")[-2] == "1 [2.0, 2.0]"
