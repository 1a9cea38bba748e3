"""What the SPMD checks share (tests/distributed/_spmd_main.py runs them): the registry,
and small helpers. Reference results come from the same model on the CPU (one device's)."""
import math

import torch_xla
import torch_xla._XLAC
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.distributed.spmd as xs
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


def train_beside_the_cpu(model, opt, ref, ref_opt, batches, loss_fn, mesh, input_spec):
    """Trains `model` on the device (each input sharded over `mesh` by `input_spec`) and `ref`
    on the CPU, a step of each per (input, target) of `batches`; returns their losses and the
    compile count after each step."""
    losses, ref_losses, counts = [], [], []
    for x, y in batches:
        xx = x.to('xla')
        xs.mark_sharding(xx, mesh, input_spec)
        loss = loss_fn(model(xx), y.to('xla'))
        loss.backward()
        opt.step()
        opt.zero_grad()
        xm.mark_step()
        losses.append(loss.item())
        counts.append(compiles())
        ref_loss = loss_fn(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        ref_opt.zero_grad()
        ref_losses.append(ref_loss.item())
    return losses, ref_losses, counts


def raises(error, fn, match=""):
    try:
        fn()
    except error as e:
        assert match in str(e), (match, str(e))
        return
    raise AssertionError(f"{fn} did not raise {error.__name__}")


def main(names):
    _check_runner.main(CHECKS, names, setup=xr.use_spmd)
