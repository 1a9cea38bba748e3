"""How close the device's result must be to the CPU's, per dtype, as PyTorch's own tests judge.

The base is `torch.testing`'s default tolerance of the output's dtype (what
`TestCase.assertEqual` and `assert_close` use); an OpInfo entry's own `toleranceOverride` /
`precisionOverride` decorators for the tested dtype widen it, taken from the test classes
that compare one implementation of an op with another (TestCommon, TestConsistency,
TestInductorOpInfo, TestDecomp, the ufunc reference tests) or that apply to every test.
Integer and bool results are exact, but for uint8 resampling: PyTorch's CPU kernels
interpolate uint8 images with int16 fixed-point weights (their path depends on the machine
and the channel count), the device in float32, both rounding after each separable pass, so
a pixel may land a unit apart per pass. float16 and bfloat16 results get at least what
PyTorch's own comparison of a device with the CPU (TestCommon.test_compare_cpu) allows,
1e-3 absolute and relative: a few units in the last place of small values.

Where a floating result is outside that tolerance, a float64 run on the CPU arbitrates: the
device passes if its error against the float64 result is within twice the CPU's own error,
or within the tolerance (two implementations of the same op round differently, more so in
low precision).
"""
import torch
from torch.testing._comparison import default_tolerances
from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
from torch.testing._internal.opinfo.core import DecorateInfo
from torch.utils import _pytree as pytree

# Test classes whose tolerance overrides speak of an op's accuracy against another
# implementation of it (None: a decorator for every test of the entry).
_CLASSES = {None, "TestCommon", "TestConsistency", "TestInductorOpInfo", "TestDecomp",
            "TestUnaryUfuncs", "TestBinaryUfuncs", "TestBinaryUfuncsDevice", "TestReductions",
            "TestFFT", "TestMasked"}
# Gradients run through more ops than the forward: at least this, per dtype (float32: what
# PyTorch's own comparison of a device with the CPU, TestCommon.test_compare_cpu, allows).
_GRAD_FLOOR = {torch.float32: (1e-3, 1e-3), torch.float64: (1e-7, 1e-7),
               torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}
# Entries PyTorch gives no override whose results amplify rounding past the dtype's
# tolerance, with the reason: {name: {dtype: (rtol, atol)}}.
_AMPLIFIED = {
    # the condition number (about 60 in OpInfo's samples) multiplies the rounding of the
    # singular values it is the ratio of
    "linalg.cond": {torch.float32: (1e-5, 1e-5), torch.complex64: (1e-5, 1e-5)},
}
_RESAMPLING = {"nn.functional.interpolate", "nn.functional.upsample_bilinear",
               "_upsample_bilinear2d_aa"}  # up to two separable passes on uint8 images
_HALF_FLOOR = {torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-3, 1e-3),
               torch.complex32: (1e-3, 1e-3)}
_WIDE = {torch.float16: torch.float64, torch.bfloat16: torch.float64,
         torch.float32: torch.float64, torch.complex32: torch.complex128,
         torch.complex64: torch.complex128}


def _decorators(op):
    for d in getattr(op, "decorators", ()):
        if isinstance(d, DecorateInfo):
            if d.cls_name in _CLASSES:
                yield from d.decorators
        else:
            yield d


_OVERRIDES = {}  # id(op) -> {dtype: (rtol, atol)} (op_db's entries live as long as the process)


def _overrides(op):
    """{dtype: (rtol, atol)}: the widest of the entry's tolerance overrides."""
    if id(op) in _OVERRIDES:
        return _OVERRIDES[id(op)]
    out = _OVERRIDES[id(op)] = {}
    for d in _decorators(op):
        if isinstance(d, toleranceOverride):
            items = {k: (v.rtol, v.atol) for k, v in d.d.items()}
        elif isinstance(d, precisionOverride):
            items = {k: (0.0, v) for k, v in d.d.items()}
        else:
            continue
        for dtype, (rtol, atol) in items.items():
            old = out.get(dtype, (0.0, 0.0))
            out[dtype] = (max(old[0], rtol), max(old[1], atol))
    return out


def tolerance(op, test_dtype, out_dtype, grad=False):
    """(rtol, atol) for an output of dtype `out_dtype` of `op` tested in `test_dtype`."""
    if not (out_dtype.is_floating_point or out_dtype.is_complex):
        resampled = out_dtype == torch.uint8 and getattr(op, "name", None) in _RESAMPLING
        return 0.0, (2.0 if resampled else 0.0)
    rtol, atol = default_tolerances(torch.empty(0, dtype=out_dtype))
    floor = _HALF_FLOOR.get(out_dtype, (0.0, 0.0))
    rtol, atol = max(rtol, floor[0]), max(atol, floor[1])
    if op is not None:
        o_rtol, o_atol = _overrides(op).get(test_dtype, (0.0, 0.0))
        a_rtol, a_atol = _AMPLIFIED.get(getattr(op, "name", None), {}).get(test_dtype, (0, 0))
        o_rtol, o_atol = max(o_rtol, a_rtol), max(o_atol, a_atol)
        rtol, atol = max(rtol, o_rtol), max(atol, o_atol)
    if grad:
        g_rtol, g_atol = _GRAD_FLOOR.get(out_dtype, (rtol, atol))
        rtol, atol = max(rtol, g_rtol), max(atol, g_atol)
    return rtol, atol


def widen(tree):
    """The tree with its low-precision floating tensors in float64 (complex in complex128),
    requires_grad kept: the inputs of the arbitrating run."""
    def up(x):
        if isinstance(x, torch.Tensor) and x.dtype in _WIDE:
            return x.detach().to(_WIDE[x.dtype]).requires_grad_(x.requires_grad)
        return x
    return pytree.tree_map(up, tree)

