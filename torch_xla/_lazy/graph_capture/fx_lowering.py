"""An FX graph of ATen ops as one jax function, built from the lazy path's lowerings.

`GraphFunction(gm)` reads a functional ATen graph whose nodes carry PyTorch's shapes and
dtypes in `meta['val']` and replays it on jax values: every op goes through the lowering
the lazy path uses (`REGISTRY[op]` + `call_lowering`, outputs cast and checked against the
node's shapes and dtypes; Scalar-typed numbers arrive as weakly typed 0-d values, as there).
Ops with an engine meaning (aliases, copies, dtype casts, batch norm in evaluation) are
handled here as the engine's own ops handle them. `copy_` into a graph input is a mutation:
the function returns the input's new value beside the graph's outputs. Each random op takes
its seed from a per-call parameter, as lazy programs do.

A graph holding an op that cannot be part of one program (no lowering, an output shape that
depends on values, a read of a value by the host, a copy to the CPU; a collective, unless
the function is to run over the replicas: `collectives`) raises `Unsupported`, naming the
ops.
"""
import functools
import operator

import jax
import jax.numpy as jnp
import torch
from torch import fx
from torch.utils import _pytree as pytree
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

from ..runtime import pjrt
from ..step.execution import materialize
from ..graph.ir import ArgumentEncoder
from ..trace.op_rules import (ALIASES, SET_BUFFER_DONOR, SHARDING_ANNOTATIONS, has_own_kernel,
                              is_eval_batch_norm, trace_own_kernel)
from ..lowering import composite, load_all, lookup
from ..lowering.custom_call import custom_call, targets_in
from ..lowering.replay import call_lowering
from ..lowering.schema import scalar_arguments
from ..graph.tensor import unwrap

aten = torch.ops.aten
load_all()


class Unsupported(NotImplementedError):
    """The graph holds ops that cannot be lowered into one program."""

    def __init__(self, ops):
        self.ops = sorted(set(ops))
        super().__init__("cannot lower into one XLA program: " + ", ".join(self.ops))


# Checks and hints that compute nothing inside a program. `_linalg_check_errors` raises on
# the lazy path after a read of the factorization's status; a compiled program has no host
# to raise (docs/reference/known-differences.md).
_NO_VALUE = {aten._assert_tensor_metadata.default, aten._assert_scalar.default,
             aten.sym_constrain_range_for_size.default, aten._assert_async.msg,
             aten._linalg_check_errors.default, aten._propagate_xla_data.default}
# Ops whose meta kernel shapes outputs for the CPU unlike for other devices.
_DEVICE_SHAPED = {aten._embedding_bag.default, aten._embedding_bag_forward_only.default}
_SIZES = {aten.sym_size.int: lambda x, d: x.shape[d], aten.sym_numel.default: lambda x: x.size,
          aten.sym_storage_offset.default: lambda x: 0}
# Python arithmetic on sizes (graphs with symbolic shapes).
_PYTHON_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
               operator.mod, operator.neg, operator.pow, operator.eq, operator.ne, operator.lt,
               operator.le, operator.gt, operator.ge, torch.sym_float, torch.sym_int,
               torch.sym_max, torch.sym_min, torch.sym_sum}


def _copy_variant(op):
    """The `_copy` form of a view op (`_conj` -> `_conj_copy`): what functionalization turns
    views into on the lazy path, and what has the lowering."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    packet = getattr(aten, op._schema.name.split("::")[1] + "_copy", None)
    return getattr(packet, op._overloadname, None) if packet is not None else None


def handled(op) -> bool:
    """Whether an op of a graph can be lowered here (it may still be refused for its
    arguments: a boolean index, a dynamic-shape lowering)."""
    return (lookup(op) is not None or lookup(_copy_variant(op)) is not None or op in ALIASES or op in _NO_VALUE or op in _SIZES
            or op in _PYTHON_OPS or op in SHARDING_ANNOTATIONS
            or op in (aten.copy.default, aten.copy_.default, operator.getitem))


def aval_of(val, symbols=None):
    """(shape, dtype) of a node's tensor value, or None for a value that is not a tensor.
    Symbolic sizes become jax's symbolic dimensions (`symbols`: name -> dimension)."""
    if isinstance(val, torch.Tensor):
        return tuple(dim_of(s, symbols) for s in val.shape), val.dtype
    return None


