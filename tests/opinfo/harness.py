"""Runs one OpInfo entry on the CPU and on the XLA device and compares the results.

For each dtype the CPU supports for the entry, the first few `op.sample_inputs` run on CPU
tensors and on device copies of them (requires_grad kept). Forward: values (within the
dtype's tolerance, tests/opinfo/tolerances.py; exact for integers and bools), dtypes,
shapes and devices must match; random ops compare dtypes and shapes only. When the CPU
raises, the device must raise the same exception type. Backward (float32, float64 and
bfloat16, where the entry supports autograd in them): a fixed random cotangent for each
floating output that requires grad, then `torch.autograd.grad` with respect to the floating
inputs that require grad, on both sides. Float results outside the tolerance are
arbitrated by a float64 run on the CPU. OpInfo's `error_inputs` run once per entry
(tests/opinfo/error_inputs.py).

A sample ends as `pass`, `fallback` (right, but some op ran on the CPU: tests/compare.py's
`fallbacks`), `fail` (an error, or no error where the CPU raised), `wrong` (a different result
without an error: a bug) or `none` (nothing to compare, e.g. no differentiable output). An
(entry, dtype)'s status in a direction is the worst of its samples'.
"""
import os
import signal
import warnings

os.environ.setdefault("CPU_NUM_DEVICES", "1")

import torch
from torch.utils import _pytree as pytree

import torch_xla  # noqa: F401
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

from ..compare import close_to_reference, fallbacks as fallback_names, misplaced
from . import error_inputs
from .catalog import backward_dtypes, dtype_name, entry_dtypes, is_random
from .tolerances import tolerance, widen

SAMPLES = 3, 2  # samples per dtype: float32, every other dtype
_RANK = {"none": 0, "pass": 1, "fallback": 2, "fail": 3, "wrong": 4}


class Mismatch(AssertionError):
    pass


class EntryTimeout(Exception):
    pass


def _device():
    return xm.xla_device()


def _to_device(tree, dev):
    copies = {}  # id(CPU tensor) -> (it, its device copy): what the CPU shares stays shared

    def copy(x):
        if id(x) not in copies:
            copies[id(x)] = (x, x.detach().to(dev).requires_grad_(x.requires_grad))
        return copies[id(x)][1]

    def move(x):
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":  # (meta ones stay meta)
            if id(x) in copies:  # the same tensor twice (an out= argument that is an input)
                return copies[id(x)][1]
            base = x._base
            if base is not None and not base.requires_grad and \
                    (x.is_conj(), x.is_neg()) == (base.is_conj(), base.is_neg()):
                # a view of a larger storage (as_strided's partial views see it; views of
                # one base overlap as on the CPU): the same view of the device copy of the
                # base (a conjugate or negative view is copied with its values resolved)
                y = copy(base).as_strided(x.shape, x.stride(), x.storage_offset())
                copies[id(x)] = (x, y.requires_grad_(x.requires_grad))
                return y
            return copy(x)
        if isinstance(x, torch.device) and x.type == "cpu":
            return dev
        if isinstance(x, str) and x == "cpu":
            return dev
        return x
    return pytree.tree_map(move, tree)


def to_device(tree):
    """Device copies of a sample's tensors (and 'cpu' device arguments made the device's)."""
    return _to_device(tree, _device())


def _grad_inputs(tree):
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor) and x.requires_grad]


class Loose:
    """An output the CPU and the device may legitimately choose differently: `how` is
    "shape" (indices among tied values) or "sign-columns" (eigenvectors, each column up to
    its sign or complex phase)."""
    def __init__(self, t, how):
        self.t, self.how = t, how


def _sign_columns(v):
    """Each column divided by the phase (the sign, if real) of its largest element."""
    if v.shape[-2] == 0:
        return v
    idx = v.abs().argmax(dim=-2, keepdim=True)
    return v * torch.sgn(v.gather(-2, idx)).conj()


