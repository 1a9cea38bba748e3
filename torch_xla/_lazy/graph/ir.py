"""The lazy graph: values, the nodes that compute them, and structural keys.

A `Value` is what an XLA tensor holds: either a device buffer (`data`, a jax array) or
output `index` of a pending `Node`. Tensors that alias one value share the `Value` object,
so materialising it once serves them all. A `Node` records one lowered op: the lowering, a
template of its arguments (static values in place, `In`/`Sc` placeholders for tensor inputs
and dynamic Python scalars), its input values and its scalar values. `Node.key` is
structural: it names the op and its static arguments, never buffer contents or scalar
values, so graphs that differ only in data or scalars share one compiled program.

Each node also gets, as it is made, `type` (its key interned: equal keys, one number) and
`hash`, from its type and its inputs' hashes (as torch's lazy tensor core hashes nodes), so
a step's graph is looked up by its roots' hashes without walking it (`graph_cache`).

Nodes and values carry `checks`: the deferred value checks (`deferred_checks.defer_check`) of the
ops they were computed from, so that a host read of a value made from an out-of-range
index raises the check's error instead of returning XLA's clamped result. A node has its
inputs' checks (and, for a checked op, its own); a computed value keeps those not yet
passed.
"""
import itertools
import os

import torch

from ..runtime import pjrt
from ..base import scopes, user_code
from ..runtime.compile_explanation import format_avals


class In:
    """Placeholder for tensor input `i` of a node in its argument template. Interned: one
    object per `i`, compared and hashed by identity (templates are hashed per node)."""
    __slots__ = ("i",)
    _made = {}

    def __new__(cls, i):
        made = cls._made.get(i)
        if made is None:
            made = object.__new__(cls)
            made.i = i
            made = cls._made.setdefault(i, made)
        return made

    def __reduce__(self):
        return In, (self.i,)

    def __repr__(self):
        return f"%{self.i}"


class Sc:
    """Placeholder for dynamic scalar `i` of a node (a program parameter, not a constant),
    of Python type `type`. Interned like `In`."""
    __slots__ = ("i", "type")
    _made = {}

    def __new__(cls, i, type_):
        made = cls._made.get((i, type_))
        if made is None:
            made = object.__new__(cls)
            made.i, made.type = i, type_
            made = cls._made.setdefault((i, type_), made)
        return made

    def __reduce__(self):
        return Sc, (self.i, self.type)

    def __repr__(self):
        return f"${self.i}:{self.type.__name__}"


# XLA_IR_DEBUG (or XLA_HLO_DEBUG), switched by `_XLAC._set_ir_debug`: each node, and each
# value made holding a buffer, records where it was made as its `debug`: the profiler scope
# open then (`debug.profiler.Trace`) and the Python frames outside the engine, for the IR
# text and `_XLAC._xla_tensors_report`.
IR_DEBUG = [any(os.environ.get(name, "0").lower() in ("1", "true", "on", "yes", "y")
                for name in ("XLA_IR_DEBUG", "XLA_HLO_DEBUG"))]


def debug_info():
    """(scope, frames) of the code making a node or value now."""
    return scopes.current(), user_code.stack_lines()


NO_CHECKS = frozenset()
# Called with each node as it is made, when set (the dynamic shape detector's open session:
# `dynamic_shape_detector`).
node_observer = None
_types = {}                 # node key -> its number
_numbers = itertools.count()
_signatures = {}            # (shape, dtype, device) -> its number: a value's `key`
_signature_numbers = itertools.count()
_MAX_TYPES = 1 << 16        # then forgotten together: numbers are never reused


def _intern(table, numbers, key) -> int:
    """A new number for `key` in `table` (a look-up found none)."""
    if len(table) >= _MAX_TYPES:
        table.clear()
    return table.setdefault(key, next(numbers))


def node_type(key) -> int:
    """The interned number of a node key (`Node.key_of`)."""
    number = _types.get(key)
    return _intern(_types, _numbers, key) if number is None else number


def value_signature(shape, dtype, device) -> int:
    """The interned number of a value's (shape, dtype, device), what a call's plan key
    records of it: one small integer hashes and compares faster than the tuple."""
    sig = (shape, dtype, device)
    number = _signatures.get(sig)
    return _intern(_signatures, _signature_numbers, sig) if number is None else number