def dim_of(size, symbols):
    """A size as jax takes it: an int, or for a symbolic size of torch.export the same
    expression over jax's symbolic dimensions."""
    if isinstance(size, int):
        return size
    if symbols is None:
        raise Unsupported([f"symbolic size {size}"])
    return _sympy_to_jax(size.node.expr, symbols)


def _sympy_to_jax(expr, symbols):
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        if expr.name not in symbols:  # a size computed from values (an unbacked symbol)
            raise Unsupported([f"size {expr} that depends on values"])
        return symbols[expr.name]
    args = [_sympy_to_jax(a, symbols) for a in expr.args]
    if expr.is_Add:
        return functools.reduce(operator.add, args)
    if expr.is_Mul:
        return functools.reduce(operator.mul, args)
    if expr.is_Pow and expr.args[1].is_Integer and int(expr.args[1]) >= 0:
        return args[0] ** int(expr.args[1])
    if isinstance(expr, FloorDiv):
        return args[0] // args[1]
    if isinstance(expr, (Mod, PythonMod)):
        return args[0] % args[1]
    raise Unsupported([f"symbolic size {expr}"])


def _cast_to(x, aval):
    shape, dtype = aval
    x = x.astype(pjrt.to_jax_dtype(dtype))
    return x if tuple(x.shape) == shape else jnp.broadcast_to(x, shape)


class _Step:
    """One node, ready to replay: how to compute it from the values before it."""
    __slots__ = ("node", "run")

    def __init__(self, node, run):
        self.node = node
        self.run = run  # run(env, seeds) -> the node's value