def _tolerances(op, dtype, grad=False):
    """tol(out_dtype) -> (rtol, atol) for `op` tested in `dtype` (None: Python numbers,
    judged as the tested dtype)."""
    return lambda out_dtype: tolerance(op, dtype, out_dtype or dtype, grad)


_FLOAT32 = _tolerances(None, torch.float32)


def compare(actual, expected, values=True, tol=_FLOAT32, path="out", ref=None):
    """Raises Mismatch where `actual` (from the device) differs from `expected` (CPU).
    `ref`, the same outputs computed in float64 on the CPU, arbitrates float mismatches."""
    if isinstance(expected, Loose):
        if expected.how == "shape":
            compare(actual, expected.t, False, tol, path)
        elif isinstance(actual, torch.Tensor):  # sign-columns: all three normalised
            compare(_sign_columns(actual), _sign_columns(expected.t), values, tol, path,
                    None if ref is None else _sign_columns(ref))
        else:
            compare(actual, expected.t, values, tol, path)
        return
    if isinstance(expected, torch.Tensor):
        why = misplaced(actual, expected, path)
        if why:
            raise Mismatch(why)
        if values:
            a, e = actual.detach().cpu(), expected.detach()
            rtol, atol = tol(e.dtype)
            try:
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True,
                                           check_device=False)
            except AssertionError as err:
                if isinstance(ref, torch.Tensor) and ref.shape == e.shape and \
                        (e.is_floating_point() or e.is_complex()) and \
                        close_to_reference(a, e, ref, rtol, atol):
                    return
                lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
                raise Mismatch(f"{path}: " + "; ".join(lines[:4])) from None
    elif isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{path}: {type(actual).__name__} of "
                           f"{len(actual) if isinstance(actual, (list, tuple)) else '?'}, "
                           f"expected {type(expected).__name__} of {len(expected)}")
        refs = ref if isinstance(ref, (list, tuple)) and len(ref) == len(expected) else \
            [None] * len(expected)
        for i, (a, e, r) in enumerate(zip(actual, expected, refs)):
            compare(a, e, values, tol, f"{path}[{i}]", r)
    elif isinstance(expected, dict):
        if not isinstance(actual, dict) or actual.keys() != expected.keys():
            raise Mismatch(f"{path}: dict keys differ")
        for k in expected:
            compare(actual[k], expected[k], values, tol, f"{path}[{k!r}]")
    elif isinstance(expected, float) and values:
        rtol, atol = tol(None)
        if not isinstance(actual, float) or not (
                actual == expected or abs(actual - expected) <= atol + rtol * abs(expected)
                or (actual != actual and expected != expected)):
            raise Mismatch(f"{path}: {actual!r}, expected {expected!r}")
    elif values or not isinstance(expected, (int, bool, complex)):
        if type(actual) is not type(expected) or actual != expected:
            raise Mismatch(f"{path}: {actual!r}, expected {expected!r}")


def _short(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg[:200]}"


def _fallbacks():
    return sorted(fallback_names())


def _result(status, detail="", fallbacks=()):
    return {"status": status, "detail": detail, "fallbacks": list(fallbacks)}


def _differentiable(out):
    return [o for o in pytree.tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad
            and (o.is_floating_point() or o.is_complex())]


def _cotangents(outs):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(o.shape, dtype=o.dtype, generator=g) for o in outs]


def _float64_grads(op, sample, pristine, cts):
    """Gradients of the sample computed in float64 on the CPU, or None."""
    try:
        inp, args, kwargs = _fresh(pristine)
        outs = _differentiable(sample.output_process_fn_grad(op(inp, *args, **kwargs)))
        if len(outs) != len(cts):
            return None
        return torch.autograd.grad(outs, _grad_inputs((inp, args, kwargs)),
                                   [c.to(o.dtype) for c, o in zip(cts, outs)], allow_unused=True)
    except Exception:  # noqa: BLE001
        return None


