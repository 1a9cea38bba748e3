"""A recorded node replayed: its lowering run on jax values inside a program."""
import jax

from ..runtime import pjrt
from ..graph.ir import fill_template
from ._types import cast, is_weak


def call_lowering(op, template, inputs, scalars, avals):
    """Runs lowering `op` of a recorded node on jax values (tracers while a program is
    compiled): its outputs as a tuple, each cast to PyTorch's dtype and checked against
    PyTorch's shape (`avals`)."""
    args, kwargs = fill_template(template, inputs, scalars)
    kwargs = dict(kwargs)
    if op.rng:
        kwargs["key"] = jax.random.PRNGKey(scalars[-1])
    out = op.fn(*args, **kwargs)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    out = [o for o in out if o is not None]  # outputs the op leaves out (a backward's mask)
    result = []
    for o, (shape, dtype) in zip(out, avals):
        jdtype = pjrt.to_jax_dtype(dtype)
        if o.dtype != jdtype or is_weak(o):
            o = cast(o, jdtype)
        if tuple(o.shape) != shape and not _fits(o.shape, shape):
            raise RuntimeError(f"internal error: lowering of {op.name} gave shape {tuple(o.shape)}, "
                               f"PyTorch expects {shape}")
        result.append(o)
    return tuple(result)


def _fits(symbolic, shape) -> bool:
    """Whether a shape with symbolic dims (dims marked unbounded: `unbounded_dims`) is
    `shape` where its dims are static."""
    return len(symbolic) == len(shape) and all(
        not isinstance(d, int) or d == s for d, s in zip(symbolic, shape))
