"""Exporting PyTorch programs to StableHLO, and running them again from disk.

`exported_program_to_stablehlo(torch.export.export(model, args))` lowers the program with the
same lowerings as the lazy path (the engine's graph capture, `torch_xla._lazy.graph_capture`)
into one StableHLO module: a `StableHLOGraphModule` that runs on the XLA device when called
like the model, and gives its StableHLO text and bytecode. `save_as_stablehlo` /
`save_torch_model_as_stablehlo` write a directory that `StableHLOGraphModule.load` runs again
without the model's code:

    functions/forward.bytecode   StableHLO portable artifact (MLIR bytecode)
    functions/forward.mlir       its text (with `include_human_readable_text`)
    functions/forward.meta       JSON: input and output signatures, where inputs come from
    functions/forward.jax        the module in jax's serialized form (what `load` runs)
    data/NAME                    each weight, as a NumPy .npy file (with `save_weights`)
    constants/N                  each constant input (`inline_all_constant=False`), .npy

Dimensions marked dynamic in `torch.export` stay symbolic in the module.
"""
import dataclasses
import enum
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np
import torch
from torch.utils import _pytree as pytree

from torch_xla._lazy.graph_capture import decompose as _decompose, export as _export


@dataclass
class StableHLOExportOptions:
    """Options of the export, as in torch_xla. The program is traced on the exported
    program's own example shapes, so `override_tracing_arguments`/`_kwargs` only matter as
    the inputs `save_torch_model_as_stablehlo` exports with."""
    include_human_readable_text: bool = True
    override_tracing_arguments: Optional[Tuple[Any]] = None
    override_tracing_kwargs: Optional[Mapping[str, Any]] = None
    save_weights: bool = True
    # Inline all constants (the ops' Scalar arguments) in StableHLO if True; otherwise only
    # 0 and 1 are, the others are inputs of the module (InputLocation.constant, saved in
    # constants/).
    inline_all_constant: bool = True
    # Whether to export the weights
    export_weights: bool = True
    # Namespaces of ops (e.g. "my_lib") that become stablehlo.custom_call @<op> on their
    # tensor arguments, with the ops' output shapes; a runtime that runs the module must
    # provide them.
    custom_ops_allowed_in_graph: Set[str] = field(default_factory=set)
    # Each op's location (loc(...) in the text) names the fx node it comes from: the node's
    # metadata (stack trace, module stack, source function) as JSON.
    export_node_metadata: bool = False


class VariableType(enum.Enum):
    INPUT_ARG = "input_arg"
    PARAMETER = "parameter"
    CONSTANT = "constant"
    SEED = "seed"  # a random op's seed, drawn from the device's generator at each call


@dataclass
class VariableSignature:
    shape: List[Any]
    dtype: str
    dynamic_dims: List[int] = dataclasses.field(default_factory=list)


@dataclass
class InputLocation:
    type_: VariableType
    position: int = -1
    name: str = ""

    @classmethod
    def parameter(cls, name: str):
        return cls(type_=VariableType.PARAMETER, name=name)

    @classmethod
    def input_arg(cls, position: int):
        return cls(type_=VariableType.INPUT_ARG, position=position)

    @classmethod
    def constant(cls, position):
        return cls(type_=VariableType.CONSTANT, position=position)

    @classmethod
    def seed(cls, position):
        return cls(type_=VariableType.SEED, position=position)


@dataclass
class StableHLOFunctionMeta:
    name: str
    stablehlo_version: str
    input_signature: List[VariableSignature]
    output_signature: List[VariableSignature]
    input_locations: List[InputLocation]
    unused_inputs: List[Tuple[InputLocation, VariableSignature]]
    input_pytree_spec: Optional[str] = None
    output_pytree_spec: Optional[str] = None


@dataclass
class StableHLOFunc:
    meta: StableHLOFunctionMeta
    bytecode: bytes
    text: Optional[str]
    module: Any = None  # the module as it runs here (saved in jax's serialized form)


@dataclass
class StableHLOModelBundle:
    state_dict: Dict[str, Any]          # weights as NumPy arrays
    additional_constants: List[np.ndarray]
    stablehlo_funcs: List[StableHLOFunc]


class StableHLOJSONSerializer(json.JSONEncoder):
    def default(self, obj):
        if dataclasses.is_dataclass(obj):
            return dataclasses.asdict(obj)
        if isinstance(obj, VariableType):
            return obj.value
        return super().default(obj)


def stablehlo_obj_hook(dct):
    """json.load's object hook rebuilding the metadata dataclasses."""
    for cls in (StableHLOFunctionMeta, VariableSignature, InputLocation):
        if {f.name for f in dataclasses.fields(cls)} == set(dct):
            if cls is InputLocation:
                dct = dict(dct, type_=VariableType(dct["type_"]))
            return cls(**dct)
    return dct