def _backward(op, sample, cpu_out, dev_out, cpu_in, dev_in, random, pristine, tol):
    """Compares gradients of one sample; cpu_out/dev_out are the processed outputs."""
    outs = _differentiable(cpu_out)
    ins = _grad_inputs(cpu_in)
    if not outs or not ins:
        return _result("none")
    cts = _cotangents(outs)
    try:
        expected = torch.autograd.grad(outs, ins, cts, allow_unused=True)
        cpu_error = None
    except Exception as e:  # noqa: BLE001  (any error the CPU raises, the device must raise)
        cpu_error = e
    dev = _device()
    met.clear_counters()
    try:
        douts = _differentiable(dev_out)
        dins = _grad_inputs(dev_in)
        if len(douts) != len(outs) or len(dins) != len(ins):
            return _result("wrong", f"{len(douts)} differentiable outputs / {len(dins)} inputs "
                           f"on the device, {len(outs)} / {len(ins)} on the CPU")
        actual = torch.autograd.grad(douts, dins, [c.to(dev) for c in cts], allow_unused=True)
        [a.cpu() for a in actual if a is not None]  # runs the graph here, errors included
    except EntryTimeout:
        raise
    except Exception as e:  # noqa: BLE001
        if cpu_error is not None and type(e) is type(cpu_error):
            return _result("pass", fallbacks=_fallbacks())
        return _result("fail", _short(e), _fallbacks())
    fallbacks = _fallbacks()
    if cpu_error is not None:
        return _result("fail", f"missing error: the CPU raised {_short(cpu_error)}", fallbacks)
    try:
        for i, (a, e) in enumerate(zip(actual, expected)):
            if (a is None) != (e is None):
                raise Mismatch(f"grad[{i}]: {'None' if a is None else 'a tensor'} on the device, "
                               f"{'None' if e is None else 'a tensor'} on the CPU")
        try:
            compare(actual, expected, not random, tol, "grad")
        except Mismatch:
            ref = None if random else _float64_grads(op, sample, pristine, cts)
            if ref is None:
                raise
            compare(actual, expected, True, tol, "grad", list(ref))
    except Mismatch as m:
        return _result("wrong", str(m), fallbacks)
    return _result("fallback" if fallbacks else "pass", fallbacks=fallbacks)


# Index outputs that may point at any of several tied values (position of the output, or
# None for the output itself), unless the sample asks for a stable sort.
_TIE_INDICES = {"sort": 1, "topk": 1, "kthvalue": 1, "mode": 1, "median": 1, "nanmedian": 1,
                "max": 1, "min": 1, "cummax": 1, "cummin": 1, "argsort": None}
_SIGN_COLUMNS = {"linalg.eigh": 1, "linalg.eig": 1}  # eigenvectors: up to sign or phase
# Ops whose gradients flow to whichever of tied values they pick (values only, no indices)
_PICKS_VALUES = {"msort"}
# Ops whose tensor arguments after the input must be CPU tensors (PyTorch requires it)
_CPU_ARGS = {"tensor_split"}


def _picks_among_ties(op, sample):
    """Whether the op's index outputs (and so its gradients) may pick any of tied values."""
    return ((op.name in _TIE_INDICES or op.name in _PICKS_VALUES)
            and isinstance(sample.input, torch.Tensor)
            and not sample.kwargs.get("stable")
            and torch.unique(sample.input.detach()).numel() < sample.input.numel())


def _loosen(op, sample, out):
    """The CPU outputs with the parts the device may choose differently marked Loose."""
    if _picks_among_ties(op, sample) and op.name in _TIE_INDICES:
        pos = _TIE_INDICES[op.name]
        if pos is None:
            return Loose(out, "shape")
        if isinstance(out, tuple) and len(out) > pos:
            return tuple(Loose(o, "shape") if i == pos else o for i, o in enumerate(out))
    if op.name in _SIGN_COLUMNS and isinstance(out, tuple):
        pos = _SIGN_COLUMNS[op.name]
        return tuple(Loose(o, "sign-columns") if i == pos else o for i, o in enumerate(out))
    return out


