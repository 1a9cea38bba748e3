"""device_hooks.cpp compiled at import: a build killed part way blocks no later import and
leaves nothing that is loaded, two first imports at once both get the guard, and a build held
by a live process is waited for a bounded time, then explained."""
import fcntl
import os
import pathlib
import shutil
import signal
import time

import pytest
import torch
import torch.utils.cpp_extension as cpp_extension

from tests.fresh_process import TIMEOUT, python, start
from torch_xla._lazy.hooks import device_guard, guard_build

_IMPORT = """
import torch
import torch_xla
from torch_xla._lazy.hooks import device_guard
print(device_guard.route, (torch.ones(2, device='xla:1') * 3).cpu().tolist())
"""

pytestmark = pytest.mark.skipif(
    not shutil.which(device_guard._compiler()) or not cpp_extension.is_ninja_available()
    or os.path.exists(os.path.join(os.path.dirname(device_guard.__file__),
                                   device_guard.library_stem() + ".so")),
    reason="the compiled route is taken only where a C++ compiler and ninja are found and no "
           "guard was built with the package")


def _start(extensions, **env):
    return start("-c", _IMPORT, env=dict(env, TORCH_EXTENSIONS_DIR=extensions, CPU_NUM_DEVICES=2),
                 start_new_session=True)


def _folder(extensions):
    return extensions / os.path.basename(guard_build.directory())


def _wait_for_build(proc, folder, deadline=900):
    """Returns once `proc` is compiling: ninja's file is written in its build directory."""
    stem = device_guard.library_stem()
    began = time.monotonic()
    while time.monotonic() - began < deadline:
        if list(folder.glob(f"{stem}.build-*/build.ninja")):
            return
        assert proc.poll() is None, "the import ended before its build was seen"
        time.sleep(0.02)
    pytest.fail("no build started")


def test_a_killed_build_blocks_nothing_and_two_first_imports_both_work(tmp_path):
    extensions = tmp_path / "extensions"
    folder = _folder(extensions)
    first = _start(extensions)
    _wait_for_build(first, folder)
    os.killpg(first.pid, signal.SIGKILL)  # the import and its compiler, mid-build
    first.communicate()
    stem = device_guard.library_stem()
    assert not (folder / f"{stem}.so").exists(), "a killed build left a library to load"
    assert list(folder.glob(f"{stem}.build-*")), "the killed build's directory was left"

    both = [_start(extensions), _start(extensions)]
    for proc in both:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-4000:]
        assert out.split(None, 1) == ["compiled", "[3.0, 3.0]\n"]
    assert sorted(p.name for p in folder.iterdir()) == [f"{stem}.lock", f"{stem}.so"]


def test_a_build_held_by_a_live_process_is_waited_for_then_explained(tmp_path):
    extensions = tmp_path / "extensions"
    folder = _folder(extensions)
    folder.mkdir(parents=True)
    lock_path = folder / f"{device_guard.library_stem()}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write(str(os.getpid()))
        lock.flush()
        proc = _start(extensions, TORCH_XLA_GUARD_BUILD_TIMEOUT="1")
        out, err = proc.communicate(timeout=TIMEOUT)
    assert f"process {os.getpid()} has been compiling the device guard for over 1 s" in err
    assert f"still holds {lock_path}" in err and "TORCH_XLA_GUARD_BUILD_TIMEOUT" in err
    # The import went on to the next route: PyTorch's Python guard serves xla:0 only, so
    # xla:1 raises naming what held the build; without a Python guard, xla tensors raise.
    assert proc.returncode != 0 and "none could be installed" in err
    assert not list(folder.glob("*.so"))


def test_setup_py_loads_the_build_module_on_its_own():
    """setup.py (`pip install --no-build-isolation .`) loads guard_build.py from its file, with
    no package around it, to name the library it builds: the same name the import looks for."""
    import importlib.util
    path = pathlib.Path(device_guard.__file__).with_name("guard_build.py")
    spec = importlib.util.spec_from_file_location("standalone_guard_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = path.with_name("device_hooks.cpp")
    assert module.library_stem(torch.__version__, str(source)) == device_guard.library_stem()


def test_the_extensions_root_is_pytorchs(monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    assert os.path.dirname(guard_build.directory()) == cpp_extension.get_default_build_root()


def test_a_compiled_guard_loads_with_no_compiler_and_no_cpp_extension(tmp_path):
    """The library this process compiled (or found) is loaded by an import that finds no
    compiler, which never imports torch.utils.cpp_extension (on a CUDA build of torch where no
    GPU is, that import warns about CUDA_HOME)."""
    assert os.path.exists(guard_build.library_path(device_guard.library_stem()))
    bare = tmp_path / "bin"
    bare.mkdir()
    proc = python("-c", "import sys, torch_xla; from torch_xla._lazy.hooks import device_guard; "
                  "print(device_guard.route, 'torch.utils.cpp_extension' in sys.modules)",
                  env=dict(PATH=bare, CXX=tmp_path / "missing-c++"))
    assert proc.stdout.split() == ["compiled", "False"], proc.stderr[-4000:]
