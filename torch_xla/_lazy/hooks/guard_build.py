"""device_hooks.cpp compiled at import (the device guard's "compiled" route), so that no build
can block or break a later import.

PyTorch's own `cpp_extension.load` guards its build directory with a lock *file* that a later
process waits on, in a loop without end, until the file is gone: a build killed part way (a
Ctrl-C, a killed job, a timeout) leaves that file behind and every later import hangs, and a
library the linker was writing when killed may stay half-written in the directory it loads from.
Here instead, under `TORCH_EXTENSIONS_DIR` (PyTorch's extensions root):

- `torch_xla_jax_pyXY/<stem>.so` is the finished library. It only ever appears whole: each build runs
  in a directory of its own (`<stem>.build-*`, where `cpp_extension.load` compiles and links) and
  the linked library is renamed into place, so a library found there is always complete.
- `torch_xla_jax_pyXY/<stem>.lock` serialises the builders through `fcntl.flock`, which the kernel
  releases when its holder dies, however it dies: a killed build blocks nobody. The holder
  writes its process id into the file, for the message below; the builder that takes the lock
  removes the build directories that dead builders left.
- A process that finds another one building waits for the lock, at most `TIMEOUT` seconds
  (`TORCH_XLA_GUARD_BUILD_TIMEOUT`, default 300), then gives up the compiled route with a
  message naming the builder's process and the lock file (the next route is taken).
"""
import fcntl
import glob
import hashlib
import os
import shutil
import sys
import tempfile
import time

_NOTE_AFTER = 10.0    # seconds of waiting before saying on stderr what is waited for
_POLL = 0.1


def library_stem(torch_version: str, source: str) -> str:
    """The name of `source` (device_hooks.cpp) built for torch `torch_version` and this
    source's text. setup.py loads this module on its own (no package around it), so it
    imports nothing of the package."""
    tag = "".join(c if c.isalnum() else "_" for c in torch_version)
    with open(source, "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:10]
    return f"device_hooks_torch_{tag}_{digest}"


def timeout() -> float:
    return float(os.environ.get("TORCH_XLA_GUARD_BUILD_TIMEOUT", "300"))


def directory() -> str:
    """This package's folder in PyTorch's extensions root, one per Python release (the
    library's name holds the torch release and the source's digest). The root is found as
    `cpp_extension.get_default_build_root` finds it, without importing cpp_extension: its
    import warns, on a CUDA build of torch where no GPU is, about a CUDA_HOME this library
    never uses."""
    from torch import _appdirs
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.realpath(
        _appdirs.user_cache_dir(appname="torch_extensions"))
    return os.path.join(root, f"torch_xla_jax_py{sys.version_info.major}{sys.version_info.minor}")


def library_path(stem: str) -> str:
    return os.path.join(directory(), stem + ".so")


class BuildBusy(RuntimeError):
    """Another live process held the build's lock for longer than the wait allowed."""


def _holder(lock_file) -> str:
    lock_file.seek(0)
    text = lock_file.read().strip()
    return f"process {text}" if text else "another process"


def _lock(lock_file, path: str, wait: float) -> None:
    """Takes the build's lock, waiting at most `wait` seconds for a live holder."""
    start = time.monotonic()
    noted = False
    while True:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            waited = time.monotonic() - start
            if waited >= wait:
                raise BuildBusy(
                    f"{_holder(lock_file)} has been compiling the device guard for over "
                    f"{wait:.0f} s and still holds {path} (the lock goes when that process "
                    "ends: let it finish, or end it; TORCH_XLA_GUARD_BUILD_TIMEOUT sets how "
                    "long to wait)") from None
            if not noted and waited >= _NOTE_AFTER:
                print(f"torch_xla: waiting for {_holder(lock_file)}, which is compiling the "
                      f"device guard (lock {path}; at most {wait:.0f} s)", file=sys.stderr,
                      flush=True)
                noted = True
            time.sleep(_POLL)


def _compile(name: str, source: str, stem: str) -> str:
    """Compiles `source` in a directory of its own and renames the library into place."""
    import torch.utils.cpp_extension as cpp_extension
    build = tempfile.mkdtemp(prefix=stem + ".build-", dir=directory())
    try:
        # Builds, links and loads the library from the build directory (loading before the
        # rename is fine: the rename keeps the same file).
        cpp_extension.load(name=name, sources=[source], build_directory=build,
                           is_python_module=False, verbose=False)
        built = glob.glob(os.path.join(build, "*.so"))
        os.rename(built[0], library_path(stem))
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return library_path(stem)


def load_or_build(name: str, source: str, stem: str, load) -> str:
    """The library for `stem`, loaded with `load(path)` where it is there, else compiled from
    `source` (as extension `name`) and loaded. Returns its path; raises BuildBusy or the
    compiler's error."""
    final = library_path(stem)
    if os.path.exists(final):
        load(final)
        return final
    os.makedirs(directory(), exist_ok=True)
    lock_path = os.path.join(directory(), stem + ".lock")
    with open(lock_path, "a+") as lock_file:
        _lock(lock_file, lock_path, timeout())
        try:
            if os.path.exists(final):  # built by the holder we waited for
                load(final)
                return final
            for stale in glob.glob(os.path.join(directory(), stem + ".build-*")):
                shutil.rmtree(stale, ignore_errors=True)
            lock_file.truncate(0)
            lock_file.write(str(os.getpid()))
            lock_file.flush()
            return _compile(name, source, stem)
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
