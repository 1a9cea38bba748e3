"""A compiled jax program (`jax.stages.Compiled`) taken apart into its XLA executable's bytes
and a plain description, and put back together: what `jax.experimental.serialize_executable`
does, without pickle. jax's format is a pickle of its internal objects, and unpickling runs
whatever code the bytes name, so a file someone else wrote would run their code on loading;
here nothing read from a file is more than data: the executable's bytes go to XLA's own
deserializer (as jax's persistent compilation cache does) and the description is strings,
numbers, booleans and lists of them (JSON), checked and turned into jax's objects here.

Described are programs on one device without effects, host callbacks, mutable arrays or
constants, whose arguments and results are nested tuples, lists, dicts and None (the
engine's programs); `describe` raises `ValueError` for any other, and for a program its
description would not rebuild exactly: it rebuilds it (from the same executable) and
compares every part jax keeps.

jax makes a `Compiled` from an executable only by unpickling one, so this module uses its
private classes (`UnloadedMeshExecutable`, `AllArgsInfo`, `DebugInfo`, `DeviceList`), and so
it sits in the jax compatibility package; each is called by tests/_lazy/base/jax_compat/test_executables.py, and a jax whose
`UnloadedMeshExecutable` has other fields than these describes nothing (its programs are
compiled, not stored).
"""
import dataclasses

import jax
import numpy as np
from jax._src import core as _core
from jax._src.interpreters import pxla as _pxla
from jax._src.lib import xla_client as _xla_client
from jax.experimental.layout import Layout
from jax.sharding import SingleDeviceSharding

_FIELDS = ("xla_executable", "device_list", "backend", "input_avals", "input_shardings",
           "output_avals", "output_shardings", "committed", "name", "unordered_effects",
           "ordered_effects", "keepalive", "host_callbacks", "kept_var_idx", "mut",
           "xla_in_layouts", "dispatch_in_layouts", "xla_out_layouts", "all_args_info",
           "pgle_profiler")


def supported() -> bool:
    """Whether this jax's compiled programs have the parts described here."""
    return tuple(f.name for f in dataclasses.fields(_pxla.UnloadedMeshExecutable)) == _FIELDS


# ---- plain data -> jax's objects, checking every value's type ----------------------------

