"""F.linear_cross_entropy's chunked ops lowered whole: loss and gradients as the CPU's."""
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import check_lowered
from tests._lazy.lowering._helpers import rand

options = pytest.importorskip("torch.nn.modules.linear_cross_entropy_options",
                              reason="this torch has no F.linear_cross_entropy")


def _inputs():
    torch.manual_seed(0)
    target = torch.randint(0, 5, (9,))
    target[2] = -100
    return (rand(9, 4, seed=1).requires_grad_(), rand(5, 4, seed=2).requires_grad_(),
            rand(5, seed=3).requires_grad_(), target, rand(5, seed=4, low=0.1, high=1))


@pytest.mark.parametrize("reduction,retain", [("mean", True), ("mean", False), ("sum", False),
                                               ("none", False)])
def test_chunked(reduction, retain):
    o = options.LinearCrossEntropyOptions(allow_retain_graph=retain, batch_chunk_size=4)

    def loss(x, w, b, t, cw):
        return (F.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, reduction=reduction, options=o),
                F.linear_cross_entropy(x, w, t.clamp(min=0), reduction=reduction, ignore_index=1,
                                       options=o))
    check_lowered(loss, *_inputs(), grads=True)


@pytest.mark.parametrize("change,error", [
    ({"label_smoothing": 0.1}, NotImplementedError), ({"reduction": "max"}, NotImplementedError),
    ({"target": "int32"}, TypeError)])
def test_chunked_op_raises_its_kernels_errors_at_the_op(change, error):
    """The kernel's checks its fake implementation lacks, raised when the op is traced."""
    x, w, _, t, _ = (a.detach() if isinstance(a, torch.Tensor) else a for a in _inputs())
    if change.pop("target", None):
        t = t.int()
    args = {"reduction": "mean", "label_smoothing": 0.0, **change}

    def call(x, w, t):
        return torch.ops.torch_nn._linear_cross_entropy_batch_chunked(
            x, w, t, None, None, args["reduction"], -100, args["label_smoothing"], 4, "balanced",
            torch.float32, False, False, False, False)
    with pytest.raises(error) as on_cpu:
        call(x, w, t)
    with pytest.raises(error) as on_device:
        call(x.to("xla"), w.to("xla"), t.to("xla"))
    assert str(on_device.value) == str(on_cpu.value)
