"""Matrix products."""
import jax.numpy as jnp

from . import aten, lower
from ._types import cast, result_type


@lower(aten.mm.default, aten.bmm.default, aten.matmul.default)
def mm(x, y):
    return jnp.matmul(x, y, preferred_element_type=x.dtype)


@lower(aten.addmm.default)
def addmm(bias, x, y, beta=1, alpha=1):
    out = jnp.matmul(x, y, preferred_element_type=x.dtype)
    dtype = out.dtype
    return cast(beta, dtype) * bias + cast(alpha, dtype) * out