def _checked(value, kind, what):
    if type(value) is not kind:
        raise ValueError(f"{what}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _ints(value, what):
    return tuple(_checked(v, int, what) for v in _checked(value, list, what))


def _strings_or_none(value, what):
    return None if value is None else tuple(_checked(v, str, what) for v in _checked(value, list, what))


def _aval(value):
    shape, dtype, weak_type = _checked(value, list, "aval")
    dtype = np.dtype(jax.numpy.dtype(_checked(dtype, str, "dtype")))
    if dtype.name != value[1] or dtype.hasobject:
        raise ValueError(f"dtype {value[1]!r}")
    return _core.ShapedArray(_ints(shape, "shape"), dtype, weak_type=_checked(weak_type, bool, "weak_type"))


def _layout(value):
    if value is None:
        return None
    major_to_minor, tiling, element_bits = _checked(value, list, "layout")
    tiling = None if tiling is None else tuple(_ints(t, "tiling") for t in _checked(tiling, list, "tiling"))
    return Layout(_ints(major_to_minor, "layout"), tiling, _checked(element_bits, int, "layout"))


def _sharding(memory_kind, device):
    memory_kind = None if memory_kind is None else _checked(memory_kind, str, "memory_kind")
    return SingleDeviceSharding(device, memory_kind=memory_kind)


def _tree(value):
    """A pytree skeleton (leaves 0) of an encoded tree structure (see `_encode_tree`)."""
    if value == "*":
        return 0
    if value is None:
        return None
    (kind, children), = _checked(value, dict, "tree").items()
    children = _checked(children, list, "tree")
    if kind == "tuple":
        return tuple(_tree(c) for c in children)
    if kind == "list":
        return [_tree(c) for c in children]
    if kind == "dict":
        return {_checked(k, str, "key"): _tree(c) for k, c in map(tuple, children)}
    raise ValueError(f"tree node {kind!r}")


# ---- jax's objects -> plain data ---------------------------------------------------------

def _encode_aval(aval):
    return [list(aval.shape), aval.dtype.name, aval.weak_type]


def _encode_layout(layout):
    if layout is None:
        return None
    if type(layout) is not Layout:
        raise ValueError(f"layout {layout!r}")
    tiling = None if layout.tiling is None else [list(t) for t in layout.tiling]
    return [list(layout.major_to_minor), tiling, layout.sub_byte_element_size_in_bits]


def _encode_tree(treedef):
    if jax.tree_util.treedef_is_leaf(treedef) and treedef.num_leaves == 1:
        return "*"
    kind, keys = treedef.node_data()
    children = [_encode_tree(c) for c in treedef.children()]
    if kind is type(None):
        return None
    if kind is tuple or kind is list:
        return {kind.__name__: children}
    if kind is dict and all(type(k) is str for k in keys):
        return {"dict": [[k, c] for k, c in zip(keys, children)]}
    raise ValueError(f"tree node {kind.__name__}")


def _encode_sharding(sharding, device):
    if type(sharding) is not SingleDeviceSharding or sharding.device_set != {device}:
        raise ValueError(f"sharding {sharding!r}")
    return sharding.memory_kind


def _parts(compiled):
    unloaded = getattr(compiled._executable, "_unloaded_executable", None)
    if type(unloaded) is not _pxla.UnloadedMeshExecutable or not supported():
        raise ValueError("not a program this jax's executables describe")
    return unloaded


def describe(compiled, device):
    """(the description, the executable's bytes) of `compiled`, a program on `device`."""
    unloaded = _parts(compiled)
    if compiled._params.const_args or compiled._params.is_high:
        raise ValueError("a program with constants or non-array types")
    debug = unloaded.all_args_info.debug_info.resolve_result_paths()
    args = jax.tree.leaves(compiled.args_info)
    description = {
        "name": unloaded.name, "committed": unloaded.committed,
        "in_tree": _encode_tree(compiled.in_tree), "out_tree": _encode_tree(compiled.out_tree),
        "no_kwargs": compiled._no_kwargs,
        "args": [[_encode_aval(a._aval), a.donated] for a in args],
        "traced_for": debug.traced_for, "func_src_info": debug.func_src_info,
        "arg_names": None if debug.arg_names is None else list(debug.arg_names),
        "result_paths": None if debug.result_paths is None else list(debug.result_paths),
        "kept": sorted(unloaded.kept_var_idx),
        "inputs": [[_encode_aval(a), _encode_sharding(s, device), _encode_layout(x), _encode_layout(d)]
                   for a, s, x, d in zip(unloaded.input_avals, unloaded.input_shardings,
                                         unloaded.xla_in_layouts, unloaded.dispatch_in_layouts,
                                         strict=True)],
        "outputs": [[_encode_aval(a), _encode_sharding(s, device), _encode_layout(x)]
                    for a, s, x in zip(unloaded.output_avals, unloaded.output_shardings,
                                       unloaded.xla_out_layouts, strict=True)],
    }
    executable = unloaded.xla_executable
    rebuilt = _rebuild(description, executable, device)
    if not _same(rebuilt, compiled):
        raise ValueError("the description does not rebuild the program exactly")
    return description, executable.client.serialize_executable(executable)


def _same(a, b) -> bool:
    ua, ub = _parts(a), _parts(b)
    return (all(getattr(ua, f) == getattr(ub, f) for f in _FIELDS if f != "all_args_info")
            and ua.all_args_info.in_avals == ub.all_args_info.in_avals
            and ua.all_args_info.debug_info == ub.all_args_info.debug_info.resolve_result_paths()
            and a.in_tree == b.in_tree and a.out_tree == b.out_tree and a._no_kwargs == b._no_kwargs
            and jax.tree.leaves(a.args_info) == jax.tree.leaves(b.args_info))


def rebuild(description, serialized: bytes, device):
    """The `jax.stages.Compiled` that `describe` gave `description` and `serialized` of, on
    `device`; raises `ValueError` (or jax's error) when they are not such a pair."""
    if not supported():
        raise ValueError("this jax's executables are not described here")
    devices = _xla_client.DeviceList((device,))
    executable = device.client.deserialize_executable(serialized, executable_devices=devices)
    return _rebuild(_checked(description, dict, "description"), executable, device)


def _rebuild(d, executable, device):
    args = [(_aval(a), _checked(donated, bool, "donated"))
            for a, donated in map(tuple, _checked(d["args"], list, "args"))]
    inputs = [tuple(_checked(i, list, "input")) for i in _checked(d["inputs"], list, "inputs")]
    outputs = [tuple(_checked(o, list, "output")) for o in _checked(d["outputs"], list, "outputs")]
    debug_info = _core.DebugInfo(
        _checked(d["traced_for"], str, "traced_for"), _checked(d["func_src_info"], str, "func_src_info"),
        _strings_or_none(d["arg_names"], "arg_names"), _strings_or_none(d["result_paths"], "result_paths"))
    unloaded = _pxla.UnloadedMeshExecutable(
        xla_executable=executable, device_list=_xla_client.DeviceList((device,)),
        backend=device.client,
        input_avals=[_aval(a) for a, _, _, _ in inputs],
        input_shardings=[_sharding(m, device) for _, m, _, _ in inputs],
        output_avals=[_aval(a) for a, _, _ in outputs],
        output_shardings=[_sharding(m, device) for _, m, _ in outputs],
        committed=_checked(d["committed"], bool, "committed"), name=_checked(d["name"], str, "name"),
        unordered_effects=[], ordered_effects=[], keepalive=[], host_callbacks=[],
        kept_var_idx=set(_ints(d["kept"], "kept")), mut=None,
        xla_in_layouts=[_layout(x) for _, _, x, _ in inputs],
        dispatch_in_layouts=[_layout(x) for _, _, _, x in inputs],
        xla_out_layouts=[_layout(x) for _, _, x in outputs],
        all_args_info=_pxla.AllArgsInfo([aval for aval, _ in args], debug_info),
        pgle_profiler=None)
    in_tree = jax.tree.structure(_tree(d["in_tree"]))
    args_info = in_tree.unflatten([jax.stages.ArgInfo(aval, donated) for aval, donated in args])
    return jax.stages.Compiled(unloaded.load(), [], args_info, jax.tree.structure(_tree(d["out_tree"])),
                               no_kwargs=_checked(d["no_kwargs"], bool, "no_kwargs"))