class Node:
    __slots__ = ("op", "template", "inputs", "scalars", "avals", "key", "origin", "type", "hash",
                 "checks", "debug", "bounded")

    def __init__(self, op, template, inputs, scalars, avals, origin=None, key=None,
                 type_number=None):
        self.op = op                  # lowering.Lowering
        self.template = template      # (args, kwargs) with In/Sc placeholders
        self.inputs = inputs          # tuple[Value]
        self.scalars = scalars        # tuple of Python scalars, program parameters
        self.avals = avals            # tuple[(shape, torch.dtype)] of the outputs
        self.origin = origin          # `user_code.user_line()` of the call that made it, or None
        # `key_of(op, template, avals)` and its `node_type`, given by callers that made them
        # once for many nodes
        self.key = key = Node.key_of(op, template, avals) if key is None else key
        self.type = h = node_type(key) if type_number is None else type_number
        checks = NO_CHECKS
        for v in inputs:
            node = v.node
            if node is not None:
                h = hash((h, node.hash, v.index))
                c = node.checks
            else:
                h = hash((h, v.key))
                c = v.checks
                v.as_input = True
            if c and c is not checks:
                checks = c if not checks or checks <= c else checks if c <= checks else checks | c
        self.hash = h
        self.checks = checks
        self.debug = debug_info() if IR_DEBUG[0] else None
        # per output, the dims padded to a bound whose real size the program computes
        # (`dynamic_sizes`), for the IR text; None: all static
        self.bounded = None
        if node_observer is not None:
            node_observer(self)

    @staticmethod
    def key_of(op, template, avals):
        return (op.name, template, avals)


class Value:
    """`error` is set only on a value whose program failed (then it has neither a node nor
    data): using it raises `failure()`."""
    __slots__ = ("node", "index", "data", "shape", "dtype", "device", "key", "error", "sharding",
                 "checks", "debug", "as_input", "sizes", "__weakref__")

    def __init__(self, shape, dtype, device, node=None, index=0, data=None, key=None):
        self.node = node
        self.index = index
        self.data = data
        self.shape = shape
        self.dtype = dtype
        self.device = device
        # `value_signature`, what a call's plan key records of it (None: failed)
        self.key = value_signature(shape, dtype, device) if key is None else key
        self.sharding = None  # under SPMD: the jax Sharding given or propagated (`_lazy/graph/spmd_layout`)
        self.checks = NO_CHECKS  # once computed: the checks of its ops not yet passed
        self.debug = debug_info() if IR_DEBUG[0] and node is None else None
        # a buffer some node has read (torch_xla then holds an `xla::device_data` IR node
        # for it, which its debug info shows)
        self.as_input = False
        # a bounded dynamic value's real sizes (ints and `dynamic_sizes` SymInts; `shape`
        # holds their bounds, the padded buffer's shape); None: `shape` is its size
        self.sizes = None

    @property
    def pending(self) -> bool:
        return self.data is None

    def set_data(self, data) -> None:
        self.data = data
        node = self.node
        if node is not None and node.checks:
            self.checks = frozenset(c for c in node.checks if not c.passed)
        self.node = None  # drop the graph: the value is now a buffer

    def fail(self, error) -> None:
        """The value cannot be computed (its program failed with `error`)."""
        self.node = self.data = self.key = None
        self.error = error

    def failure(self) -> RuntimeError:
        """The error a use of a failed value raises."""
        error = RuntimeError(f"this tensor has no value: the program computing it failed "
                             f"({type(self.error).__name__}: {self.error})")
        error.__cause__ = self.error
        return error


NUMBER_TYPES = (int, float, bool, complex)