class GraphFunction:
    """`gm` as a jax function: `fn(inputs, seeds) -> (mutated, outputs)`.

    `inputs` are the values of the graph's tensor placeholders (`tensor_inputs`: their
    positions among all placeholders; the others are constants of the graph), `seeds` one
    integer per random op (`n_rng`), then the lifted scalars if any. `mutated` holds the new values of the inputs that
    `copy_` writes (`mutated_inputs`: their positions among the tensor inputs); `outputs`
    the graph's tensor outputs computed inside (`output_avals`). `output_refs` rebuilds
    the graph's output list: ('value', k) output k, ('input', i) tensor input i unchanged,
    ('alias', i) a new tensor with the value of input i (a detach or clone of an input the
    graph does not write), ('const', v) a Python value, v None for None. Outputs that alias
    one value (`x` and `x.detach()`) are one output of the function, not copies.
    `donor_marks` lists the inputs the graph marks for donation (`op_rules.SET_BUFFER_DONOR`
    on a placeholder: an alias inside), for the runner to mark their buffers at each call.

    With `defer_views`, an output that is a chain of view ops on an input the graph does not
    write (AOTAutograd saves `t(weight)` for the backward) is not computed inside either:
    ('view', (i, steps)), each step `(lowering, template, scalars, avals)` to apply to input
    i's value lazily, so that the program reading it folds the view into its own ops
    instead of this one writing a transposed copy of the weight.

    `symbols` maps the names of symbolic sizes (torch.export's dynamic dimensions) to jax's
    symbolic dimensions; without it every size must be concrete.

    With `collectives`, the graph may hold collectives (`xm.all_reduce`...): then
    `collective` is true, and the function must run under the replicas' mesh axis
    (`launch/replica_program`).

    With `lift_scalars` (StableHLO export, torch.compile), Scalar arguments other than 0 and 1
    are parameters (`constants`, their values; passed after the seeds), as torch_xla makes
    them device data, not inline constants. Ops of the namespaces in `custom_calls` become
    `stablehlo.custom_call`s named after the op (`custom_call_targets`). `scopes` maps fx
    nodes to a name the ops lowered from them carry in their locations.
    """

    def __init__(self, gm: fx.GraphModule, symbols=None, defer_views=False, lift_scalars=False,
                 custom_calls=frozenset(), scopes=None, collectives=False):
        self.gm = gm
        self.collectives, self.collective = collectives, False
        self.symbols = symbols
        self.defer_views = defer_views
        self.lift_scalars, self.custom_calls, self.scopes = lift_scalars, custom_calls, scopes or {}
        self.constants, self.custom_call_targets = [], set()
        self.input_avals, self.tensor_inputs, self.output_refs, self.output_avals = [], [], [], []
        self.n_rng = 0
        self.has_tensor_constants = False
        self._placeholders = {}   # fx node -> tensor input position
        self.input_nodes = self._placeholders
        self._constants = {}      # fx node -> Python value or jax array
        self._steps, unsupported = [], []
        self._mutations = []      # (tensor input position, fx node of the new value)
        self.donor_marks = []     # (tensor input position, whether to donate) the graph makes
        self.shardings = []       # the shardings its captured mark_sharding calls give, and
        self.input_marks = []     # (tensor input position, sharding) those of its inputs
        self._output_nodes = []
        self._marks = {}          # fx node -> its composite Mark (`lowering.composite`)
        n_placeholders = 0
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                if isinstance(node.meta.get("val"), torch.Tensor):
                    self.tensor_inputs.append(n_placeholders)
                self._placeholder(node, node.meta.get("val"))
                n_placeholders += 1
            elif node.op == "get_attr":
                self._constants[node] = self._attribute(node)
            elif node.op == "call_function":
                try:
                    self._steps.append(_Step(node, self._plan(node)))
                except Unsupported as e:
                    unsupported.extend(e.ops)
            elif node.op == "output":
                self._outputs(node)
            else:
                unsupported.append(f"{node.op} {node.target}")
        if unsupported:
            raise Unsupported(unsupported)
        self.mutated_inputs = [i for i, _ in self._mutations]
        self.written_from = [n.args[1] for _, n in self._mutations]  # the new values' nodes
        self.n_ops = len(self._steps)

    # ---- reading the graph ---------------------------------------------------------------

    def _placeholder(self, node, val):
        if isinstance(val, torch.Tensor):
            self._placeholders[node] = len(self.input_avals)
            self.input_avals.append(aval_of(val, self.symbols))
        else:
            self._constants[node] = val

    def _attribute(self, node):
        """A tensor the graph holds (a constant of the program)."""
        value = self.gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor):
            return value
        self.has_tensor_constants = True
        if value.device.type == "xla":
            v = unwrap(value)._value
            materialize([v])
            return v.data
        return pjrt.to_device_buffer(value, 0)  # inlined: the program's own constant

    def _outputs(self, node):
        (results,) = node.args
        written = {i for i, _ in self._mutations}
        computed = {}  # fx node -> its position among the function's outputs
        for r in (results if isinstance(results, (tuple, list)) else (results,)):
            if isinstance(r, fx.Node) and r in self._placeholders:
                self.output_refs.append(("input", self._placeholders[r]))
            elif isinstance(r, fx.Node) and isinstance(r.meta.get("val"), torch.Tensor):
                source = _alias_source(r)
                view = self._deferred_view(source, written) if self.defer_views else None
                if source in self._placeholders and self._placeholders[source] not in written:
                    self.output_refs.append(("alias", self._placeholders[source]))
                elif view is not None:
                    self.output_refs.append(("view", view))
                else:
                    if source not in computed:
                        computed[source] = len(self._output_nodes)
                        self._output_nodes.append(source)
                        self.output_avals.append(aval_of(r.meta["val"], self.symbols))
                    self.output_refs.append(("value", computed[source]))
            elif isinstance(r, fx.Node):
                self.output_refs.append(("const", self._static_value(r)))
            else:
                self.output_refs.append(("const", r))

    def _deferred_view(self, node, written):
        """(input position, steps) if `node` is a chain of view ops on an input the graph
        does not write, else None."""
        steps = []
        while node not in self._placeholders:
            view = _view_step(node, self.symbols)
            if view is None:
                return None
            steps.append(view)
            node = _alias_source(node.args[0])
        position = self._placeholders[node]
        return None if position in written else (position, tuple(reversed(steps)))

    def _static_value(self, node):
        """A non-tensor output (a size): computed on the graph's avals."""
        val = node.meta.get("val")
        if isinstance(val, (int, float, bool)) or val is None:
            return val
        raise Unsupported([f"{node.target} (symbolic output {val})"])

    def _plan(self, node):
        op = node.target
        if op is operator.getitem:
            source, index = node.args
            return lambda env, seeds: env[source][index]
        if op in _PYTHON_OPS:
            return lambda env, seeds: op(*fill_nodes(node.args, env), **fill_nodes(node.kwargs, env))
        if op in _SIZES:
            size = _SIZES[op]
            return lambda env, seeds: size(*fill_nodes(node.args, env))
        if op in _NO_VALUE:
            return lambda env, seeds: None
        if op in ALIASES or op is SET_BUFFER_DONOR:
            source = node.args[0]
            if op is SET_BUFFER_DONOR and source in self._placeholders:
                donate = node.args[1] if len(node.args) > 1 else node.kwargs["should_donoate"]
                self.donor_marks.append((self._placeholders[source], bool(donate)))
            return lambda env, seeds: env[source]
        if op in SHARDING_ANNOTATIONS:
            return self._plan_sharding(node.args[0], SHARDING_ANNOTATIONS[op](*node.args[1:]))
        if op is aten.copy.default or op is aten.copy_.default:
            return self._plan_copy(node)
        if op is aten._to_copy.default:
            return self._plan_to_copy(node)
        if isinstance(op, torch._ops.OpOverload) and op.namespace in self.custom_calls:
            return self._plan_custom_call(node)
        lowering = lookup(op) or lookup(_copy_variant(op))
        if lowering is None and isinstance(op, torch._ops.OpOverload) and has_own_kernel(op):
            return self._plan_own_kernel(node)
        if lowering is None:
            raise Unsupported([str(op)])
        mark = composite.mark_of(lowering, node.args, node.kwargs)
        if mark is not None:
            self._marks[node] = mark
        if lowering.dynamic_shape or (lowering.collective and not self.collectives):
            raise Unsupported([f"{op} ({'output shape depends on values' if lowering.dynamic_shape else 'collective'})"])
        self.collective |= lowering.collective
        if op in (aten.index.Tensor, aten._unsafe_index.Tensor, aten.index_put.default,
                  aten._unsafe_index_put.default):
            _check_indices(node)
        val = node.meta["val"]  # outputs the op leaves out (None) have no aval
        avals = tuple(aval_of(v, self.symbols) for v in (val if isinstance(val, (tuple, list)) else (val,))
                      if v is not None)
        if is_eval_batch_norm(op, node.args, node.kwargs):
            return self._plan_eval_batch_norm(node, lowering, avals)
        if op in _DEVICE_SHAPED:
            return self._plan_device_shaped(node, lowering, avals)
        template, in_nodes, scalars = _encode(op, node.args, node.kwargs, not lowering.static_scalars)
        scalar_values = self._scalar_values(scalars)
        structure = node.meta["val"]
        rng = self.n_rng if lowering.rng else None
        self.n_rng += bool(lowering.rng)

        def run(env, seeds):
            inputs = [env[n] for n in in_nodes]
            values = scalar_values(seeds)
            if rng is not None:
                values.append(seeds[rng])
            out = call_lowering(lowering, template, inputs, values, avals)
            if isinstance(structure, torch.Tensor):
                return out[0]
            present = iter(out)
            return tuple(None if v is None else next(present) for v in structure)
        return run

    def _plan_sharding(self, source, s):
        """A captured mark_sharding: its tensor's later uses read it laid out by `s` (an
        input is laid out so itself, in place, as mark_sharding does)."""
        self.shardings.append(s)
        if source in self._placeholders:
            self.input_marks.append((self._placeholders[source], s))

        def run(env, seeds):
            env[source] = jax.lax.with_sharding_constraint(env[source], s)
        return run

    def _plan_copy(self, node):
        dst, src = node.args[:2]
        aval = aval_of(node.meta["val"], self.symbols)
        if node.target is aten.copy_.default:
            while isinstance(dst, fx.Node) and dst.target is SET_BUFFER_DONOR:
                dst = dst.args[0]  # the input itself, as PyTorch returns it
            if dst not in self._placeholders:
                raise Unsupported([f"copy_ into {dst} (not an input of the graph)"])
            self._mutations.append((self._placeholders[dst], node))
        return lambda env, seeds: _cast_to(env[src], aval)

    def _plan_to_copy(self, node):
        source = node.args[0]
        target = node.kwargs.get("device")
        here = source.meta["val"].device if isinstance(source, fx.Node) else None
        if target is not None and here is not None and torch.device(target).type != here.type:
            raise Unsupported([f"_to_copy from {here} to {target} (a transfer)"])
        aval = aval_of(node.meta["val"], self.symbols)
        return lambda env, seeds: _cast_to(env[source], aval)

    def _plan_eval_batch_norm(self, node, lowering, avals):
        """Batch norm in evaluation: the normalised input, and empty saved statistics (as the
        engine gives them, and PyTorch's kernels)."""
        template, in_nodes, scalars = _encode(node.target, node.args, node.kwargs,
                                              not lowering.static_scalars)
        scalar_values = self._scalar_values(scalars)
        first = avals[:1]

        def run(env, seeds):
            inputs = [env[n] for n in in_nodes]
            out = call_lowering(lowering, template, inputs, scalar_values(seeds), first)
            rest = [jnp.zeros(s, pjrt.to_jax_dtype(d)) for s, d in avals[1:]]
            return (out[0], *rest)
        return run

    def _plan_device_shaped(self, node, lowering, avals):
        """An op whose auxiliary outputs PyTorch shapes differently on the CPU (embedding
        bags: `offset2bag`, `max_indices`), in a graph traced on CPU tensors (torch.export):
        the lowering gives the other devices' shapes; an output shaped otherwise in the graph
        is zeros of its shape if nothing reads it, else the graph cannot be one program."""
        device_avals = _meta_avals(node)
        read = {u.args[1] for u in node.users if u.target is operator.getitem}
        for k, (a, d) in enumerate(zip(avals, device_avals)):
            if a != d and k in read:
                raise Unsupported([f"{node.target} (output {k} is shaped for the CPU kernel)"])
        template, in_nodes, scalars = _encode(node.target, node.args, node.kwargs,
                                              not lowering.static_scalars)
        scalar_values = self._scalar_values(scalars)

        def run(env, seeds):
            inputs = [env[n] for n in in_nodes]
            out = call_lowering(lowering, template, inputs, scalar_values(seeds), device_avals)
            return tuple(o if a == d else jnp.zeros(a[0], pjrt.to_jax_dtype(a[1]))
                         for o, a, d in zip(out, avals, device_avals))
        return run

    def _scalar_values(self, scalars):
        """A node's Scalar arguments as jax values, from the call's parameters: inline
        constants, or (with `lift_scalars`) parameters after the seeds, but bools, 0 and 1."""
        slots = []
        for value in scalars:
            if self.lift_scalars and type(value) is not bool and value not in (0, 1):
                slots.append(len(self.constants))
                self.constants.append(value)
            else:
                slots.append(None)
        if all(k is None for k in slots):
            return lambda params: [jnp.asarray(v) for v in scalars]
        return lambda params: [jnp.asarray(v) if k is None else params[self.n_rng + k]
                               for v, k in zip(scalars, slots)]

    def _plan_custom_call(self, node):
        """An op kept as `stablehlo.custom_call @<op>` on its tensor arguments, with the
        node's output shapes (the op's other arguments are left out, as torch_xla does)."""
        name = str(node.target)
        in_nodes = [a for a in pytree.tree_leaves((node.args, node.kwargs)) if isinstance(a, fx.Node)]
        val = node.meta["val"]
        outs = val if isinstance(val, (tuple, list)) else (val,)
        if not all(isinstance(v, torch.Tensor) for v in outs):
            raise Unsupported([f"{name} (a custom call with outputs that are not tensors)"])
        results = [aval_of(v, self.symbols) for v in outs]
        self.custom_call_targets.add(name)

        def run(env, seeds):
            out = custom_call(*[env[n] for n in in_nodes], target=name, results=results)
            return tuple(out) if isinstance(val, (tuple, list)) else out[0]
        return run

    def _plan_own_kernel(self, node):
        """An op of another library whose own kernel takes XLA tensors (`op_rules`): the
        kernel traced once on XLA tensors of the node's input shapes, its ops lowered here as
        on the lazy path (a custom call it makes is one of this function's)."""
        op = node.target
        flat, spec = pytree.tree_flatten((node.args, node.kwargs))
        positions = [i for i, a in enumerate(flat) if isinstance(a, fx.Node)]
        in_nodes = [flat[i] for i in positions]
        vals = [n.meta.get("val") for n in in_nodes]
        if not all(isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in v.shape) for v in vals):
            raise Unsupported([f"{op} (its kernel takes arguments other than tensors of static shapes)"])
        examples = [torch.empty(tuple(v.shape), dtype=v.dtype, device="xla") for v in vals]

        def call(*tensors):
            filled = list(flat)
            for i, x in zip(positions, tensors):
                filled[i] = x
            args, kwargs = pytree.tree_unflatten(filled, spec)
            return op(*args, **kwargs)
        kernel = trace_own_kernel(call, examples, name=str(op))
        if kernel.captured:
            raise Unsupported([f"{op} (its kernel reads tensors other than its arguments)"])
        self.custom_call_targets |= targets_in(kernel.plan)
        single = isinstance(node.meta["val"], torch.Tensor)

        def run(env, seeds):
            out = kernel.callee.fn(*[env[n] for n in in_nodes], *kernel.scalars)
            return out[0] if single else tuple(out)
        return run

    # ---- the jax function ------------------------------------------------------------------

    def __call__(self, inputs, seeds=()):
        env = dict(self._constants)
        for node, pos in self._placeholders.items():
            env[node] = inputs[pos]
        steps = {step.node: step for step in self._steps}

        def evaluate(node, env):
            scope = self.scopes.get(node)
            if scope is None:
                return steps[node].run(env, seeds)
            with jax.named_scope(scope):
                return steps[node].run(env, seeds)

        if self._marks:
            composite.run_steps(list(steps), lambda n: [a for a in n.all_input_nodes if a in steps],
                                self._marks.get, evaluate, env)
        else:
            for node in steps:
                env[node] = evaluate(node, env)
        mutated = tuple(env[n] for _, n in self._mutations)
        return mutated, tuple(env[n] for n in self._output_nodes)


