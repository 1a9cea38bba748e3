"""XLA's `HloModuleProto` as a protobuf message, its schema read from jaxlib itself.

jaxlib serializes HLO modules (`as_serialized_hlo_module_proto`) but ships no Python
classes for them. Its XLA library is built with full protobuf descriptors, so each .proto
file's `FileDescriptorProto` sits in the library as serialized bytes: read from there, the
schema is exactly the one the module bytes were written with. The messages then print
through protobuf's own text and JSON formats, as torch_xla's C++ prints them.
"""
import functools
import glob
import importlib
import mmap
import os

import jaxlib
import numpy as np

_LEN, _VARINT = 2, 0
# FileDescriptorProto's fields and their wire types: a descriptor's bytes end where the
# next bytes are none of these (or a second `name`, the start of another file's).
_FILE_FIELDS = {1: _LEN, 2: _LEN, 3: _LEN, 4: _LEN, 5: _LEN, 6: _LEN, 7: _LEN, 8: _LEN,
                9: _LEN, 10: _VARINT, 11: _VARINT, 12: _LEN, 14: _VARINT, 15: _LEN}
_ROOT = "xla/service/hlo.proto"


def _varint(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _name_field(name: str) -> bytes:
    """A FileDescriptorProto's first bytes: its `name` field (names under 128 bytes)."""
    encoded = name.encode()
    return b"\x0a" + bytes([len(encoded)]) + encoded


def _descriptor_bytes(data, name: str) -> bytes:
    """The serialized FileDescriptorProto of .proto file `name` within `data`, or b''."""
    start = data.find(_name_field(name))
    if start < 0:
        return b""
    pos = start
    while pos < len(data):
        tag, end = _varint(data, pos)
        field, wire = tag >> 3, tag & 7
        if _FILE_FIELDS.get(field) != wire or (field == 1 and pos != start):
            break
        value, end = _varint(data, end)
        end += value if wire == _LEN else 0
        if end > len(data):
            break
        pos = end
    return bytes(data[start:pos])


def _library():
    """The mapped bytes of jaxlib's library that holds the HLO schema."""
    folder = os.path.dirname(jaxlib.__file__)
    for path in sorted(glob.glob(os.path.join(folder, "*.so*")), key=os.path.getsize, reverse=True):
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if data.find(_name_field(_ROOT)) >= 0:
            return data
        data.close()
    raise RuntimeError(f"jaxlib {jaxlib.__version__} holds no descriptor of {_ROOT} in {folder}: "
                       "HLO modules cannot be printed as protobuf text or JSON")


@functools.cache
def _module_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    data = _library()
    pool = descriptor_pool.DescriptorPool()

    def add(name):
        try:
            pool.FindFileByName(name)
            return
        except KeyError:
            pass
        if name.startswith("google/protobuf/"):  # protobuf's own files, from its package
            module = importlib.import_module(
                "google.protobuf." + name[len("google/protobuf/"):-len(".proto")] + "_pb2")
            serialized = module.DESCRIPTOR.serialized_pb
        else:
            serialized = _descriptor_bytes(data, name)
        proto = descriptor_pb2.FileDescriptorProto.FromString(serialized)
        if proto.name != name:
            raise RuntimeError(f"no descriptor of {name} found in jaxlib {jaxlib.__version__}")
        for dependency in proto.dependency:
            add(dependency)
        pool.Add(proto)

    add(_ROOT)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("xla.HloModuleProto"))


def module(serialized: bytes):
    """A serialized `HloModuleProto` as a protobuf message."""
    return _module_class().FromString(serialized)


def text(message) -> str:
    """`message` in protobuf's text format."""
    from google.protobuf import text_format
    return text_format.MessageToString(message)


def json(message) -> str:
    """`message` as protobuf's JSON mapping prints it (camelCase names, on one line)."""
    from google.protobuf import json_format
    return json_format.MessageToJson(message, indent=None)


def hlo_text(hlo_module) -> str:
    """The text of jaxlib's `HloModule` as XLA's `HloModule::ToString` prints it for
    torch_xla: names with `%`, each operand with its shape (`sine(f32[4,4]{1,0} %x)`)."""
    from jax._src.lib import hlo
    options = hlo.HloPrintOptions()
    options.print_operand_shape = True
    options.print_percent = True
    options.print_metadata = False
    return hlo_module.to_string(options)