class StableHLOGraphModule:
    """A program exported to StableHLO, run on the XLA device (`xla:0`)."""

    def __init__(self, bundle: StableHLOModelBundle):
        self._bundle = bundle
        self._name_to_stablehlo = {func.meta.name: func for func in bundle.stablehlo_funcs}
        self._default_method = bundle.stablehlo_funcs[0].meta.name
        self._weights = {}  # name -> the weight on the device, made at the first call

    def evaluate(self, method_name, args):
        func = self._name_to_stablehlo[method_name]
        flat = pytree.tree_flatten(args)[0] if func.meta.input_pytree_spec is not None else list(args)
        inputs = []
        for loc in func.meta.input_locations:
            if loc.type_ == VariableType.PARAMETER:
                inputs.append(self._weight(loc.name))
            elif loc.type_ == VariableType.CONSTANT:
                inputs.append(torch.from_numpy(np.asarray(self._bundle.additional_constants[loc.position])))
            elif loc.type_ == VariableType.SEED:
                inputs.append(None)
            else:
                inputs.append(flat[loc.position])
        results = func.module.run(inputs)
        if func.meta.output_pytree_spec is not None:
            return pytree.tree_unflatten(results, pytree.treespec_loads(func.meta.output_pytree_spec))
        return results

    def _weight(self, name):
        weight = self._weights.get(name)
        if weight is None:
            if name not in self._bundle.state_dict:
                raise RuntimeError(f"weight {name!r} is not in this module (exported with "
                                   "export_weights=False, or saved with save_weights=False)")
            weight = self._weights[name] = torch.from_numpy(
                np.asarray(self._bundle.state_dict[name])).to("xla")
        return weight

    def get_stablehlo_bytecode(self, method_name=None) -> bytes:
        return self._name_to_stablehlo[method_name or self._default_method].bytecode

    def get_stablehlo_text(self, method_name=None) -> str:
        func = self._name_to_stablehlo[method_name or self._default_method]
        if func.text is None:
            raise RuntimeError("this module was exported without text "
                               "(include_human_readable_text=False)")
        return func.text

    def save(self, directory_path, options: Optional[StableHLOExportOptions] = None):
        _save_program_bundle(self._bundle, directory_path, options)

    @classmethod
    def load(cls, directory_path):
        return cls(_load_program_bundle(directory_path))

    def __call__(self, *args):
        return self.evaluate(self._default_method, args)


def _signature(aval):
    shape, dtype, dynamic = aval
    return VariableSignature(shape=shape, dtype=dtype, dynamic_dims=dynamic)


def _location(kind, where):
    if kind == "parameter":
        return InputLocation.parameter(where)
    if kind == "seed":
        return InputLocation.seed(where)
    if kind == "constant":
        return InputLocation.constant(where)
    return InputLocation.input_arg(where)


def _dumps(spec) -> str:
    try:
        return pytree.treespec_dumps(spec)
    except NotImplementedError:  # a type pytree cannot name (torch.return_types): tuples
        return pytree.treespec_dumps(pytree.tree_structure(_plain(pytree.tree_unflatten(range(spec.num_leaves), spec))))


def _plain(tree):
    """`tree` with its named tuples (torch.return_types) as plain tuples, nesting kept."""
    if isinstance(tree, tuple):
        return tuple(_plain(t) for t in tree)
    if isinstance(tree, list):
        return [_plain(t) for t in tree]
    if isinstance(tree, dict):
        return {k: _plain(v) for k, v in tree.items()}
    return tree


def _run_decompositions(exported_model):
    """`exported_model` decomposed as its export decomposes it: down to ops with lowerings."""
    return _decompose.decompose_exported(exported_model)


def _exported_program_to_stablehlo_bundle(exported_model, options) -> StableHLOModelBundle:
    graph = _export.export_program(exported_model, inline_constants=options.inline_all_constant,
                                   custom_calls=frozenset(options.custom_ops_allowed_in_graph),
                                   node_metadata=options.export_node_metadata)
    args = exported_model.example_inputs[0] if exported_model.example_inputs else ()
    flat_args = pytree.tree_flatten(args)[0]
    unused = []
    for i in graph.unused_inputs:
        arg = flat_args[i] if i < len(flat_args) else None
        if isinstance(arg, torch.Tensor):
            signature = VariableSignature(list(arg.shape), str(arg.dtype).removeprefix("torch."))
        else:
            signature = VariableSignature([], type(arg).__name__)
        unused.append((InputLocation.input_arg(i), signature))
    meta = StableHLOFunctionMeta(
        name="forward", stablehlo_version=graph.stablehlo_version,
        input_signature=[_signature(a) for a in graph.input_avals],
        output_signature=[_signature(a) for a in graph.output_avals],
        input_locations=[_location(kind, where) for kind, where in graph.input_locations],
        unused_inputs=unused,
        input_pytree_spec=_dumps(graph.in_spec),
        output_pytree_spec=_dumps(graph.out_spec))
    state = {name: t.numpy() for name, t in graph.state.items()} if options.export_weights else {}
    func = StableHLOFunc(meta, graph.bytecode(),
                         graph.text() if options.include_human_readable_text else None,
                         graph.module())
    return StableHLOModelBundle(state_dict=state, additional_constants=graph.constants,
                                stablehlo_funcs=[func])


