"""Running one function on the CPU and on the XLA device, and comparing the two.

`assert_same` is the one comparison of a device result with the CPU's: the device's tensors
live on the XLA device (on the expected ones' device where those are not CPU tensors, on
`device` where the test names it: "cpu" for values the device computed and the test brought
back, such as losses, checkpoints and state dicts), dtypes and shapes are equal, floating
values agree within a tolerance (NaNs in the same places), integer and bool values exactly;
lists, tuples and dicts (state dicts included) element by element, None where the CPU has
None. `ALLCLOSE` is `torch.allclose`'s tolerance and `EXACT` none at all. Given a float64
run of the same on the CPU (`reference`), floating values outside the tolerance pass where
the device is about as accurate as the CPU (`close_to_reference`). `misplaced` is its rule
for a tensor's device, dtype and shape; tests/opinfo/harness.py (with its own tolerances)
shares it and the float64 arbitration.

`fallbacks` is the one rule for what ran on the CPU: the engine counts each op it runs
through the CPU fallback as a metrics counter named after the op's schema (`aten::NAME`,
`prims::NAME`, ...), so every counter with a `namespace::name` name other than `xla::`
is a fallback; `xla::NAME` counts every op the engine was given, and the engine's own
counters (`UncachedCompile`, `TransferToDevice`, ...) have no `::`. A value read on the host
(`aten::_local_scalar_dense`, counted among the fallbacks as torch_xla counts it) runs no op
on the CPU, and is not one.
"""
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

RTOL, ATOL = 1.3e-6, 1e-5  # torch.testing's float32 tolerance; tests of other dtypes pass theirs
ALLCLOSE = dict(rtol=1e-5, atol=1e-8)  # torch.allclose's
EXACT = dict(rtol=0, atol=0)  # torch.equal's, with assert_same's checks of device, dtype and shape


def to_xla(obj, device=None):
    """Copies every tensor in a nested structure to the XLA device, keeping requires_grad."""
    device = device or xm.xla_device()
    if isinstance(obj, torch.Tensor):
        out = obj.detach().to(device)
        return out.requires_grad_(obj.requires_grad)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_xla(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_xla(v, device) for k, v in obj.items()}
    return obj


def tensors(obj):
    """The tensors of a nested structure of lists, tuples and dicts, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in tensors(o)]
    return []


def compiles():
    return met.counter_value("UncachedCompile") or 0


def fallbacks():
    """Names of the ops that ran through the CPU fallback since the counters were cleared."""
    return {n for n in met.counter_names()
            if "::" in n and not n.startswith("xla::") and n != "aten::_local_scalar_dense"}


def assert_lowered():
    """No op ran through the CPU fallback since the counters were cleared."""
    ran = fallbacks()
    assert not ran, f"ran on the CPU: {sorted(ran)}"


def misplaced(actual, expected, path="out", device=None):
    """Why `actual` cannot be the device's result for the tensor `expected`: not a tensor, on
    another device, of another dtype or shape (see the module docstring); None if it can."""
    if not isinstance(actual, torch.Tensor):
        return f"{path}: {type(actual).__name__}, not a tensor"
    where = device or ("xla" if expected.device.type == "cpu" else expected.device.type)
    if actual.device.type != where:
        return f"{path}: on {actual.device}, expected on {where}"
    if actual.dtype != expected.dtype:
        return f"{path}: dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"{path}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    return None


def close_to_reference(a, e, ref, rtol, atol):
    """Whether the device's result `a` is about as accurate as the CPU's `e`, measured against
    the float64 result `ref`: its largest error (relative to each element's magnitude, floored
    at atol) is within twice the CPU's, or within rtol. Two implementations of one computation
    round differently, more so in low precision."""
    a, e, ref = a.to(ref.dtype), e.to(ref.dtype), ref.detach()
    scale = ref.abs() + atol
    both_nan = a.isnan() & e.isnan()
    dev_err = torch.where(both_nan, 0, (a - ref).abs() / scale).nan_to_num(float("inf"))
    cpu_err = torch.where(both_nan, 0, (e - ref).abs() / scale).nan_to_num(float("inf"))
    if dev_err.numel() == 0:
        return True
    return bool(dev_err.max() <= max(2 * cpu_err.max(), rtol))


def assert_same(actual, expected, rtol=RTOL, atol=ATOL, path="out", device=None, reference=None):
    """`actual` (from the device) is `expected` (from the CPU); see the module docstring.
    `reference`, the same computed in float64 on the CPU, arbitrates floating values outside
    the tolerance (`close_to_reference`)."""
    if isinstance(expected, torch.Tensor):
        why = misplaced(actual, expected, path, device)
        assert why is None, why
        actual, expected = actual.detach().cpu(), expected.detach().cpu()
        exact = not (expected.is_floating_point() or expected.is_complex())
        if not exact and reference is not None and close_to_reference(actual, expected, reference, rtol, atol):
            return
        torch.testing.assert_close(actual, expected, rtol=0 if exact else rtol, atol=0 if exact else atol,
                                   equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), \
            f"{path}: {actual!r}, expected {len(expected)} items"
        refs = [None] * len(expected) if reference is None else reference
        for i, (a, e, r) in enumerate(zip(actual, expected, refs)):
            assert_same(a, e, rtol, atol, f"{path}[{i}]", device, r)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), \
            f"{path}: keys {list(actual) if isinstance(actual, dict) else actual!r}, expected {list(expected)}"
        for k in expected:
            assert_same(actual[k], expected[k], rtol, atol, f"{path}[{k!r}]", device,
                        None if reference is None else reference[k])
    else:
        assert actual == expected, f"{path}: {actual!r}, expected {expected!r}"


def with_grads(fn):
    """fn, returning (its outputs, the gradients of its outputs): every floating output that
    requires grad, weighted by a fixed random cotangent, with respect to every tensor
    argument that requires grad (None where an argument does not reach the outputs)."""
    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        outs = [o for o in tensors(out) if o.requires_grad and (o.is_floating_point() or o.is_complex())]
        inputs = [t for t in tensors((args, kwargs)) if t.requires_grad]
        assert outs and inputs, "nothing to differentiate"
        g = torch.Generator().manual_seed(0)
        cotangents = [torch.randn(o.shape, dtype=o.dtype, generator=g).to(o.device) for o in outs]
        return out, torch.autograd.grad(outs, inputs, cotangents, allow_unused=True)
    return run


def check(fn, *args, grads=False, rtol=RTOL, atol=ATOL, **kwargs):
    """Runs fn on CPU tensors and on device copies of them (requires_grad kept) and asserts
    the same results; with grads, the same gradients too (`with_grads`). Returns the
    device's results."""
    if grads:
        fn = with_grads(fn)
    expected = fn(*args, **kwargs)
    actual = fn(*to_xla(args), **to_xla(kwargs))
    xm.mark_step()  # one program for all outputs
    assert_same(actual, expected, rtol, atol)
    return actual


def check_lowered(fn, *args, **kwargs):
    """`check`, and no op of fn fell back to the CPU while it ran on the device."""
    met.clear_counters()
    out = check(fn, *args, **kwargs)
    assert_lowered()
    return out
