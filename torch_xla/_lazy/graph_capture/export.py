"""An exported program (`torch.export`) as a StableHLO module, through `jax.export`.

`export_program(ep)` brings the program down to ops with lowerings (PyTorch's export
decompositions, less those of ops lowered as they are), lowers its graph with
`fx_lowering` and exports the jax function with `jax.export`: StableHLO text, portable
bytecode, and a `Module` that runs it and serializes it in jax's form, which runs again
without the model's code (`Module.load`). The module's inputs are the graph's tensor
inputs in order: the program's state (parameters, buffers, constant tensors, by name) and
the user's inputs (by position), one int64 seed per random op, and the lifted constants if
asked for. Its outputs are the user outputs; the program's writes to its buffers are left
out, as torch_xla does. Dimensions marked dynamic in torch.export are symbolic dimensions
of the module.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import torch
from torch._export.serde.serialize import GraphModuleSerializer
from jaxlib.mlir.dialects import stablehlo as hlo

from ..base import counters
from ..runtime import pjrt, runner
from ..graph import rng
from ..step.execution import materialize
from ..graph.ir import Value
from ..lowering import composite
from ..graph.tensor import XLATensor, to_functional, unwrap, wrap
from .decompose import decompose_exported
from .fx_lowering import GraphFunction, Unsupported

_STATE_KINDS = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")


class ExportedGraph:
    """The StableHLO module of a program and what its inputs are.

    `input_locations`: per module input, ('parameter', state name), ('input_arg', position
    among the user's flattened inputs), ('seed', k) or ('constant', k) (`constants[k]`, a
    NumPy scalar). `state`: the program's state tensors
    by name (CPU). `input_avals`/`output_avals`: (shape, dtype name, dynamic dimensions).
    """

    def __init__(self, exported, input_locations, state, input_avals, output_avals,
                 unused_inputs, in_spec, out_spec, constants=()):
        self.exported = exported
        self.constants = list(constants)
        self.input_locations = input_locations
        self.state = state
        self.input_avals = input_avals
        self.output_avals = output_avals
        self.unused_inputs = unused_inputs
        self.in_spec, self.out_spec = in_spec, out_spec

    @property
    def stablehlo_version(self) -> str:
        """The StableHLO version of the bytecode: jax writes it for consumers a month old."""
        return hlo.get_version_from_compatibility_requirement(
            hlo.StablehloCompatibilityRequirement.WEEK_4)

    def text(self) -> str:
        return composite.upstream_names(self.exported.mlir_module())

    def bytecode(self) -> bytes:
        """The module as a StableHLO portable artifact (versioned MLIR bytecode)."""
        return bytes(self.exported.mlir_module_serialized)

    def module(self) -> "Module":
        return Module(self.exported)


def export_program(ep, platforms=None, inline_constants=True, custom_calls=frozenset(),
                   node_metadata=False) -> ExportedGraph:
    """`ep` (a `torch.export.ExportedProgram`) as a StableHLO module for `platforms`
    (default: the XLA devices' platform). Without `inline_constants`, Scalar arguments
    other than 0 and 1 are inputs of the module (`constants`); ops of the namespaces in
    `custom_calls` are `stablehlo.custom_call`s; with `node_metadata`, each op's location
    names the fx node it comes from (its metadata as JSON, as torch.export serializes it);
    an op whose result `xla::write_mlir_debuginfo` names, by that name."""
    ep = decompose_exported(ep, kept_namespaces=custom_calls)
    gm, signature = ep.graph_module, ep.graph_signature
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    symbols = _symbols(placeholders)
    scopes = {**(_metadata(ep) if node_metadata else {}), **_debuginfo_names(gm)}
    fn = GraphFunction(gm, symbols=symbols, lift_scalars=not inline_constants,
                       custom_calls=custom_calls, scopes=scopes)
    if fn.mutated_inputs:
        raise Unsupported([f"copy_ into an input of the exported program ({len(fn.mutated_inputs)})"])
    state = {**dict(ep.named_parameters()), **dict(ep.named_buffers()), **ep.constants}
    locations, avals, user_position = [], [], 0
    tensor_inputs = set(fn.tensor_inputs)
    for position, (node, spec) in enumerate(zip(placeholders, signature.input_specs)):
        kind = spec.kind.name
        if kind == "USER_INPUT":
            user_position += 1
        if position not in tensor_inputs:
            continue
        if kind in _STATE_KINDS:
            locations.append(("parameter", spec.target))
        elif kind == "USER_INPUT":
            locations.append(("input_arg", user_position - 1))
        else:
            raise Unsupported([f"exported program input of kind {kind}"])
        avals.append(_signature(node.meta["val"]))
    locations += [("seed", k) for k in range(fn.n_rng)]
    avals += [((), "int64", [])] * fn.n_rng
    constants = [np.asarray(jnp.asarray(c)) for c in fn.constants]
    locations += [("constant", k) for k in range(len(constants))]
    avals += [((), str(c.dtype), []) for c in constants]
    used = {p for kind, p in locations if kind == "input_arg"}
    unused = [i for i in range(user_position) if i not in used]
    user_outputs = [i for i, spec in enumerate(signature.output_specs)
                    if spec.kind.name == "USER_OUTPUT"]
    refs = [fn.output_refs[i] for i in user_outputs]
    if any(kind == "const" for kind, _ in refs):
        raise Unsupported(["a non-tensor output of the exported program"])
    n_inputs = len(fn.input_avals)

    def module(*flat):
        inputs, params = flat[:n_inputs], flat[n_inputs:]  # params: seeds, then constants
        _, outs = fn(inputs, params)
        return tuple(outs[x] if kind == "value" else inputs[x] for kind, x in refs)

    specs = [jax.ShapeDtypeStruct(shape, pjrt.to_jax_dtype(dtype)) for shape, dtype in fn.input_avals]
    specs += [jax.ShapeDtypeStruct((), np.int64)] * fn.n_rng
    # weakly typed, as the Python numbers they stand for (`x_f16 * 2.5` stays float16)
    specs += [jax.ShapeDtypeStruct((), c.dtype, weak_type=True) for c in constants]
    platforms = platforms or (pjrt.jax_device(0).platform,)
    checks = [jax.export.DisabledSafetyCheck.custom_call(name) for name in sorted(fn.custom_call_targets)]
    try:
        exported = runner.export(module, specs, platforms=platforms, disabled_checks=checks)
    except ValueError as e:
        if "custom calls whose targets have no compatibility guarantees" not in str(e):
            raise
        # a lowering that jax implements with a library call of its own (LAPACK's ormqr...):
        # a portable module cannot hold it
        raise Unsupported([f"an op jax lowers to an unversioned custom call ({str(e).splitlines()[-1].strip()})"]) from None
    outputs = [_signature(gm_output) for gm_output in _output_vals(gm, user_outputs)]
    state = {name: t.detach().cpu() for name, t in state.items()
             if ("parameter", name) in locations}
    return ExportedGraph(exported, locations, state, avals, outputs, unused,
                         ep.call_spec.in_spec, ep.call_spec.out_spec, constants)


def _metadata(ep):
    """fx node -> its metadata as torch.export serializes it (stack trace, module stack,
    source function), as JSON."""
    serializer = GraphModuleSerializer(ep.graph_signature, ep.module_call_graph)
    return {node: json.dumps(serializer.serialize_metadata(node)) for node in ep.graph.nodes
            if node.op == "call_function"}


def _debuginfo_names(gm):
    """fx node -> the name `xla::write_mlir_debuginfo(node, name)` gives its op's location
    (`torch_xla.experimental.xla_mlir_debuginfo`)."""
    return {node.args[0]: node.args[1] for node in gm.graph.nodes
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and node.target._schema.name == "xla::write_mlir_debuginfo"}


def _symbols(placeholders):
    """jax symbolic dimensions for the symbolic sizes of the program's inputs (one scope)."""
    names = []
    for node in placeholders:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for s in val.shape:
                if isinstance(s, torch.SymInt):
                    for sym in s.node.expr.free_symbols:
                        if sym.name not in names:
                            names.append(sym.name)
    if not names:
        return {}
    dims = jax.export.symbolic_shape(", ".join(names))
    return dict(zip(names, dims))


def _signature(val):
    shape = [int(s) if isinstance(s, int) else str(s) for s in val.shape]
    dynamic = [i for i, s in enumerate(val.shape) if not isinstance(s, int)]
    return shape, str(val.dtype).removeprefix("torch."), dynamic


def _output_vals(gm, positions):
    (results,) = next(n for n in gm.graph.nodes if n.op == "output").args
    return [results[i].meta["val"] for i in positions]


# ---- running a module ------------------------------------------------------------------------

class Module:
    """A StableHLO module ready to run on the XLA devices: from an export, or read back
    from jax's serialized form (`Module.load`), compiled once per input shapes."""

    def __init__(self, exported):
        self.exported = exported
        self._key = object()  # this module's part of its programs' keys

    def _program(self, arrays, device):
        """The module compiled for `arrays` on XLA device `device` (by the runner, once per
        input shapes and dtypes)."""
        placement = runner.on_device(device)
        key = (self._key, tuple((tuple(a.shape), str(a.dtype)) for a in arrays))
        found = runner.lookup(key, placement)
        if found is None:
            found = runner.compile(self.exported.call, tuple(arrays), placement, key=key)
        return found

    @classmethod
    def load(cls, serialized: bytes) -> "Module":
        return cls(jax.export.deserialize(bytearray(serialized)))

    def serialized(self) -> bytes:
        return bytes(self.exported.serialize())

    def run(self, inputs, device: int = 0):
        """Runs the module on XLA device `device`: `inputs` are its inputs (tensors on any
        device; None for a seed, drawn from the device's generator), the results XLA
        tensors."""
        arrays = []
        for x in inputs:
            if x is None:
                arrays.append(np.int64(rng.next_seed(device)))
            elif isinstance(x, torch.Tensor) and x.device.type == "xla":
                v = x._value if isinstance(x, XLATensor) else unwrap(x)._value
                materialize([v])
                arrays.append(v.data)
            else:
                arrays.append(pjrt.to_device_buffer(torch.as_tensor(x), device))
        counters.count("StableHLOExecute")
        outs = runner.execute(self._program(arrays, device), *arrays)
        return [to_functional(wrap(Value(tuple(o.shape), pjrt.to_torch_dtype(o.dtype), device, data=o)))
                for o in outs]