def _fresh(tree):
    """New copies of the floating tensors of a tree (requires_grad kept)."""
    def copy(x):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            return x.detach().clone().requires_grad_(x.requires_grad)
        return x
    return pytree.tree_map(copy, tree)


def _float64_forward(op, pristine):
    """The op's outputs on float64 copies of the CPU inputs, or None if it cannot run so."""
    try:
        with torch.no_grad():
            inp, args, kwargs = _fresh(pristine)
            return op(inp, *args, **kwargs)
    except Exception:  # noqa: BLE001
        return None


# Ops whose result is defined by the input's strides and storage offset: where a sample's
# input is a view whose layout the device hides, the two runs do not get the same input.
_LAYOUT_OPS = {"as_strided", "as_strided_scatter"}


def _layouts_differ(cpu, dev):
    return (isinstance(cpu, torch.Tensor) and isinstance(dev, torch.Tensor)
            and (cpu.stride() != dev.stride() or cpu.storage_offset() != dev.storage_offset()))


def run_sample(op, sample, backward, dtype=torch.float32):
    """(forward result, backward result or None) for one sample of `dtype`."""
    random = is_random(op)
    dev = _device()
    cpu_in = (sample.input, sample.args, sample.kwargs)
    try:  # before the CPU run: in-place ops change their inputs
        dev_in, transfer_error = _to_device(cpu_in, dev), None
        if op.name in _CPU_ARGS:
            dev_in = (dev_in[0], sample.args, dev_in[2])
    except Exception as e:  # noqa: BLE001  (e.g. sparse tensors, which XLA does not have)
        dev_in, transfer_error = None, e
    pristine = widen(cpu_in)  # float64 copies, for a reference when results differ
    if transfer_error is None and op.name in _LAYOUT_OPS and _layouts_differ(cpu_in[0], dev_in[0]):
        layout = _result("fail", "layout: the input is a view with a storage offset or strides "
                                 "on the CPU, and XLA tensors look contiguous (seed 4.3)")
        return layout, (layout if backward else None)
    try:
        expected = op(sample.input, *sample.args, **sample.kwargs)
        cpu_error = None
    except Exception as e:  # noqa: BLE001
        expected, cpu_error = None, e
    no_backward = _result("fail", "forward failed") if backward else None
    if transfer_error is not None:
        return _result("fail", f"to the device: {_short(transfer_error)}"), no_backward
    met.clear_counters()
    try:
        actual = op(dev_in[0], *dev_in[1], **dev_in[2])
        # transfers run the graph: errors of the compiled program belong to the forward
        pytree.tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, actual)
    except EntryTimeout:
        raise
    except Exception as e:  # noqa: BLE001
        if cpu_error is not None and type(e) is type(cpu_error):
            return _result("pass", fallbacks=_fallbacks()), None
        return _result("fail", _short(e), _fallbacks()), no_backward
    fallbacks = _fallbacks()
    if cpu_error is not None:
        return _result("fail", f"missing error: the CPU raised {_short(cpu_error)}", fallbacks), None
    loose = _loosen(op, sample, expected)
    tol = _tolerances(op, dtype)
    try:
        try:
            compare(actual, loose, not random, tol)
        except Mismatch:
            ref = _float64_forward(op, pristine)
            if ref is None:
                raise
            compare(actual, loose, not random, tol, ref=ref)
        fwd = _result("fallback" if fallbacks else "pass", fallbacks=fallbacks)
    except Mismatch as m:
        fwd = _result("wrong", str(m), fallbacks)
    if not backward:
        return fwd, None
    try:
        process = sample.output_process_fn_grad
        # gradients of a pick among ties flow to whichever value was picked
        bwd = _backward(op, sample, process(expected), process(actual), cpu_in, dev_in,
                        random or _picks_among_ties(op, sample), pristine,
                        _tolerances(op, dtype, grad=True))
    except EntryTimeout:
        raise
    except Exception as e:  # noqa: BLE001  (e.g. output_process_fn_grad failing on the device)
        bwd = _result("fail", _short(e), _fallbacks())
    return fwd, bwd


