"""Compiled programs on disk, found by the engine's own graph key: with the persistent cache on,
a process that builds a graph an earlier process compiled loads its executable without
lowering it to StableHLO or compiling it.

jax's persistent cache (which the runner also sets up) keys a program by its StableHLO, so a
hit there still pays for tracing the lowerings and for jax's lowering (for a small program as
long as XLA's compile). Here the key is the text of the graph's structural key
(`graph_program.walk`), where every part is spelled out by `key_text` (which refuses a key
holding anything without an exact, process-independent spelling: a function, an array, an
object of its own), with what else decides the program: the device's platform and kind,
the compile options, the XLA_* environment variables (XLA_FLAGS among them), the versions of jax, jaxlib and torch, and a digest of this
package's source (a changed lowering changes the program). Each entry is one file in the
cache's folder `programs`, written atomically: a fixed header (`_HEADER`: this format's
mark, the description's length), the program's description in JSON and its XLA executable's
bytes (`jax_compat.executables`: nothing in the file is unpickled, so reading it runs no code; the
executable runs when the program does, which is why the cache's folders must be this user's
alone, `runner.initialize_persistent_cache`). A file of another format (jax's pickled
executables, which this store wrote before) counts as absent: compiled anew and rewritten.
"""
import enum
import functools
import hashlib
import json
import os
import pathlib
import struct
import tempfile
import warnings

import jax
import torch

from ..runtime import directory_trust, runner
from ..base.jax_compat import executables as jax_executables
from ..graph.ir import In, Sc

_SCALARS = (str, int, float, bool, complex, type(None))
_NAMED = (torch.dtype, torch.device, torch.layout, torch.memory_format)


def key_text(key):
    """An exact spelling of `key` (tuples, lists, dicts, scalars, torch's dtypes, devices,
    layouts and memory formats, enums, slices, placeholders, types by name), or None if
    something in it has none."""
    parts = []

    def spell(x):
        t = type(x)
        if t in _SCALARS:
            parts.append(repr(x) if t is not float else float.hex(x))
        elif t is tuple or t is list:
            parts.append("(" if t is tuple else "[")
            for item in x:
                if not spell(item):
                    return False
                parts.append(",")
            parts.append(")" if t is tuple else "]")
        elif t is dict:
            return spell(tuple(sorted(x.items(), key=repr)))
        elif t is In or t is Sc:
            parts.append(repr(x))
        elif isinstance(x, _NAMED):
            parts.append(f"{t.__name__}:{x}")
        elif isinstance(x, enum.Enum):
            parts.append(f"{t.__module__}.{t.__qualname__}.{x.name}")
        elif t is slice:
            return spell(("slice", x.start, x.stop, x.step))
        elif t is type and x.__module__ == "builtins":
            parts.append(f"type:{x.__name__}")
        else:
            return False
        return True

    return "".join(parts) if spell(key) else None


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """A digest of this package's Python source: a program depends on its lowerings."""
    root = pathlib.Path(__file__).resolve().parents[2]  # torch_xla/ (of _lazy/launch/)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _entry_name(text, device, options) -> str:
    import jaxlib
    context = (text, device.platform, device.device_kind, repr(sorted((options or {}).items())),
               sorted((k, v) for k, v in os.environ.items() if k.startswith("XLA_")),
               jax.__version__, jaxlib.__version__,
               torch.__version__, _code_digest())
    return hashlib.sha256(repr(context).encode()).hexdigest()


_MARK = b"TXLAPRG1"
_HEADER = struct.Struct(">8sI")  # the mark, the description's length in bytes


class Entry:
    """One program's file in the store: `load()` its executable (None if absent or
    unreadable), `store(compiled)` writes it (atomically: a reader never sees part of it)."""
    __slots__ = ("file", "device", "readonly")

    def __init__(self, file, device, readonly):
        self.file, self.device, self.readonly = file, device, readonly

    def load(self):
        try:
            data = self.file.read_bytes()
        except OSError:
            return None
        if len(data) < _HEADER.size:
            return None
        mark, size = _HEADER.unpack_from(data)
        if mark != _MARK:
            return None
        start = _HEADER.size + size
        try:
            description = json.loads(data[_HEADER.size:start])
            return jax_executables.rebuild(description, data[start:], self.device)
        except Exception:  # an entry this jax cannot read is compiled anew (and rewritten)
            return None

    def store(self, compiled) -> None:
        if self.readonly:
            return
        try:
            description, executable = jax_executables.describe(compiled, self.device)
        except (ValueError, TypeError, NotImplementedError, jax.errors.JaxRuntimeError):
            return  # a program not described stays in jax's own cache only
        text = json.dumps(description).encode()
        fd, temporary = tempfile.mkstemp(dir=self.file.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_HEADER.pack(_MARK, len(text)) + text + executable)
            os.replace(temporary, self.file)
        except OSError:
            pathlib.Path(temporary).unlink(missing_ok=True)


@functools.lru_cache(maxsize=None)
def _folder(path: str):
    """The store's folder in the persistent cache at `path` (made if missing), or None when
    it cannot be made or others could write to it (with a warning)."""
    folder = pathlib.Path(path) / "programs"
    try:
        folder.mkdir(mode=0o755, exist_ok=True)
    except OSError:
        return None
    unsafe = directory_trust.writable_by_others(str(folder))
    if unsafe is not None:
        warnings.warn(f"torch_xla: the programs stored in {folder} are not used: {unsafe}, and a "
                      "program loaded from there would run as this process's own code")
        return None
    return folder


def entry(key, placement):
    """The store's entry of the program of graph key `key` compiled under `placement` (a
    `runner.OnDevice`), or None while the persistent cache is off, when `key` has no exact
    spelling or when the store's folder is not this user's alone."""
    cache = runner.persistent_cache()
    if cache is None:
        return None
    text = key_text(key)
    if text is None:
        return None
    path, readonly = cache
    folder = _folder(path)
    if folder is None:
        return None
    name = _entry_name(text, placement.device, placement.options())
    return Entry(folder / f"{name}.xprog", placement.device, readonly)
