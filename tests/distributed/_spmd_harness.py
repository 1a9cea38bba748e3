"""What the SPMD checks share (tests/distributed/_spmd_main.py runs them): the registry,
and small helpers. Reference results come from the same model on the CPU (one device's)."""
import math

import torch_xla
import torch_xla._XLAC
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

from . import _check_runner

N = 8
CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def spec(t):
    return torch_xla._XLAC._get_xla_sharding_spec(t)


def compiles():
    return met.counter_value("UncachedCompile") or 0


def close(a, b, rtol=1e-5):
    assert math.isclose(a, b, rel_tol=rtol, abs_tol=1e-7), (a, b)


def raises(error, fn, match=""):
    try:
        fn()
    except error as e:
        assert match in str(e), (match, str(e))
        return
    raise AssertionError(f"{fn} did not raise {error.__name__}")


def main(names):
    _check_runner.main(CHECKS, names, setup=xr.use_spmd)
