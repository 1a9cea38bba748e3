"""Ops that training particular layers needs and no other family covers.

`_trilinear` is nn.Bilinear's product (PyTorch has no decomposition for it; its backward is
`_trilinear` again, with other dimensions expanded and summed). `rrelu_with_noise` is
nn.RReLU (functionalization hands us its functional form; its backward decomposes).
`OPTIMIZATION_BARRIER` is no ATen op: `xm.optimization_barrier_` records it (gradient
checkpointing keeps XLA from merging the recomputation with the forward through it).
"""
import string

import jax
import jax.numpy as jnp

from . import Lowering, aten, lower
from ._types import opmath
from .linalg import matmul_precision


@lower(aten._trilinear.default)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """sum over `sumdim` of i1 * i2 * i3, each input first given size-1 dimensions at its
    `expand` positions: one einsum over the dimensions each input really has."""
    ndim = i1.ndim + len(expand1)
    letters = string.ascii_letters[:ndim]

    def subscript(expand):
        return "".join(letters[d] for d in range(ndim) if d not in expand)

    inputs = [(x, subscript(e)) for x, e in ((i1, expand1), (i2, expand2), (i3, expand3))]
    present = set("".join(s for _, s in inputs))
    out = "".join(letters[d] for d in range(ndim) if d not in sumdim and letters[d] in present)
    result = jnp.einsum(",".join(s for _, s in inputs) + "->" + out, *(x for x, _ in inputs),
                        precision=matmul_precision(), preferred_element_type=opmath(i1.dtype))
    # A kept dimension that every input expands has size 0 in PyTorch's result (its sizes
    # come from the inputs that have the dimension): the result is then empty.
    missing = [i for i, d in enumerate(d for d in range(ndim) if d not in sumdim)
               if letters[d] not in present]
    if missing:
        shape = list(result.shape)
        for i in missing:
            shape.insert(i, 0)
        return jnp.zeros(shape, result.dtype)
    return result


@lower(aten.rrelu_with_noise_functional.default, rng=True)
def rrelu_with_noise(x, noise, lower=0.125, upper=1 / 3, training=False, generator=None, *, key):
    """In training each non-positive input is scaled by a slope drawn from U(lower, upper),
    and `noise` records the factor (1 elsewhere) for the backward; in eval the slope is
    their mean, as leaky_relu, and `noise` is unchanged."""
    if not training:
        return jnp.where(x > 0, x, x * ((lower + upper) / 2)), noise
    slopes = jax.random.uniform(key, x.shape, x.dtype) * (upper - lower) + lower
    negative = x <= 0
    return jnp.where(negative, x * slopes, x), jnp.where(negative, slopes, jnp.ones((), x.dtype))


def _optimization_barrier(*xs):
    return jax.lax.optimization_barrier(tuple(xs))


OPTIMIZATION_BARRIER = Lowering("xla::optimization_barrier", _optimization_barrier,
                                static_scalars=True, rng=False, dynamic_shape=False)