def computation(lowered):
    """jaxlib's `XlaComputation` of `lowered_module(lowered)`."""
    from jax._src.lib import xla_client
    return xla_client.XlaComputation(lowered_module(lowered).SerializeToString(deterministic=True))


def lowered_module(lowered):
    """The `HloModuleProto` message of jax's `Lowered` as torch_xla's builder would print it:
    instructions named as XLA names those of a builder (`%multiply.3`, `%all-reduce.5`,
    parameters `%Arg_0.1`), shardings with their devices listed (`devices=[2,2]0,1,2,3`, as
    `_get_xla_sharding_spec` writes them). jax's own conversion names instructions after
    jax's primitives and argument paths (`%mul.3`, `%psum.5`, `%kept_0_.1`), from the
    StableHLO's locations (left out here), and writes tilings in XLA's iota form
    (`devices=[2,2]<=[4]`)."""
    from jax._src.lib import _jax
    text = lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=False)
    converted = _jax.mlir.mlir_module_to_xla_computation(
        text, use_tuple_args=lowered._lowering.compile_args["tuple_args"])
    message = module(converted.as_serialized_hlo_module_proto())
    for c in message.computations:
        for instruction in c.instructions:
            if instruction.HasField("sharding"):
                _list_devices(instruction.sharding)
    return message


def _list_devices(sharding) -> None:
    """Writes `sharding`'s (an OpSharding's) iota tile assignment out as its device list."""
    for element in sharding.tuple_shardings:
        _list_devices(element)
    dims = list(sharding.iota_reshape_dims)
    if dims:
        perm = list(sharding.iota_transpose_perm) or list(range(len(dims)))
        devices = np.arange(int(np.prod(dims))).reshape(dims).transpose(perm).ravel()
        sharding.ClearField("iota_reshape_dims")
        sharding.ClearField("iota_transpose_perm")
        sharding.tile_assignment_devices.extend(devices.tolist())


def serialized_text(serialized: bytes) -> str:
    """`hlo_text` of a serialized `HloModuleProto`."""
    from jax._src.lib import xla_client
    return hlo_text(xla_client.XlaComputation(serialized).get_hlo_module())


def _avals(shape) -> tuple:
    """The jax avals of jaxlib's `Shape`: one, or one per element of a tuple shape."""
    from jax._src import core
    if shape.is_tuple():
        return tuple(a for s in shape.tuple_shapes() for a in _avals(s))
    return (core.ShapedArray(tuple(shape.dimensions()), shape.numpy_dtype()),)


def exported(serialized: bytes, platform: str):
    """The serialized `HloModuleProto` as a `jax.export.Exported` for `platform`: its
    `call(*arrays)`, inside a jax function, inlines the module there (the entry
    computation's results flat: a tuple's elements, or the one result)."""
    import jax
    from jax._src.export import _export
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax, xla_client
    from jax._src.lib.mlir import ir
    computation = xla_client.XlaComputation(serialized)
    program = computation.program_shape()
    in_avals = tuple(a for p in program.parameter_shapes() for a in _avals(p))
    out_avals = _avals(program.result_shape())
    with mlir.make_ir_context():
        body = _export._module_to_bytecode(ir.Module.parse(_jax.mlir.hlo_to_stablehlo(serialized)))
    n_in, n_out = len(in_avals), len(out_avals)
    return jax.export.Exported(
        fun_name=computation.name(), in_tree=jax.tree.structure(((0,) * n_in, {})), in_avals=in_avals,
        out_tree=jax.tree.structure((0,) * n_out), out_avals=out_avals,
        _has_named_shardings=False, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out, nr_devices=1, platforms=(platform,),
        ordered_effects=(), unordered_effects=(), disabled_safety_checks=(),
        mlir_module_serialized=body,
        calling_convention_version=_export.minimum_supported_calling_convention_version,
        module_kept_var_idx=tuple(range(n_in)), uses_global_constants=False, _get_vjp=None)
