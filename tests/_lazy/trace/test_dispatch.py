"""What happens at the op: PyTorch's errors for bad input, and the counted CPU fallback."""
import warnings

import pytest
import torch
from torch._decomp import decomposition_table

import torch_xla.debug.metrics as met
from tests.compare import assert_same, fallbacks
from torch_xla._lazy.trace import fallback
from torch_xla._lazy.lowering import REGISTRY

BAD_INPUT = [
    (lambda d: torch.ones(2, 3, device=d) + torch.ones(4, device=d), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d) @ torch.ones(2, 3, device=d), RuntimeError),
    (lambda d: torch.ones(2, 2, device=d).mm(torch.ones(2, 2, dtype=torch.int64, device=d)), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d).view(4), RuntimeError),
    (lambda d: torch.ones(3, device=d)[5], IndexError),
    (lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(2, 4, device=d)]), RuntimeError),
    (lambda d: torch.ones(2, 3, device=d).sum(dim=3), IndexError),
    (lambda d: torch.nn.functional.linear(torch.ones(4, 3, device=d), torch.ones(5, 4, device=d)), RuntimeError),
    # CPU checks that meta kernels leave out (or fail with an assertion)
    (lambda d: torch.complex(torch.ones(2, device=d), torch.ones(2, device=d).double()), RuntimeError),
    (lambda d: torch.complex(torch.ones(2, device=d), torch.ones(2, dtype=torch.int32, device=d)),
     RuntimeError),
    (lambda d: torch.ones(2, device=d).masked_scatter(torch.ones(2, dtype=torch.uint8, device=d),
                                                      torch.ones(2, device=d)), RuntimeError),
    (lambda d: torch.nn.functional.conv2d(torch.ones(1, 2, 5, 5, device=d),
                                          torch.ones(3, 2, 3, 3, device=d), dilation=0), RuntimeError),
    (lambda d: torch.nn.functional.conv1d(torch.ones(1, 2, 5, device=d),
                                          torch.ones(3, 2, 3, device=d), padding=-1), RuntimeError),
    (lambda d: torch.bucketize(torch.ones(3, device=d), torch.ones(2, 2, device=d)), RuntimeError),
    (lambda d: torch.zeros(3, 2, device=d).index_add(0, torch.tensor([0, 1], device=d),
                                                     torch.ones(2, device=d)), RuntimeError),
    (lambda d: torch.zeros(3, 2, device=d).index_add(0, torch.tensor([0, 1], device=d),
                                                     torch.ones(2, 3, device=d)), RuntimeError),
    # reductions along a dim of size 0 (their meta kernels accept them)
    (lambda d: torch.max(torch.ones(2, 0, 3, device=d), dim=1), IndexError),
    (lambda d: torch.ones(2, 0, device=d).mode(), IndexError),
    # decompositions' own checks are worded as the CPU kernel's
    (lambda d: torch.nn.functional.multi_margin_loss(torch.ones(5, 4, device=d),
                                                     torch.ones(5, 4, dtype=torch.long, device=d)),
     RuntimeError),
    (lambda d: torch.nn.functional.multilabel_margin_loss(
        torch.ones(5, 4, device=d), torch.ones(4, dtype=torch.long, device=d)), RuntimeError),
]


@pytest.mark.parametrize("case", range(len(BAD_INPUT)))
def test_bad_input_raises_pytorchs_error_at_the_op(dev, case):
    make, error = BAD_INPUT[case]
    with pytest.raises(error) as on_cpu:
        make("cpu")
    with pytest.raises(error) as on_xla:
        make(dev)  # raised here, at the op, not at a later compile
    assert str(on_xla.value) == str(on_cpu.value)


def test_a_cpu_tensor_meeting_an_xla_tensor_is_an_error(dev):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device=dev) + torch.ones(2)
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(2, 2, device=dev) @ torch.ones(2, 2)


def test_a_cpu_scalar_tensor_may_meet_an_xla_tensor(dev):
    out = torch.ones(2, device=dev) * torch.tensor(3.0)
    assert out.device.type == "xla" and out.cpu().tolist() == [3.0, 3.0]


