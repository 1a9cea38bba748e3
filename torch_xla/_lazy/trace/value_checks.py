"""Checks of values that PyTorch makes on the CPU: indices out of range (advanced indexing,
gathers and scatters, `index_select` and the `index_*` ops, `take`/`put`, `embedding`,
`nll_loss`'s targets), integer division by zero, and values outside what an op is defined
on (`binary_cross_entropy`'s input, `bernoulli`'s probabilities, `poisson`'s rates).

The values are on the device until a program computes them, so the check cannot be made
at the op. It is one more node of the graph: a reduction of the indices (or the divisor)
to int64[2], (the flat position of the first bad value in row-major order, that value),
deferred with `deferred_checks.defer_check`: an output of the next program that runs on its
device (at `mark_step`, or a host read before it), read by the host once that program ran,
which raises PyTorch's error and names the op and the user's line that called it. A
divisor that is a Python number or a CPU scalar is checked at the op.
`XLA_VALUE_CHECKS=0` turns the deferred checks off (`ENABLED`). A compiled program (torch.compile,
StableHLO) has no host to raise and has none of these checks.
"""
import math
import os

import jax.numpy as jnp
from jax import lax
import numpy as np
import torch

from . import eager
from ..base import user_code
from .dispatch import engine_op, trace
from ..step.deferred_checks import defer_check
from ..graph.ir import In, Node, Value
from ..lowering import REGISTRY, Lowering
from ..graph.tensor import BoundedXLATensor, XLATensor

aten = torch.ops.aten
_FLAG_AVAL = ((2,), torch.int64)
_NONE = np.iinfo(np.int64).max  # the position of the first bad value when there is none


# XLA_VALUE_CHECKS=0 (read at import): no deferred checks (see the module docstring)
ENABLED = os.environ.get("XLA_VALUE_CHECKS", "1") != "0"


def deferred_error(error, op_name, location):
    """`error` (PyTorch's, from a check made after the step's program ran) with a line
    saying so and naming the op and the user's line that called it (`location`, from
    `user_code.user_line` when the op was traced)."""
    line = ""
    if location is not None:
        where, source = user_code.describe(location)
        by_backward = "by the backward pass called " if location[3] else ""
        line = f" {by_backward}at {where}: {source}"
    when = "when the op's program ran (eager mode)" if eager.enabled() and eager.op_by_op() else \
        "once the step's program ran, not at the op"
    return type(error)(f"{error}\n(on XLA checked {when}: {op_name} was called{line})")


# ---- the reductions (jax in a program, numpy for indices on the host) ---------------------

def _first_bad(bad, values):
    """int64[2]: (the first flat position where `bad` holds, or `_NONE`; `values` there).

    One variadic reduction over two rows, (position, position) and (position, value),
    keeping the pair of the smaller position (the init pair is `_NONE` in both, so where
    nothing is bad either tie reads as none): XLA makes it one kernel, where an `argmax`
    and the gathers after it made three (a kernel costs a step's first compile on the CPU
    about 12 ms)."""
    bad, values = bad.reshape(-1), values.reshape(-1).astype(np.int64)
    pos = jnp.where(bad, lax.iota(np.int64, bad.shape[0]), _NONE)
    keys, carried = jnp.broadcast_to(pos, (2,) + pos.shape), jnp.stack([pos, values])

    def first(a, b):
        take = a[0] <= b[0]
        return jnp.where(take, a[0], b[0]), jnp.where(take, a[1], b[1])
    _, out = lax.reduce((keys, carried), (np.int64(_NONE), np.int64(_NONE)), first, (1,))
    return out


def _outside(xp, indices, bounds):
    """Where each index k is outside its [low, high) and is not its `skip` value, and the
    indices, as arrays of shape (broadcast shape, k)."""
    arrays = xp.broadcast_arrays(*indices)
    bad, values = [], []
    for a, (low, high, skip) in zip(arrays, bounds):
        a = a.astype(np.int64)
        outside = (a < low) | (a >= high)
        bad.append(outside if skip is None else outside & (a != skip))
        values.append(a)
    return xp.stack(bad, axis=-1), xp.stack(values, axis=-1)


def _decode(flag, count=1):
    """(found, the bad value, which of `count` index tensors holds it) of a check's int64[2]."""
    pos, value = (int(x) for x in flag)
    if pos == _NONE:
        return False, 0, 0
    return True, value, pos % count


def _zero_in(divisor):
    return _first_bad(divisor == 0, jnp.zeros(divisor.shape, np.int64))


def _outside_interval(x, low, high):
    """Some value of x is not in [low, high] (NaN is not)."""
    return _first_bad(~((x >= low) & (x <= high)), jnp.zeros(x.shape, np.int64))


_IN_BOUNDS = Lowering("value_check.indices_in_bounds",
                      lambda *indices, bounds: _first_bad(*_outside(jnp, indices, bounds)),
                      static_scalars=True, rng=False, dynamic_shape=False)
