"""Bounded dynamic sizes: the `torch.SymInt`s of XLA tensors whose size depends on values.

Under `XLA_EXPERIMENTAL=nonzero:masked_select...` those ops give a tensor whose data is
padded to an upper bound the program knows (nonzero of n elements: n rows) and whose real
size is a device scalar the same program computes (XLA's dynamic padder does the same with
bounded dynamic dimensions, which jax's jit cannot express). Users see the size as a
`torch.SymInt` whose node is a `DynamicSize`: PyTorch's kernels and meta functions do their
size arithmetic through it, so later ops keep the size symbolic and a model that filters
its data traces one graph, one program for every real size.

A `DynamicSize` is an expression over leaves (a device scalar: nonzero's count) and
constants. It knows, without the device:
- `static`: the expression applied to its leaves' bounds (printed `<=N`, as torch_xla does);
- an interval [lo, hi] holding the real value (a leaf: [0, bound]); `hi` is the padded size
  of a dim of that size, and comparisons the intervals decide (or of one expression with
  itself) are answered without the device.
What the intervals leave open is read from the device (`value()`: the leaves' scalars are
computed and read, the expression is evaluated on the host), at the points where PyTorch
needs a Python answer: `int()`/`bool()` of a size, and the checks of kernels that must hold
(`guard_bool`, `expect_true`: a view's element count). The questions PyTorch asks only to
choose a faster path (`guard_or_false`: is this size 1?) get their default answer, as
PyTorch answers them for data-dependent sizes under torch.compile, so broadcasting never
reads the device. Inside a program the expression is one node over its leaves
(`device_value`).
"""
import math
import operator

import jax.numpy as jnp
import numpy as np
import torch

from ..base import counters
from ..step.execution import to_cpu
from ..graph.ir import In, Node, Value
from ..lowering import Lowering

_INF = math.inf

# the host's and the device's operations of an expression node
_INT_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
            "floordiv": operator.floordiv, "mod": operator.mod, "sym_min": min, "sym_max": max}
_CMP_OPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
            "gt": operator.gt, "ge": operator.ge}
_BOOL_OPS = {"sym_and": operator.and_, "sym_or": operator.or_}
_HOST_OPS = {**_INT_OPS, **_CMP_OPS, **_BOOL_OPS, "neg": operator.neg, "sym_not": operator.not_}
_DEVICE_OPS = {**_INT_OPS, "floordiv": jnp.floor_divide, "mod": jnp.remainder,
               "sym_min": jnp.minimum, "sym_max": jnp.maximum, **_CMP_OPS, **_BOOL_OPS,
               "neg": operator.neg, "sym_not": jnp.logical_not}