# Ops with neither a lowering nor a decomposition today, each with a call that runs it. The
# first one still without a lowering serves as the example (the list outlives new lowerings).
_CANDIDATES = [
    ("linalg_lstsq", lambda op, t: op(t, t[:, :2])[0]),
    ("_ctc_loss", lambda op, t: op(t.log_softmax(1).unsqueeze(1), torch.tensor([[1, 2]]), [5], [2])[0]),
]


def _an_op_without_lowering():
    for name, call in _CANDIDATES:
        op = getattr(torch.ops.aten, name).default
        if op not in REGISTRY and op not in decomposition_table:
            return op, name, call
    pytest.fail("every candidate has a lowering now: add an op without one to _CANDIDATES")


def test_in_place_dunder_ops_inside_the_engine_take_their_functional_form(dev):
    """isclose's decomposition ends in `__ior__`; below functionalization it runs as `__or__`
    (not a CPU fallback that would drop the write), so allclose is right on the device."""
    x = torch.tensor([1.0, float("nan"), 3.0])
    met.clear_counters()
    for kwargs in [{}, {"equal_nan": True}]:
        assert torch.allclose(x.to(dev), x.to(dev), **kwargs) == torch.allclose(x, x, **kwargs)
    assert torch.allclose(x.to(dev), (x + 1e-9).to(dev), equal_nan=True)
    assert not torch.allclose(x.to(dev), (x + 1e-3).to(dev), equal_nan=True)
    assert not fallbacks()