def _alias_source(node):
    """The node whose value `node` has (through detach, alias, clone)."""
    while isinstance(node, fx.Node) and node.op == "call_function" and node.target in ALIASES:
        node = node.args[0]
    return node


def _view_step(node, symbols):
    """`node` as a lazy op on its one tensor input (lowering, template, scalars, avals), if
    it is a view op (one with a `_copy` form, as the lazy path records views) or that form."""
    if not (isinstance(node, fx.Node) and node.op == "call_function"):
        return None
    lowering = lookup(_copy_variant(node.target)) or (lookup(node.target) if _is_view_copy(node.target) else None)
    if lowering is None or lowering.dynamic_shape or lowering.rng or lowering.collective:
        return None
    template, in_nodes, scalars = _encode(node.target, node.args, node.kwargs, not lowering.static_scalars)
    val = node.meta.get("val")
    if len(in_nodes) != 1 or in_nodes[0] is not node.args[0] or not isinstance(val, torch.Tensor):
        return None
    try:
        aval = aval_of(val, symbols)
    except Unsupported:
        return None
    return lowering, template, tuple(scalars), (aval,)


def _meta_avals(node):
    """The output avals of `node`'s op on meta tensors (PyTorch's shapes for devices other
    than the CPU)."""
    def meta(a):
        if isinstance(a, fx.Node):
            v = a.meta["val"]
            if not all(isinstance(d, int) for d in v.shape):
                raise Unsupported([f"{node.target} with symbolic sizes"])
            return torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
        return a
    out = node.target(*[meta(a) for a in node.args], **{k: meta(v) for k, v in node.kwargs.items()})
    return tuple(aval_of(o) for o in out)


