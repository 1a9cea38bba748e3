"""OpInfo's `error_inputs` on the XLA device: each must raise, at the op (not at a later
sync), the exception type OpInfo names with a message matching OpInfo's pattern, as
PyTorch's own `test_errors` asks of every device.

The inputs are made on the CPU and copied to the device. An input the device cannot hold
(a sparse tensor: the copy raises the device's own error naming it) is counted as
`unsupported`; one the CPU itself does not reject as OpInfo says is not counted.
"""
import re
import warnings

import torch
from torch.utils import _pytree as pytree


def _call(fn):
    """(exception or None, result)."""
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001
        return e, None


def _matches(e, error_type, pattern):
    return isinstance(e, error_type) and re.search(pattern, str(e)) is not None


def _sync(out):
    pytree.tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, out)


def _short(e):
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg[:160]}"


def check_one(op, error_input, to_device):
    """(status, detail) for one error input: 'pass', 'fail', 'unsupported', or 'none'."""
    si, error_type, pattern = error_input.sample_input, error_input.error_type, \
        error_input.error_regex
    cpu_in = (si.input, si.args, si.kwargs)
    try:
        dev_in = to_device(cpu_in)
    except Exception as e:  # noqa: BLE001
        dev_in, copy_error = None, e
    else:
        copy_error = None
    cpu_error, _ = _call(lambda: op(si.input, *si.args, **si.kwargs))
    if not _matches(cpu_error, error_type, pattern):
        return "none", "the CPU does not raise as OpInfo says"
    if copy_error is not None:
        if "XLA device" in str(copy_error):  # the device's own refusal, named
            return "unsupported", _short(copy_error)
        return "fail", f"to the device: {_short(copy_error)}"
    dev_error, out = _call(lambda: op(dev_in[0], *dev_in[1], **dev_in[2]))
    if _matches(dev_error, error_type, pattern):
        return "pass", ""
    if dev_error is not None:
        return "fail", f"expected {error_type.__name__} matching {pattern!r}, got {_short(dev_error)}"
    late, _ = _call(lambda: _sync(out))
    if _matches(late, error_type, pattern):
        return "fail", f"raised at the sync, not at the op: {error_type.__name__}"
    return "fail", f"missing error: {error_type.__name__} matching {pattern!r}"


def run(op, to_device, limit=None):
    """{'status', 'detail', 'passed', 'total', 'unsupported', 'failures'} over the entry's
    error inputs (total counts the unsupported ones too; failures: the first few details), or
    None when it has none. `limit` caps how many are run."""
    if op.error_inputs_func is None:
        return None
    passed = total = unsupported = 0
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        try:
            inputs = list(op.error_inputs("cpu"))
        except Exception as e:  # noqa: BLE001
            return {"status": "fail", "detail": f"harness: error_inputs raised {_short(e)}",
                    "passed": 0, "total": 1, "unsupported": 0}
        for i, ei in enumerate(inputs):
            if limit is not None and i >= limit:
                break
            try:
                status, detail = check_one(op, ei, to_device)
            except Exception as e:  # noqa: BLE001
                status, detail = "fail", f"harness: {_short(e)}"
            if status == "none":
                continue
            total += 1
            passed += status == "pass"
            unsupported += status == "unsupported"
            if status == "fail":
                failures.append(detail)
    if not total:
        return None
    failed = total - passed - unsupported
    status = "fail" if failed else ("pass" if passed else "unsupported")
    return {"status": status, "detail": failures[0] if failures else "", "passed": passed,
            "total": total, "unsupported": unsupported, "failures": failures[:8]}