_NONZERO = Lowering("value_check.nonzero_divisor", _zero_in,
                    static_scalars=True, rng=False, dynamic_shape=False)
_IN_INTERVAL = Lowering("value_check.values_in_interval", _outside_interval,
                        static_scalars=True, rng=False, dynamic_shape=False)


def _guarded(out):
    """The values of an op's result `out` (a tensor or a tuple of them)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return tuple(o._value for o in outs if isinstance(o, XLATensor))


def _defer(lowering, tensors, kwargs, op_name, error, out):
    """Traces `lowering` of `tensors` as a check node and defers its check: `error(value,
    k)` is PyTorch's exception for a bad value found in tensor k; a host read of a value
    computed from `out`, the op's result, raises it."""
    if not ENABLED:
        return
    inputs = tuple(t._value for t in tensors)
    node = Node(lowering, (tuple(In(i) for i in range(len(inputs))), kwargs), inputs, (),
                (_FLAG_AVAL,))
    where = user_code.user_line()

    def check(flag):
        found, value, k = _decode(flag.tolist(), len(inputs))
        if found:
            raise deferred_error(error(value, k), op_name, where) from None
    defer_check(Value(*_FLAG_AVAL, inputs[0].device, node, 0), check, _guarded(out))


def check_bounds(op_name, indices, bounds, error, out):
    """Raises `error(value, k)`, PyTorch's error, if index tensor k of `indices` holds a
    value outside its bounds (low, high, skip): at once for CPU indices, else deferred
    (guarding `out`, the op's result). Indices of bounded dynamic sizes (`dynamic_sizes`)
    are not checked: their padding holds any values."""
    if any(type(i) is BoundedXLATensor for i in indices):
        return
    shape = indices[0].shape if len(indices) == 1 else np.broadcast_shapes(*(i.shape for i in indices))
    if 0 in shape:
        return
    if not isinstance(indices[0], XLATensor):  # CPU scalars PyTorch lets meet XLA tensors
        bad, values = _outside(np, [i.numpy() for i in indices], bounds)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise error(int(values.reshape(-1)[pos]), pos % len(indices))
        return
    _defer(_IN_BOUNDS, indices, (("bounds", tuple(bounds)),), op_name, error, out)


def _op_name(func):
    return func._schema.name.split("::")[-1]


# ---- indexing -----------------------------------------------------------------------------

def check_index(func, x, indices, out):
    """Advanced indexing (`index`, `index_put`, result `out`): int index tensor k addresses
    x's dim at its place in `indices` (None: a slice); negative values count from the end."""
    if func in (aten._unsafe_index.Tensor, aten._unsafe_index_put.default):
        return
    dims = [d for d, i in enumerate(indices)
            if i is not None and i.dtype not in (torch.bool, torch.uint8)]
    if not dims:
        return
    sizes = [x.shape[d] for d in dims]

    def error(value, k):
        if sizes[k] == 0:
            return IndexError("index is out of bounds for dimension with size 0")
        return IndexError(f"index {value} is out of bounds for dimension {k} with size {sizes[k]}")
    check_bounds(_op_name(func), [indices[d] for d in dims],
                 [(-n, n, None) for n in sizes], error, out)


def _checked(*ops):
    """Registers `fn(func, out, *args, **kwargs)` as the value check of `ops`, made once
    the op is traced (`out`: its result)."""
    def register(fn):
        def run(func, *args, **kwargs):
            out = trace(func, REGISTRY[func], args, kwargs)
            fn(func, out, *args, **kwargs)
            return out
        engine_op(*ops, with_op=True)(run)
        return fn
    return register


def _dim(x, dim):
    """(dim as a non-negative number, its size); a 0-d tensor has one dim of size 1."""
    if len(x.shape) == 0:
        return 0, 1
    dim = dim % len(x.shape)
    return dim, x.shape[dim]


# PyTorch's messages for an index along dim d of size n: (d, n) -> error(value, k)

def _out_of_bounds(error_type, prefix=""):
    return lambda d, n: lambda v, k: error_type(
        f"{prefix}index {v} is out of bounds for dimension {d} with size {n}")


def _out_of_self(d, n):
    return lambda v, k: IndexError("index out of range in self")


def _indices_element(d, n):
    return lambda v, k: RuntimeError(f"INDICES element is out of DATA bounds, id={v} axis_dim={n}")


def _along_dim(func, out, x, dim, index, message, wrap=False):
    """`index` addresses x's `dim`: in [0, n), or in [-n, n) where PyTorch `wrap`s."""
    d, n = _dim(x, dim)
    check_bounds(_op_name(func), [index], [(-n if wrap else 0, n, None)], message(d, n), out)


