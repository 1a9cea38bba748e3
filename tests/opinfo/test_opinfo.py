"""A fixed slice of PyTorch's OpInfo database on the XLA device: every CI_STRIDE-th entry in
float32 (forward, backward, error inputs) and a few entries in each other dtype.

Each (entry, dtype) must pass forward and backward, or fail exactly as tests/opinfo/
expected_failures.txt says (`fallback` or `fail`): a listed pair that now passes fails the
test too, so the list only shrinks. A wrong result always fails. The whole database runs
with scripts/opinfo_coverage.
"""
import os
import re
import types

import pytest
import torch

from . import catalog, harness

EXPECTED = catalog.read_expected()
SLICE = catalog.ci_slice()
ERROR_SLICE = [(eid, op) for eid, op, dtype in SLICE
               if dtype == torch.float32 and op.error_inputs_func is not None]
_FIX = "update tests/opinfo/expected_failures.txt (scripts/opinfo_coverage --write-expected)"


def _on_pinned_torch() -> bool:
    """The expected-failures file is written on CI's torch (requirements-ci.txt). On other
    releases (scripts/test-matrix) a listed pair may pass or be missing from op_db: the
    list shrinks only on CI's torch, and what fails on any release still fails the test."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "requirements-ci.txt")) as f:
        pinned = re.search(r"^torch==(\S+)", f.read(), re.M).group(1)
    return torch.__version__.split("+")[0] == pinned


ON_PINNED = _on_pinned_torch()


def _check(eid, dtype, direction, res, problems):
    status = "pass" if res is None or res["status"] in ("none", "unsupported") else res["status"]
    listed = EXPECTED.get((eid, dtype, direction))
    if status == "wrong":
        problems.append(f"{direction}: WRONG RESULT (a bug, never an expected failure): "
                        f"{res['detail']}")
    elif listed is None and status != "pass":
        problems.append(f"{direction}: {status}: {harness.summary(res)} (not expected)")
    elif listed is not None and status != listed[0] and (ON_PINNED or status != "pass"):
        now = status if status == "pass" else f"{status}: {harness.summary(res)}"
        problems.append(f"{direction}: listed as {listed[0]} ({listed[1]}), now {now}; {_FIX}")


@pytest.mark.parametrize("eid,op,dtype", SLICE,
                         ids=[f"{eid}-{catalog.dtype_name(d)}" for eid, _, d in SLICE])
def test_entry(eid, op, dtype):
    result = harness.run_entry(op, timeout=600, dtypes=[dtype], errors=False)
    name = catalog.dtype_name(dtype)
    problems = []
    for direction in ("forward", "backward"):
        _check(eid, name, direction, result["dtypes"][name][direction], problems)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("eid,op", ERROR_SLICE, ids=[eid for eid, _ in ERROR_SLICE])
def test_error_inputs(eid, op):
    from . import error_inputs
    res = error_inputs.run(op, harness.to_device)
    problems = []
    _check(eid, "-", "errors", res and dict(res, fallbacks=[]), problems)
    assert not problems, "\n".join(problems)


def test_expected_file_names_known_entries_and_dtypes():
    if not ON_PINNED:
        pytest.skip("the file names CI's torch's op_db entries; this torch's differ")
    known = {(eid, catalog.dtype_name(d)) for eid, op in catalog.entries()
             for d in catalog.entry_dtypes(op)} | {(eid, "-") for eid, _ in catalog.entries()}
    unknown = sorted({(eid, d) for eid, d, _ in EXPECTED} - known)
    assert not unknown, f"not op_db entries in a dtype the CPU supports: {unknown}"


def test_ci_slice_covers_every_dtype():
    supported = {d for _, op in catalog.entries() for d in catalog.entry_dtypes(op)}
    assert {d for _, _, d in SLICE} == supported


# ---- the harness itself -------------------------------------------------------------------

class _Op:
    def __init__(self, fn):
        self.name, self.op, self.has_nondeterministic_output = "fake", fn, False

    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)


def _sample(*tensors):
    return types.SimpleNamespace(input=tensors[0], args=tensors[1:], kwargs={},
                                 output_process_fn_grad=lambda x: x)


def test_harness_passes_a_right_op():
    x = torch.randn(3, 4, requires_grad=True)
    fwd, bwd = harness.run_sample(_Op(torch.sin), _sample(x), backward=True)
    assert (fwd["status"], bwd["status"]) == ("pass", "pass")


def test_harness_finds_wrong_values_dtypes_and_grads():
    def off_on_device(x):
        return x.sin() + (x.device.type == "xla") * 1e-3
    fwd, _ = harness.run_sample(_Op(off_on_device), _sample(torch.randn(5)), backward=False)
    assert fwd["status"] == "wrong" and "Mismatched elements" in fwd["detail"]

    def double_on_device(x):
        return x.double() if x.device.type == "xla" else x
    fwd, _ = harness.run_sample(_Op(double_on_device), _sample(torch.randn(5)), backward=False)
    assert fwd["status"] == "wrong" and "dtype" in fwd["detail"]

    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.xla = x.device.type == "xla"
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * (3 if ctx.xla else 2)
    x = torch.randn(4, requires_grad=True)
    fwd, bwd = harness.run_sample(_Op(WrongGrad.apply), _sample(x), backward=True)
    assert fwd["status"] == "pass" and bwd["status"] == "wrong", (fwd, bwd)


def test_harness_errors_and_missing_errors():
    def fails_on_device(x):
        if x.device.type == "xla":
            raise RuntimeError("boom")
        return x
    fwd, _ = harness.run_sample(_Op(fails_on_device), _sample(torch.randn(2)), backward=False)
    assert fwd["status"] == "fail" and "boom" in fwd["detail"]

    def fails_on_cpu(x):
        if x.device.type == "cpu":
            raise IndexError("out of range")
        return x
    fwd, _ = harness.run_sample(_Op(fails_on_cpu), _sample(torch.randn(2)), backward=False)
    assert fwd["status"] == "fail" and fwd["detail"].startswith("missing error")
    fwd, _ = harness.run_sample(_Op(lambda x: x[7]), _sample(torch.randn(2)), backward=False)
    assert fwd["status"] == "pass"  # both raise IndexError


def test_harness_counts_cpu_fallback():
    from torch_xla._lazy.base import counters

    def counted(x):
        if x.device.type == "xla":
            counters.count("aten::fake_op")  # what the engine's CPU fallback counts
        return x.cos()
    fwd, _ = harness.run_sample(_Op(counted), _sample(torch.randn(3)), backward=False)
    assert fwd["status"] == "fallback" and fwd["fallbacks"] == ["aten::fake_op"], fwd


def test_keyword_arguments_dropped_at_defaults_do_not_share_meta_results(dev):
    """Found by the OpInfo run (bucketize): PyTorch drops keyword arguments equal to their
    defaults, so {right: True} and {out_int32: True} must not share a cached output dtype."""
    x, b = torch.tensor(2.0, device=dev), torch.tensor([1.0, 3.0, 5.0], device=dev)
    assert torch.bucketize(x, b, right=True).dtype == torch.int64
    assert torch.bucketize(x, b, out_int32=True).dtype == torch.int32


def test_harness_tolerances_follow_the_dtype():
    """A bfloat16 result one rounding step off passes (PyTorch's bfloat16 tolerance); the same
    relative offset in float32 is a wrong result."""
    def nudged(x):
        y = x.sin()
        return y * (1 + 2 ** -8) if x.device.type == "xla" else y
    fwd, _ = harness.run_sample(_Op(nudged), _sample(torch.randn(64).bfloat16()), False,
                                torch.bfloat16)
    assert fwd["status"] == "pass", fwd
    fwd, _ = harness.run_sample(_Op(nudged), _sample(torch.randn(64)), False, torch.float32)
    assert fwd["status"] == "wrong", fwd


def test_harness_float64_arbitrates_rounding():
    """The CPU rounds to bfloat16 after each of many steps, the device once: far apart, yet
    the device is the closer to the float64 result, so it passes; off by far more, it is
    wrong."""
    def grow(x, off=0.0):
        if x.device.type == "xla":
            return (x.float() * (1.01 ** 100 * (1 + off))).to(x.dtype)
        for _ in range(100):
            x = x * 1.01
        return x
    torch.manual_seed(0)
    x = torch.rand(64).bfloat16() + 1
    fwd, _ = harness.run_sample(_Op(grow), _sample(x), False, torch.bfloat16)
    assert fwd["status"] == "pass", fwd
    fwd, _ = harness.run_sample(_Op(lambda x: grow(x, 0.3)), _sample(x), False, torch.bfloat16)
    assert fwd["status"] == "wrong", fwd


def test_harness_error_inputs_must_raise_at_the_op():
    from torch.testing._internal.opinfo.core import ErrorInput, SampleInput

    from . import error_inputs
    bad = ErrorInput(SampleInput(torch.randn(3)), error_type=ValueError, error_regex="no good")

    def raising(x):
        raise ValueError("no good at all")
    assert error_inputs.check_one(_Op(raising), bad, harness.to_device) == ("pass", "")

    def wrong_message(x):
        if x.device.type == "xla":
            raise ValueError("something else")
        raise ValueError("no good")
    status, detail = error_inputs.check_one(_Op(wrong_message), bad, harness.to_device)
    assert status == "fail" and "something else" in detail

    def silent_on_device(x):
        if x.device.type == "xla":
            return x + 1
        raise ValueError("no good")
    status, detail = error_inputs.check_one(_Op(silent_on_device), bad, harness.to_device)
    assert status == "fail" and detail.startswith("missing error")
    status, _ = error_inputs.check_one(_Op(lambda x: x), bad, harness.to_device)
    assert status == "none"  # the CPU does not raise: not counted
