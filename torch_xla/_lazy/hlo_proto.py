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


def _descriptor_bytes(data, name: str) -> bytes:
    """The serialized FileDescriptorProto of .proto file `name` within `data`, or b''."""
    encoded = name.encode()
    start = data.find(b"\x0a" + bytes([len(encoded)]) + encoded)
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
        if data.find(b"\x0a" + bytes([len(_ROOT)]) + _ROOT.encode()) >= 0:
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
