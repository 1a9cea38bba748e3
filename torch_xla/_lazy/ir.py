"""The lazy graph: values, the nodes that compute them, and structural keys.

A `Value` is what an XLA tensor holds: either a device buffer (`data`, a jax array) or
output `index` of a pending `Node`. Tensors that alias one value share the `Value` object,
so materialising it once serves them all. A `Node` records one lowered op: the lowering, a
template of its arguments (static values in place, `In`/`Sc` placeholders for tensor inputs
and dynamic Python scalars), its input values and its scalar values. `Node.key` is
structural: it names the op and its static arguments, never buffer contents or scalar
values, so graphs that differ only in data or scalars share one compiled program.
"""


class In:
    """Placeholder for tensor input `i` of a node in its argument template."""
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def __eq__(self, other):
        return type(other) is In and other.i == self.i

    def __hash__(self):
        return hash(("In", self.i))

    def __repr__(self):
        return f"%{self.i}"


class Sc:
    """Placeholder for dynamic scalar `i` of a node (a program parameter, not a constant)."""
    __slots__ = ("i", "type")

    def __init__(self, i, type_):
        self.i = i
        self.type = type_

    def __eq__(self, other):
        return type(other) is Sc and other.i == self.i and other.type is self.type

    def __hash__(self):
        return hash(("Sc", self.i, self.type))

    def __repr__(self):
        return f"${self.i}:{self.type.__name__}"


class Node:
    __slots__ = ("op", "template", "inputs", "scalars", "avals", "key")

    def __init__(self, op, template, inputs, scalars, avals, key=None):
        self.op = op                  # lowering.Lowering
        self.template = template      # (args, kwargs) with In/Sc placeholders
        self.inputs = inputs          # tuple[Value]
        self.scalars = scalars        # tuple of Python scalars, program parameters
        self.avals = avals            # tuple[(shape, torch.dtype)] of the outputs
        # `key_of(op, template, avals)`, given by callers that made it once for many nodes
        self.key = Node.key_of(op, template, avals) if key is None else key

    @staticmethod
    def key_of(op, template, avals):
        return (op.name, template, avals)


class Value:
    """`error` is set only on a value whose program failed (then it has neither a node nor
    data): using it raises `failure()`."""
    __slots__ = ("node", "index", "data", "shape", "dtype", "device", "key", "error", "sharding",
                 "__weakref__")

    def __init__(self, shape, dtype, device, node=None, index=0, data=None):
        self.node = node
        self.index = index
        self.data = data
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.key = (shape, dtype, device)  # what a call's signature records of it (None: failed)
        self.sharding = None  # under SPMD: the jax Sharding given or propagated (`_lazy/spmd`)

    @property
    def pending(self) -> bool:
        return self.data is None

    def set_data(self, data) -> None:
        self.data = data
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


def fill_template(obj, inputs, scalars):
    """Rebuilds an argument structure, replacing placeholders with `inputs`/`scalars`."""
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


def format_aval(shape, dtype) -> str:
    """A value's dtype and shape as the engine writes them everywhere: `float32[2, 3]`."""
    return f"{str(dtype).removeprefix('torch.')}{list(shape)}"


def format_avals(avals) -> str:
    return ", ".join(format_aval(s, d) for s, d in avals)


def format_node(node: Node) -> str:
    args, kwargs = node.template
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs]
    return f"{node.op.name}({', '.join(parts)}) -> ({format_avals(node.avals)})"
