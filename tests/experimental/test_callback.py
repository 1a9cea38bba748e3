"""on_ready_callback / on_ready_event: called once the buffer is computed, with the tensor;
a tensor only traced is refused."""
import threading

import pytest
import torch

import torch_xla
from torch_xla.experimental import callback
from tests.compare import assert_same


def test_callback_gets_the_computed_tensor(dev):
    t = torch.randn(64, 64, device=dev) @ torch.randn(64, 64, device=dev)
    torch_xla.sync()
    seen, done = [], threading.Event()

    def cb(tensor):
        seen.append((tensor, "IR: None" in torch_xla._XLAC._get_xla_tensor_debug_info(tensor),
                     threading.current_thread() is threading.main_thread()))
        done.set()
    callback.on_ready_callback(t, cb)
    assert done.wait(60)
    assert seen == [(t, True, False)]


def test_event_and_order(dev):
    tensors = [torch.full((4,), float(i), device=dev) * 2 for i in range(3)]
    torch_xla.sync()
    events = [callback.on_ready_event(t) for t in tensors]
    assert all(e.wait(60) for e in events)
    assert_same(tensors[2], torch.full((4,), 4.0))


def test_a_failing_callback_does_not_stop_later_ones(dev):
    t = torch.ones(2, device=dev) + 1
    torch_xla.sync()
    errors = []
    hook = threading.excepthook
    threading.excepthook = errors.append
    try:
        callback.on_ready_callback(t, lambda _: 1 / 0)
        assert callback.on_ready_event(t).wait(60)
    finally:
        threading.excepthook = hook
    assert [e.exc_type for e in errors] == [ZeroDivisionError]


def test_a_traced_tensor_is_refused(dev):
    t = torch.ones(2, device=dev) * 3
    with pytest.raises(RuntimeError, match="still to be computed"):
        callback.on_ready_callback(t, print)