class ArgumentEncoder:
    """The one encoding of an op's arguments into a node's template, shared by the lazy path
    (`dispatch`: XLA tensors are inputs) and the FX path (`graph_capture.fx_lowering`: graph
    nodes are): each input becomes `In(i)`, each number at a position where the op takes a
    Scalar (`dynamic`) `Sc(i, type)` (a program parameter), lists and tuples tuples of their
    items, anything else a constant. `fill_template` decodes a template.

    A path says what its inputs are (`input`: the input's index, or None) and may record
    more of what it sees (`scalar`, `keyword`, `constant`). An object, not closures: a
    closure that calls itself is a reference cycle, which would keep the inputs' buffers
    alive until the garbage collector runs."""
    __slots__ = ("inputs", "scalars")

    def __init__(self):
        self.inputs, self.scalars = [], []

    def input(self, obj, t):
        """The index of `obj` (of type `t`) among the inputs if it is one (appended), else None."""
        raise NotImplementedError

    def scalar(self, t) -> None:
        """A number of type `t` became a program parameter."""

    def keyword(self, name) -> None:
        """Keyword argument `name` is encoded next."""

    def constant(self, obj, t, dynamic):
        """What `obj` (of type `t`; no input, parameter, list or tuple) is in the template."""
        return obj

    def encode(self, obj, dynamic):
        t = type(obj)
        i = self.input(obj, t)
        if i is not None:
            return In(i)
        if dynamic and t in NUMBER_TYPES:
            self.scalars.append(obj)
            self.scalar(t)
            return Sc(len(self.scalars) - 1, t)
        if t is list or t is tuple:
            return tuple([self.encode(o, dynamic) for o in obj])
        return self.constant(obj, t, dynamic)

    def encode_call(self, args, kwargs, flags, names):
        """The template (args, kwargs) of a call: `flags[i]` says whether a number at position
        `i` is a program parameter, `names` which keywords take one."""
        n = len(flags)
        targs = tuple([self.encode(a, i < n and flags[i]) for i, a in enumerate(args)])
        if not kwargs:
            return targs, ()
        tkwargs = []
        for k, v in kwargs.items():
            self.keyword(k)
            tkwargs.append((k, self.encode(v, k in names)))
        return targs, tuple(tkwargs)


def fill_template(obj, inputs, scalars):
    """Rebuilds an argument structure, replacing placeholders with `inputs`/`scalars`: the
    decoder of `ArgumentEncoder`'s templates."""
    t = type(obj)
    if t is In:
        return inputs[obj.i]
    if t is Sc:
        return scalars[obj.i]
    if t is tuple:
        return tuple(fill_template(o, inputs, scalars) for o in obj)
    if t is list:
        return [fill_template(o, inputs, scalars) for o in obj]
    return obj


def format_node(node: Node) -> str:
    args, kwargs = node.template
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs]
    return f"{node.op.name}({', '.join(parts)}) -> ({format_avals(node.avals)})"


def ir_op_name(name: str) -> str:
    """An op as torch_xla names it in IR text: `aten.add.Tensor` is `aten::add`."""
    namespace, _, rest = name.partition(".")
    return f"{namespace}::{rest.split('.')[0]}" if rest else name


def hlo_shape(shape, dtype, layout=False, bounded=()) -> str:
    """A shape as XLA writes it: `f32[4,2]`, `c64[4]`, `pred[]`, `bf16[8]` (torch or numpy
    dtype); with `layout`, the row-major layout after it: `f32[4,2]{1,0}`; the dims in
    `bounded` as XLA writes a bounded dynamic dim: `s64[<=10,2]`."""
    if not isinstance(dtype, torch.dtype):
        dtype = pjrt.to_torch_dtype(dtype)
    name = str(dtype).removeprefix("torch.")
    if dtype == torch.bool:
        kind = "pred"
    elif dtype == torch.bfloat16:
        kind = "bf16"
    elif name.startswith("float8"):
        kind = "f8" + name.removeprefix("float8_")
    else:
        bits = dtype.itemsize * 8
        kind = ("c" if dtype.is_complex else "f" if dtype.is_floating_point else
                "s" if dtype.is_signed else "u") + str(bits)
    text = f"{kind}[{','.join(('<=' if i in bounded else '') + str(d) for i, d in enumerate(shape))}]"
    if layout and len(shape):
        text += "{" + ",".join(str(d) for d in reversed(range(len(shape)))) + "}"
    return text


def xla_shape(avals, bounded=None) -> str:
    """A node's outputs as torch_xla writes them: one output's shape with its layout
    (`f32[2,3]{1,0}`), several as a tuple of them (`bounded`: `Node.bounded`)."""
    shapes = [hlo_shape(s, d, layout=True, bounded=bounded[i] if bounded else ())
              for i, (s, d) in enumerate(avals)]
    return shapes[0] if len(shapes) == 1 else f"({', '.join(shapes)})"