def _merge(results):
    """The worst of several sample results; fallbacks and the first detail of that status."""
    results = [r for r in results if r is not None]
    if not results:
        return None
    worst = max(results, key=lambda r: _RANK[r["status"]])
    fallbacks = sorted({f for r in results for f in r["fallbacks"]})
    return _result(worst["status"], worst["detail"], fallbacks)


def _alarm(signum, frame):
    raise EntryTimeout("timed out")


def _run_dtype(op, dtype, grad, samples):
    """(forward, backward or None) of the entry in one dtype."""
    torch.manual_seed(0)  # sample values come from the global generator
    try:
        inputs = list(_first(op.sample_inputs("cpu", dtype, requires_grad=grad), samples))
    except EntryTimeout:
        raise
    except Exception as e:  # noqa: BLE001
        fail = _result("fail", f"harness: sample_inputs raised {_short(e)}")
        return fail, (fail if grad else None)
    fwd, bwd = [], []
    for sample in inputs:
        try:
            f, b = run_sample(op, sample, grad, dtype)
        except EntryTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            f = _result("fail", f"harness: {_short(e)}")
            b = f if grad else None
        fwd.append(f)
        bwd.append(b)
    backward = _merge(bwd) if grad else None
    if backward is not None and backward["status"] == "none":
        backward = None
    return _merge(fwd) or _result("none"), backward


def _timed(fn, timeout, on_timeout):
    """fn(), or on_timeout() if it runs past `timeout` seconds (main thread only)."""
    if not timeout:
        return fn()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(timeout))
    try:
        return fn()
    except EntryTimeout:
        return on_timeout()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_entry(op, timeout=None, dtypes=None, samples=None, errors=True):
    """{'dtypes': {name: {'forward': result, 'backward': result or None}}, 'errors': the
    error inputs' result or None} for one entry, in `dtypes` (default: all the CPU supports)
    with `samples` samples each (default SAMPLES). timeout (seconds per dtype and for the
    error inputs, main thread only) ends a dtype with a `fail` (timeout)."""
    dtypes = entry_dtypes(op) if dtypes is None else dtypes
    grads = backward_dtypes(op)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype in dtypes:
            grad = dtype in grads
            n = samples or SAMPLES[dtype != torch.float32]
            fwd, bwd = _timed(lambda: _run_dtype(op, dtype, grad, n), timeout, lambda: (
                _result("fail", "timeout"), _result("fail", "timeout") if grad else None))
            out[dtype_name(dtype)] = {"forward": fwd, "backward": bwd}
    errs = None
    if errors:
        errs = _timed(lambda: error_inputs.run(op, to_device), timeout, lambda: {
            "status": "fail", "detail": "timeout", "passed": 0, "total": 1, "unsupported": 0,
            "failures": ["timeout"]})
    return {"dtypes": out, "errors": errs}


def _first(gen, n):
    for i, x in enumerate(gen):
        if i >= n:
            return
        yield x


def category(result) -> str:
    """A first guess at the reason category of a failing result (the file keeps edits)."""
    detail = result["detail"]
    if result["status"] == "fallback" or "has no XLA lowering" in detail:
        return "not-lowered"
    if "raised at the sync" in detail or "out of bounds" in detail or "out of range" in detail:
        return "value-check"  # a check of values that live on the device until a sync
    if detail.startswith("missing error"):
        return "missing-error"
    if detail == "timeout":
        return "timeout"
    if "sparse" in detail.lower() or "not supported on XLA devices" in detail \
            or "seed 4.3" in detail:
        return "xla-limitation"
    if detail.startswith("harness"):
        return "harness"
    return "engine-bug"


def summary(result) -> str:
    if result["status"] == "fallback":
        return "ran on the CPU: " + " ".join(result["fallbacks"])
    return result["detail"]
