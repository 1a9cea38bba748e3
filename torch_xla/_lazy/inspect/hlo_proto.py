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

import jax
import jaxlib
import numpy as np

from ..base import jax_compat

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
    options = jax_compat.hlo_print_options()
    options.print_operand_shape = True
    options.print_percent = True
    options.print_metadata = False
    return hlo_module.to_string(options)


def computation(lowered):
    """jaxlib's `XlaComputation` of `lowered_module(lowered)`."""
    return jax_compat.XlaComputation(lowered_module(lowered).SerializeToString(deterministic=True))


def lowered_module(lowered):
    """The `HloModuleProto` message of jax's `Lowered` as torch_xla's builder would print it:
    instructions named as XLA names those of a builder (`%multiply.3`, `%all-reduce.5`,
    parameters `%Arg_0.1`), shardings with their devices listed (`devices=[2,2]0,1,2,3`, as
    `_get_xla_sharding_spec` writes them). jax's own conversion names instructions after
    jax's primitives and argument paths (`%mul.3`, `%psum.5`, `%kept_0_.1`), from the
    StableHLO's locations (left out here), and writes tilings in XLA's iota form
    (`devices=[2,2]<=[4]`)."""
    text = lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=False)
    converted = jax_compat.stablehlo_to_xla_computation(text, jax_compat.lowered_tuple_args(lowered))
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
    return hlo_text(jax_compat.XlaComputation(serialized).get_hlo_module())


def _avals(shape) -> tuple:
    """The jax avals of jaxlib's `Shape`: one, or one per element of a tuple shape."""
    if shape.is_tuple():
        return tuple(a for s in shape.tuple_shapes() for a in _avals(s))
    return (jax.core.ShapedArray(tuple(shape.dimensions()), shape.numpy_dtype()),)


def exported(serialized: bytes, platform: str):
    """The serialized `HloModuleProto` as a `jax.export.Exported` for `platform`: its
    `call(*arrays)`, inside a jax function, inlines the module there (the entry
    computation's results flat: a tuple's elements, or the one result)."""
    from jax.extend.mlir import hlo_to_stablehlo
    computation = jax_compat.XlaComputation(serialized)
    program = computation.program_shape()
    return jax_compat.exported_module(
        hlo_to_stablehlo(serialized), fun_name=computation.name(),
        in_avals=tuple(a for p in program.parameter_shapes() for a in _avals(p)),
        out_avals=_avals(program.result_shape()), platform=platform)