def exported_program_to_stablehlo(exported_model: "torch.export.ExportedProgram",
                                  options: Optional[StableHLOExportOptions] = None) -> StableHLOGraphModule:
    """A callable backed by StableHLO computing what `exported_model` computes (called with
    the same arguments as the exported module)."""
    return StableHLOGraphModule(_exported_program_to_stablehlo_bundle(
        exported_model, options or StableHLOExportOptions()))


def save_as_stablehlo(exported_model: "torch.export.ExportedProgram", stablehlo_dir: os.PathLike,
                      options: Optional[StableHLOExportOptions] = None):
    """Exports `exported_model` to StableHLO and writes it into `stablehlo_dir` (see the
    module docstring for the layout); `StableHLOGraphModule.load` runs it again."""
    options = options or StableHLOExportOptions()
    exported_program_to_stablehlo(exported_model, options).save(stablehlo_dir, options)


def save_torch_model_as_stablehlo(torchmodel: torch.nn.Module, args: Tuple[Any],
                                  path: os.PathLike,
                                  options: Optional[StableHLOExportOptions] = None) -> None:
    """`torch.export.export(torchmodel, args)`, exported to StableHLO and saved at `path`."""
    options = options or StableHLOExportOptions()
    options.override_tracing_arguments = args
    save_as_stablehlo(torch.export.export(torchmodel, tuple(args)), path, options)


def _save_program_bundle(bundle, stablehlo_dir, options=None) -> None:
    options = options or StableHLOExportOptions()
    if options.save_weights:
        os.makedirs(os.path.join(stablehlo_dir, "data"), exist_ok=True)
        for key, val in bundle.state_dict.items():
            with open(os.path.join(stablehlo_dir, "data", key), "wb") as f:
                np.save(f, val)
    func_dir = os.path.join(stablehlo_dir, "functions")
    os.makedirs(func_dir, exist_ok=True)
    for func in bundle.stablehlo_funcs:
        base = os.path.join(func_dir, func.meta.name)
        with open(base + ".meta", "w") as f:
            json.dump(func.meta, f, cls=StableHLOJSONSerializer)
        with open(base + ".bytecode", "wb") as f:
            f.write(func.bytecode)
        with open(base + ".jax", "wb") as f:
            f.write(func.module.serialized())
        if func.text is not None:
            with open(base + ".mlir", "w") as f:
                f.write(func.text)
    const_dir = os.path.join(stablehlo_dir, "constants")
    os.makedirs(const_dir, exist_ok=True)
    for i, constant in enumerate(bundle.additional_constants):
        with open(os.path.join(const_dir, str(i)), "wb") as f:
            np.save(f, constant)


def _files(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def _load_program_bundle(stablehlo_dir) -> StableHLOModelBundle:
    state = {name: np.load(os.path.join(stablehlo_dir, "data", name))
             for name in _files(os.path.join(stablehlo_dir, "data"))}
    const_dir = os.path.join(stablehlo_dir, "constants")
    constants = [np.load(os.path.join(const_dir, name))
                 for name in sorted(_files(const_dir), key=int)]
    func_dir = os.path.join(stablehlo_dir, "functions")
    funcs = []
    for name in _files(func_dir):
        if not name.endswith(".meta"):
            continue
        base = os.path.join(func_dir, name[:-len(".meta")])
        with open(base + ".meta") as f:
            meta = json.load(f, object_hook=stablehlo_obj_hook)
        with open(base + ".bytecode", "rb") as f:
            bytecode = f.read()
        with open(base + ".jax", "rb") as f:
            module = _export.Module.load(f.read())
        text = None
        if os.path.exists(base + ".mlir"):
            with open(base + ".mlir") as f:
                text = f.read()
        funcs.append(StableHLOFunc(meta, bytecode, text, module))
    return StableHLOModelBundle(state_dict=state, additional_constants=constants, stablehlo_funcs=funcs)