def test_fallback_runs_on_the_cpu_counts_and_warns_once(dev):
    op, name, call = _an_op_without_lowering()
    a = torch.rand(5, 4)
    met.clear_counters()
    fallback._warned.discard(f"aten::{name}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call(op, a.to(dev))
        call(op, a.to(dev))
    assert out.device.type == "xla"
    assert_same(out, call(op, a))
    assert met.counter_value(f"aten::{name}") == 2
    assert f"aten::{name}" in met.short_metrics_report()
    assert len([w for w in caught if name in str(w.message)]) == 1


def test_fallback_can_be_turned_into_an_error_naming_the_op(dev, monkeypatch):
    op, name, call = _an_op_without_lowering()
    monkeypatch.setenv("XLA_NO_CPU_FALLBACK", "1")
    with pytest.raises(NotImplementedError, match=f"aten::{name}"):
        call(op, torch.rand(5, 4, device=dev))


def test_max_of_an_empty_tensor_raises_at_the_op(dev):
    with pytest.raises(RuntimeError) as on_cpu:
        torch.empty(0).max()
    with pytest.raises(RuntimeError) as on_xla:
        torch.empty(0, device=dev).max()
    assert str(on_xla.value) == str(on_cpu.value)


def test_a_training_steps_error_probes_do_no_full_size_work(dev):
    """The first step of an MLP (784-1024-1024-10, batch 128, as in benchmarks/mlp.py) probes
    PyTorch's CPU kernels for errors only on stand-ins of size 1: each probe counted, none
    at full size."""
    from torch_xla._lazy.trace import meta
    import torch_xla.core.xla_model as xm
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(128, 784, device=dev), torch.randint(0, 10, (128,), device=dev)
    xm.mark_step()
    meta._cache.clear()
    met.clear_counters()
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    xm.optimizer_step(opt, barrier=True)
    assert met.counter_value("ErrorProbe") >= 6  # the mm/addmm of 3 layers, forward and backward
    assert met.counter_value("FullSizeErrorProbe") is None


def test_an_error_is_probed_at_full_size_for_pytorchs_message(dev):
    from torch_xla._lazy.trace import meta
    meta._cache.clear()
    met.clear_counters()
    with pytest.raises(RuntimeError, match=r"\(2x3 and 2x3\)"):
        torch.ones(2, 3, device=dev) @ torch.ones(2, 3, device=dev)
    assert met.counter_value("FullSizeErrorProbe") == 1


def test_equal_numbers_of_other_types_give_their_own_dtypes(dev):
    """3 and 3.0 (True and 1) are equal as cache keys: the dtypes they give stay apart."""
    for make in (lambda d, n: torch.arange(n, device=d), lambda d, n: torch.full((2,), n, device=d)):
        for n in (3, 3.0, True, 3):
            assert make(dev, n).dtype == make("cpu", n).dtype, (make, n)


_SAME_SIGNATURE = [  # pairs of calls of one op with one signature of tensors
    lambda t, u: t.sum(0), lambda t, u: t.sum(1), lambda t, u: t.sum(dim=1, keepdim=True),
    lambda t, u: torch.cat([t, u]), lambda t, u: torch.cat([t, u], 1),
    lambda t, u: torch.add(t, u), lambda t, u: torch.add(t, u, alpha=3),
    lambda t, u: t.view(3, 2), lambda t, u: t.view(6),
    lambda t, u: t * 3, lambda t, u: t * 0.5, lambda t, u: t * True, lambda t, u: t.clamp(None, 2),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_calls_sharing_an_op_and_signature_keep_their_own_arguments(dev, dtype):
    """Calls of one op on tensors of the same shapes share what tracing derives once (template,
    output shapes and dtypes): each still gets its own static arguments, keywords and numbers."""
    a = torch.arange(6, dtype=dtype).reshape(2, 3)
    b = a * 2 + 1
    xa, xb = a.to(dev), b.to(dev)
    for _ in range(2):
        for f in _SAME_SIGNATURE:
            out, expected = f(xa, xb), f(a, b)
            assert out.dtype == expected.dtype and torch.equal(out.cpu(), expected)


def test_tracing_makes_no_reference_cycles(dev):
    """An op's intermediate objects are freed when it returns (so a value no tensor holds
    frees its buffer at once), not at the garbage collector's next run."""
    import gc
    x = torch.ones(2, 3, device=dev)

    def ops():
        y = (x.sum(dim=1, keepdim=True) * 2 + torch.cat([x, x])[:2]).relu()
        return y * torch.tensor(2.0)  # a CPU scalar tensor: the argument encoder's way
    ops()
    gc.collect()
    gc.disable()
    try:
        ops()
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_engine_ops_that_trace_their_op_reuse_its_plan(dev, monkeypatch):
    """An op the engine handles before tracing it (nll_loss's target check, indexing) asks
    meta for its outputs once per argument signature, like every other op."""
    from torch_xla._lazy.trace import dispatch
    asked, original = [], dispatch.meta_outputs

    def meta_outputs(func, *args):
        asked.append(str(func))
        return original(func, *args)
    monkeypatch.setattr(dispatch, "meta_outputs", meta_outputs)
    # sizes no other test uses: plans are cached per signature for the whole process
    x, target = torch.randn(7, 19), torch.tensor([0, 18, 2, 1, 5, 6, 3])
    idx = torch.tensor([2, 0, 6])
    for step in range(3):
        xd, td, idd = x.to(dev), target.to(dev), idx.to(dev)
        loss = torch.nn.functional.nll_loss(xd.log_softmax(1), td)
        rows = xd[idd]
        if step == 0:
            first = list(asked)
            assert "aten.nll_loss_forward.default" in first and "aten.index.Tensor" in first
    assert asked == first
    assert_same(loss, torch.nn.functional.nll_loss(x.log_softmax(1), target))
    assert_same(rows, x[idx])


@pytest.mark.parametrize("factory", [
    lambda d: torch.ones(2, device=d), lambda d: torch.empty(2, device=d),
    lambda d: torch.randn(2, device=d), lambda d: torch.arange(3, device=d),
    lambda d: torch.tensor([1.0], device=d), lambda d: torch.full((2,), 3.0, device=d)])
def test_a_factory_on_a_device_the_runtime_lacks_raises_at_its_line(dev, factory):
    """`xla:N` past the runtime's devices raises where the tensor is made, not when its
    program runs."""
    import torch_xla.runtime as xr
    missing = torch.device("xla", xr.global_runtime_device_count() + 6)
    with pytest.raises(RuntimeError, match=f"Invalid XLA device index {missing.index}: there are"):
        factory(missing)
