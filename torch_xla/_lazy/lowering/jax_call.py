"""The node kind whose lowering is a jax function of its inputs.

A node of `JAX_CALL` has template `(callee, In(0), ..., Sc(0), ...)`: `callee.fn`, a jax
function of flat arrays (its tensor inputs, then its dynamic scalars as 0-d values) giving
a flat tuple of arrays, is traced into the step's program where the node stands, as any
other lowering is: no program of its own, no copy of its inputs. The callee is static:
equal callees make equal node keys, so a steady loop compiles once (`_lazy/trace/jax_functions`
makes them, one per function and argument signature).
"""
from . import Lowering


def _run(callee, *arrays):
    return tuple(callee.fn(*arrays))


JAX_CALL = Lowering("xla::jax_call", _run, static_scalars=False, rng=False, dynamic_shape=False)
