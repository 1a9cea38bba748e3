"""`xla::NAME` counters: one count per op the engine is given, cleared with the others; the
tensor debug info says whether a tensor holds a buffer or a pending node."""
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met


def test_each_op_counts_once(dev):
    x = torch.randn(3, device=dev)
    met.clear_counters()
    for _ in range(4):
        y = x + 1
    torch.mm(torch.ones(2, 2, device=dev), torch.ones(2, 2, device=dev))
    assert met.counter_value("xla::add") == 4 and met.counter_value("xla::mm") == 1
    assert {"xla::add", "xla::mm"} <= set(met.counter_names())
    assert "Counter: xla::add\n  Value: 4" in met.metrics_report()
    met.clear_counters()
    assert met.counter_value("xla::add") is None and "xla::add" not in met.counter_names()
    y = y * 2
    assert met.counter_value("xla::mul") == 1


def test_tensor_debug_info(dev):
    assert torch_xla._XLAC._get_xla_tensor_debug_info(torch.ones(2)) == "Not a XLATensor\n"
    t = torch.ones(5, 3, device=dev) + 5
    info = torch_xla._XLAC._get_xla_tensor_debug_info(t)
    assert "XLA Shape: f32[5,3]" in info and "IR: aten::add" in info and "XLAData: None" in info
    xm.mark_step()
    info = torch_xla._XLAC._get_xla_tensor_debug_info(t)
    assert "IR: None" in info and "Data Shape: f32[5,3]" in info