def _interval(op, a, b):
    """The interval of `op` of values in intervals a and b (unknown: infinite)."""
    (alo, ahi), (blo, bhi) = a, b
    if op == "add":
        return alo + blo, ahi + bhi
    if op == "sub":
        return alo - bhi, ahi - blo
    if op == "mul" and alo >= 0 and blo >= 0:
        return alo * blo, ahi * bhi
    if op in ("floordiv", "mod") and alo >= 0 and blo > 0 and bhi < _INF:
        return (alo // bhi, ahi // blo) if op == "floordiv" else (0, min(ahi, bhi - 1))
    if op == "sym_min":
        return min(alo, blo), min(ahi, bhi)
    if op == "sym_max":
        return max(alo, blo), max(ahi, bhi)
    return -_INF, _INF


def _decided(op, a, b):
    """The comparison of values in intervals a and b when the intervals decide it, else None."""
    (alo, ahi), (blo, bhi) = a, b
    if op in ("lt", "ge"):
        known = True if ahi < blo else False if alo >= bhi else None
        return known if known is None or op == "lt" else not known
    if op in ("gt", "le"):
        known = True if alo > bhi else False if ahi <= blo else None
        return known if known is None or op == "gt" else not known
    if ahi < blo or bhi < alo:
        return op == "ne"
    if alo == ahi == blo == bhi:
        return op == "eq"
    return None


class _KnownOnly:
    """What PyTorch's Python `guard_or_false`/`guard_or_true` ask of a size's `shape_env`
    (a node without one is guarded, which would read the device): the answer known without
    the device, else their default."""

    @staticmethod
    def evaluate_sym_node(node, size_oblivious=False, fallback_value=None):
        known = node.known()
        return fallback_value if known is None else known


class DynamicSize:
    """A SymNode (the protocol of torch.fx.experimental.sym_node.SymNode) of a size: a leaf
    (`leaf`: a 0-d int64 Value), a constant (`constant`) or `op` of `args`."""
    shape_env = _KnownOnly()

    def __init__(self, op, args=(), *, leaf=None, bound=None, constant=None, is_bool=False):
        self.op, self.args, self.leaf, self.is_bool_ = op, args, leaf, is_bool
        self.constant = constant
        self._real = None
        if op == "const":
            self.key, self.static, self.range = ("const", constant), int(constant), (constant, constant)
        elif op == "leaf":
            # (`leaf` held: its id names no other value while this node lives)
            self.key, self.static, self.range = ("leaf", id(leaf)), bound, (0, bound)
        else:
            self.key = (op,) + tuple(a.key for a in args)
            statics = [a.static for a in args]
            try:
                self.static = int(_HOST_OPS[op](*statics))
            except ZeroDivisionError:
                self.static = 0
            if op in _INT_OPS:
                self.range = _interval(op, args[0].range, args[1].range)
            elif op == "neg":
                self.range = (-args[0].range[1], -args[0].range[0])
            else:
                self.range = (0, 1)

    # ---- what it is -----------------------------------------------------------------
    def is_int(self):
        return not self.is_bool_

    def is_bool(self):
        return self.is_bool_

    def is_float(self):
        return False

    def is_nested_int(self):
        return False

    def nested_int(self):
        return None

    def nested_int_coeff(self):
        return None

    def is_symbolic(self):
        return self.op != "const"

    def is_constant(self):
        return self.op == "const"

    def has_hint(self):
        return False

    def constant_int(self):
        return None if self.op != "const" or self.is_bool_ else int(self.constant)

    def constant_bool(self):
        return None if self.op != "const" or not self.is_bool_ else bool(self.constant)

    def maybe_as_int(self):
        return self.constant_int()

    def maybe_as_bool(self):
        return self.constant_bool()

    @property
    def upper_bound(self) -> int:
        """The padded size of a dim of this size."""
        hi = self.range[1]
        if hi == _INF:
            raise RuntimeError(f"size {self.str()} has no upper bound known to XLA")
        return int(hi)

    def str(self):
        return f"<={self.static}"

    _graph_repr = str
    __str__ = str
    __repr__ = str

    # ---- arithmetic -----------------------------------------------------------------
    def wrap_int(self, n):
        return DynamicSize("const", constant=int(n))

    def wrap_bool(self, b):
        return DynamicSize("const", constant=bool(b), is_bool=True)

    def _make(self, op, *args, is_bool=False):
        counters.count(f"xla::size_{op}")
        if all(a.op == "const" for a in (self, *args)):
            return DynamicSize("const", constant=_HOST_OPS[op](*(a.constant for a in (self, *args))),
                               is_bool=is_bool)
        if is_bool:
            known = self._known(op, *args)
            if known is not None and op not in _CMP_OPS:
                return DynamicSize("const", constant=known, is_bool=True)
        elif len(args) == 1 and args[0].op == "const":
            other = args[0].constant
            if (op in ("add", "sub") and other == 0) or (op in ("mul", "floordiv") and other == 1):
                return self
        elif len(args) == 1 and self.op == "const" and op in ("add", "mul"):
            if self.constant == (0 if op == "add" else 1):
                return args[0]
        return DynamicSize(op, (self, *args), is_bool=is_bool)

    def _known(self, op, *args):
        """The value of `op` of self and `args` when known without the device, else None."""
        if op in _CMP_OPS:
            other = args[0]
            if self.key == other.key:
                return op in ("eq", "le", "ge")
            return _decided(op, self.range, other.range)
        a = self.known()
        if op == "sym_not":
            return None if a is None else not a
        b = args[0].known()
        if op == "sym_and":
            return False if False in (a, b) else True if a is b is True else None
        return True if True in (a, b) else False if a is b is False else None

    def known(self):
        """The value when it is known without the device, else None."""
        if self.op == "const":
            return self.constant
        if self.is_bool_:
            return self.args[0]._known(self.op, *self.args[1:])
        lo, hi = self.range
        return int(lo) if lo == hi else None

    def add(self, other):
        return self._make("add", other)

    def sub(self, other):
        return self._make("sub", other)

    def mul(self, other):
        return self._make("mul", other)

    def floordiv(self, other):
        return self._make("floordiv", other)

    int_floordiv = floordiv

    def mod(self, other):
        return self._make("mod", other)

    def sym_min(self, other):
        return self._make("sym_min", other)

    def sym_max(self, other):
        return self._make("sym_max", other)

    def neg(self):
        return self._make("neg")

    def eq(self, other):
        return self._make("eq", other, is_bool=True)

    def ne(self, other):
        return self._make("ne", other, is_bool=True)

    def lt(self, other):
        return self._make("lt", other, is_bool=True)

    def le(self, other):
        return self._make("le", other, is_bool=True)

    def gt(self, other):
        return self._make("gt", other, is_bool=True)

    def ge(self, other):
        return self._make("ge", other, is_bool=True)

    def sym_and(self, other):
        return self._make("sym_and", other, is_bool=True)

    def sym_or(self, other):
        return self._make("sym_or", other, is_bool=True)

    def sym_not(self):
        return self._make("sym_not", is_bool=True)

    def clone(self):
        counters.count("xla::size_clone")
        return self

    # ---- answers --------------------------------------------------------------------
    def value(self):
        """The real value: the leaves' scalars computed and read (each once), the
        expression evaluated on the host."""
        if self.op == "const":
            return self.constant
        if self.op == "leaf":
            if self._real is None:
                self._real = int(to_cpu(self.leaf).item())
            return self._real
        return _HOST_OPS[self.op](*(a.value() for a in self.args))

    def _answer(self):
        known = self.known()
        return self.value() if known is None else known

    def guard_int(self, file=None, line=None):
        return int(self._answer())

    def guard_bool(self, file=None, line=None):
        return bool(self._answer())

    expect_true = guard_bool
    guard_size_oblivious = guard_bool

    def guard_or_false(self, file=None, line=None):
        return bool(self.known())

    def guard_or_true(self, file=None, line=None):
        known = self.known()
        return True if known is None else bool(known)

    def statically_known_true(self, file=None, line=None):
        return self.known() is True

    int_ = guard_int
    bool_ = guard_bool

    def expect_size(self, file=None, line=None):
        return self.guard_bool(file, line) if self.is_bool_ else True

    # ---- on the device --------------------------------------------------------------
    def leaves(self):
        """The distinct leaf Values of the expression, in a stable order."""
        if self.op == "leaf":
            return [self.leaf]
        out = []
        for a in self.args:
            for v in a.leaves():
                if all(v is not w for w in out):
                    out.append(v)
        return out

    def template(self, leaves):
        if self.op == "const":
            return ("const", int(self.constant))
        if self.op == "leaf":
            return In(next(i for i, v in enumerate(leaves) if v is self.leaf))
        return (self.op,) + tuple(a.template(leaves) for a in self.args)

    def device_value(self) -> Value:
        """A 0-d int64 Value computing the real size in the program (a leaf: its own)."""
        if self.op == "leaf":
            return self.leaf
        leaves = self.leaves()
        if not leaves:
            raise RuntimeError(f"size {self.str()} has no device value")
        aval = ((), torch.int64)
        node = Node(_EXPRESSION, ((self.template(leaves),), ()), tuple(leaves), (), (aval,))
        return Value((), torch.int64, leaves[0].device, node, 0)


def _evaluate(tree):
    """A size expression's template, its leaves filled in with their jax scalars."""
    if type(tree) is not tuple:
        return tree.astype(np.int64)
    if tree[0] == "const":
        return np.int64(tree[1])
    out = _DEVICE_OPS[tree[0]](*(_evaluate(t) for t in tree[1:]))
    return jnp.asarray(out).astype(np.int64)


_EXPRESSION = Lowering("xla::size", _evaluate, static_scalars=True, rng=False,
                       dynamic_shape=False)


def leaf(value: Value, bound: int) -> torch.SymInt:
    """The SymInt of a size the program computes as `value` (a 0-d int64), at most `bound`."""
    return torch.SymInt(DynamicSize("leaf", leaf=value, bound=bound))


def node_of(size):
    """The DynamicSize behind a SymInt of an XLA tensor's size, or None (an int, a SymInt of
    another kind)."""
    node = getattr(size, "node", None) if isinstance(size, torch.SymInt) else None
    return node if isinstance(node, DynamicSize) else None