@_checked(aten.gather.default, aten.scatter.src, aten.scatter.value, aten.scatter.reduce,
          aten.scatter.value_reduce, aten.scatter_add.default, aten.scatter_reduce.two)
def _gather_scatter(func, out, x, dim, index, *args, **kwargs):
    _along_dim(func, out, x, dim, index, _out_of_bounds(RuntimeError))


@_checked(aten.index_select.default)
def _index_select(func, out, x, dim, index):
    # PyTorch's CPU kernel for dim 1 of a matrix has a message of its own
    two_d = len(x.shape) == 2 and _dim(x, dim)[0] == 1
    _along_dim(func, out, x, dim, index, _indices_element if two_d else _out_of_self)


@_checked(aten.index_add.default)
def _index_add(func, out, x, dim, index, source, alpha=1):
    # PyTorch scatters (with scatter's message) where it can: int64 indices, alpha 1, 2-d+
    scatters = len(x.shape) > 1 and alpha == 1 and index.dtype == torch.int64
    _along_dim(func, out, x, dim, index, _out_of_bounds(RuntimeError) if scatters else _out_of_self)


@_checked(aten.index_copy.default)
def _index_copy(func, out, x, dim, index, source):
    _along_dim(func, out, x, dim, index, _out_of_bounds(IndexError, "index_copy_(): "))


@_checked(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def _index_fill(func, out, x, dim, index, value):
    _along_dim(func, out, x, dim, index, _out_of_bounds(IndexError), wrap=True)


@_checked(aten.index_reduce.default)
def _index_reduce(func, out, x, dim, index, *args, **kwargs):
    _along_dim(func, out, x, dim, index, _out_of_self)


@_checked(aten.take.default, aten.put.default)
def _flat(func, out, x, index, *args, **kwargs):
    n = math.prod(x.shape)
    check_bounds(_op_name(func), [index], [(-n, n, None)], lambda v, k: IndexError(
        f"out of range: tried to access index {v} on a tensor of {n} elements."), out)


@_checked(aten.embedding.default)
def _embedding(func, out, weight, indices, *args, **kwargs):
    check_bounds("embedding", [indices], [(0, weight.shape[0], None)],
                 lambda v, k: IndexError("index out of range in self"), out)


@_checked(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def _nll_loss(func, out, x, target, weight, reduction, ignore_index):
    classes = x.shape[1] if len(x.shape) > 1 else x.shape[0]
    check_bounds(_op_name(func), [target], [(0, classes, ignore_index)],
                 lambda v, k: IndexError(f"Target {v} is out of bounds."), out)


# ---- integer division ---------------------------------------------------------------------

def _check_divisor(func, out, divisor):
    dtype = out.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool or 0 in out.shape:
        return
    if isinstance(divisor, XLATensor):
        _defer(_NONZERO, [divisor], (), _op_name(func), lambda v, k: RuntimeError("ZeroDivisionError"),
               out)
    elif bool((divisor == 0).any() if isinstance(divisor, torch.Tensor) else divisor == 0):
        raise RuntimeError("ZeroDivisionError")


@_checked(aten.floor_divide.default, aten.floor_divide.Scalar, aten.remainder.Tensor,
          aten.remainder.Scalar, aten.remainder.Scalar_Tensor, aten.fmod.Tensor,
          aten.fmod.Scalar)
def _division(func, out, x, divisor):
    _check_divisor(func, out, divisor)


@_checked(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _rounding_division(func, out, x, divisor, rounding_mode=None):
    if rounding_mode is not None:
        _check_divisor(func, out, divisor)


# ---- values a function is defined on ------------------------------------------------------

def _check_interval(func, out, x, low, high, message):
    """RuntimeError(message) unless every value of the XLA tensor x is in [low, high]."""
    if isinstance(x, XLATensor) and 0 not in x.shape:
        _defer(_IN_INTERVAL, [x], (("low", low), ("high", high)), _op_name(func),
               lambda v, k: RuntimeError(message), out)


@_checked(aten.binary_cross_entropy.default)
def _binary_cross_entropy(func, out, x, *args, **kwargs):
    _check_interval(func, out, x, 0.0, 1.0, "all elements of input should be between 0 and 1")


_BERNOULLI_P = ("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
                "message be improved?  If so, please report an enhancement request to PyTorch.)")


@_checked(aten.bernoulli.default)
def _bernoulli(func, out, p, *args, **kwargs):
    _check_interval(func, out, p, 0.0, 1.0, _BERNOULLI_P)


@_checked(aten.bernoulli.Tensor)
def _bernoulli_of(func, out, x, p, *args, **kwargs):
    _check_interval(func, out, p, 0.0, 1.0, _BERNOULLI_P)


@_checked(aten.poisson.default)
def _poisson(func, out, rates, *args, **kwargs):
    _check_interval(func, out, rates, 0.0, float("inf"),
                    "invalid Poisson rate, expected rate to be non-negative")
