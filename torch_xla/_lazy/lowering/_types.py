"""PyTorch's type promotion on jax values, for lowerings that combine several inputs.

Dynamic Python scalars reach lowerings as weakly typed 0-d values; they take part in
promotion as PyTorch's "wrapped numbers" do: only their category (bool < int < float <
complex) counts. 0-d tensors count below tensors with dimensions of the same category.
"""
import jax.numpy as jnp
import numpy as np
from jax import lax


_BOOL, _INT, _FLOAT, _COMPLEX = range(4)


def _category(dtype) -> int:
    if dtype == np.bool_:
        return _BOOL
    if jnp.issubdtype(dtype, jnp.complexfloating):
        return _COMPLEX
    if jnp.issubdtype(dtype, jnp.floating):
        return _FLOAT
    return _INT


_DEFAULT = {_BOOL: np.dtype(bool), _INT: np.dtype("int64"), _FLOAT: np.dtype("float32"),
            _COMPLEX: np.dtype("complex64")}


def _promote(a, b):
    return np.dtype(jnp.promote_types(a, b))


def result_type(*args):
    """torch.result_type over jax arrays and Python (or weakly typed) scalars."""
    dims, zero_dims, scalars = None, None, None
    for a in args:
        if a is None:
            continue
        if isinstance(a, (bool, int, float, complex)):
            dt = np.dtype(bool) if isinstance(a, bool) else np.result_type(type(a))
            scalars = dt if scalars is None else _promote(scalars, dt)
            continue
        dt = np.dtype(a.dtype)
        if is_weak(a):
            scalars = dt if scalars is None else _promote(scalars, dt)
        elif a.ndim == 0:
            zero_dims = dt if zero_dims is None else _promote(zero_dims, dt)
        else:
            dims = dt if dims is None else _promote(dims, dt)
    result = None
    # (numpy dtypes are interned: the levels are told apart by position, not identity)
    for is_scalar, level in ((False, dims), (False, zero_dims), (True, scalars)):
        if level is None:
            continue
        if result is None:
            result = _DEFAULT[_category(level)] if is_scalar else level
        elif _category(level) > _category(result):
            result = _scalar_upgrade(result, _category(level)) if is_scalar else level
    return result


def _scalar_upgrade(result, category):
    if category == _COMPLEX:
        return np.dtype("complex128") if result == np.float64 else np.dtype("complex64")
    return _DEFAULT[category]


def cast(x, dtype):
    """x as `dtype`; Python scalars and weak values become arrays of that dtype."""
    if isinstance(x, (bool, int, float, complex)):
        return jnp.asarray(x, dtype=dtype)
    if x.dtype == dtype and not is_weak(x):
        return x
    if np.dtype(x.dtype).kind == "c":  # jnp's complex casts (to bool: x != 0)
        return x.astype(dtype)
    # lax's conversion, not jnp's `astype`: in a program's trace, a lowering's casts are
    # most of its calls, and `astype` checks and canonicalizes before it converts.
    return lax.convert_element_type(x, dtype)


def promote(*args):
    """Casts every argument to their common PyTorch result type."""
    dtype = result_type(*args)
    return tuple(None if a is None else cast(a, dtype) for a in args)


def is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.inexact)


def float_of(dtype):
    """The dtype PyTorch computes a float op in for inputs of `dtype` (ints -> float32)."""
    return np.dtype(dtype) if is_float(dtype) else np.dtype("float32")


_HALF = (np.dtype("float16"), np.dtype(jnp.bfloat16))


def opmath(dtype):
    """PyTorch's "opmath" type: the dtype its CPU kernels compute `dtype` in, float32 for
    float16 and bfloat16 (the engine rounds results back to the op's dtype)."""
    dtype = np.dtype(dtype)
    return np.dtype("float32") if dtype in _HALF else dtype


def float_opmath(dtype):
    """The opmath type of a float op on inputs of `dtype`: ints and bools compute in float32."""
    return opmath(float_of(dtype))


def is_weak(x) -> bool:
    """Whether a jax value is weakly typed (a Python scalar that became a parameter)."""
    aval = getattr(x, "aval", None)
    return bool(getattr(aval, "weak_type", False)) if aval is not None else bool(getattr(x, "weak_type", False))