def _is_view_copy(op) -> bool:
    """Whether `op` is the `_copy` form of a view op (`t_copy` of `t`)."""
    if not isinstance(op, torch._ops.OpOverload) or not op._schema.name.endswith("_copy"):
        return False
    packet = getattr(aten, op._schema.name.split("::")[1][:-len("_copy")], None)
    view = getattr(packet, op._overloadname, None) if packet is not None else None
    return view is not None and _copy_variant(view) is op


def _check_indices(node):
    """Boolean masks as indices select a number of elements that depends on their values,
    unless one mask alone indexes `index_put` (then the result keeps the input's shape)."""
    indices = node.args[1]
    masks = [i for i in indices if isinstance(i, fx.Node)
             and i.meta["val"].dtype in (torch.bool, torch.uint8)]
    lone = len([i for i in indices if i is not None]) == 1
    if masks and not (lone and node.target in (aten.index_put.default, aten._unsafe_index_put.default)):
        raise Unsupported([f"{node.target} with a boolean mask (output shape depends on values)"])


def fill_nodes(obj, env):
    """`obj` (a node's arguments) with each fx node replaced by its value in `env`."""
    if isinstance(obj, fx.Node):
        return env[obj]
    if isinstance(obj, (tuple, list)):
        return type(obj)(fill_nodes(o, env) for o in obj)
    if isinstance(obj, dict):
        return {k: fill_nodes(v, env) for k, v in obj.items()}
    return obj


class _Encoding(ArgumentEncoder):
    """A graph node's arguments as the lazy path encodes an op's (`ir.ArgumentEncoder`):
    here the graph's nodes are the inputs, and fx's immutable lists are lists."""
    __slots__ = ()

    def input(self, obj, t):
        if isinstance(obj, fx.Node):
            self.inputs.append(obj)
            return len(self.inputs) - 1
        return None

    def constant(self, obj, t, dynamic):
        if isinstance(obj, (tuple, list)):
            return tuple(self.encode(o, dynamic) for o in obj)
        return obj


def _encode(op, args, kwargs, dynamic):
    """The node's argument template for `call_lowering`, its input nodes and its scalars:
    numbers at Scalar-typed positions are parameters (weakly typed values, as on the lazy
    path; constants for lowerings with static scalars)."""
    flags, names = scalar_arguments(op) if dynamic else ((), frozenset())
    e = _Encoding()
    template = e.encode_call(args, kwargs, flags, names)
    return template, e.inputs, e.scalars
