"""The XLA device guard: what PyTorch asks for the current device when a device has no index
(`t.to('xla')`), what indexing assignment switches devices with, and where the autograd
engine learns how many devices get a backward thread.

PyTorch takes device guards from a table in its C++ core (c10), so `install` fills XLA's slot
by the first of these routes that is there (the compiled ones first: they serve every device
and bring the sparse refusal below):

- built: device_hooks.cpp compiled when the package was built, for this very torch release
  and source (`pip install --no-build-isolation .` or `python setup.py build_ext --inplace`
  in an environment with torch and a C++ compiler). No compiler at import.
- compiled now: device_hooks.cpp compiled by torch.utils.cpp_extension where a C++ compiler
  and ninja are found (seconds, once; cached in TORCH_EXTENSIONS_DIR, and loaded from there
  later with no compiler and no cpp_extension; `guard_build` makes sure an interrupted build
  blocks no later import and a half-written library is never loaded).
- python: PyTorch's own Python-backed guard (`torch._C._acc.DeviceGuard`, made for PrivateUse1
  backends), registered for PrivateUse1 and moved into XLA's slot. No compiler at all; its
  current device is always index 0 and it counts one device, so only xla:0 can run backward.

device_hooks.cpp also refuses sparse layouts on XLA devices (a fallback on the SparseXLA and
SparseCsrXLA keys, which Python cannot register on). On the python route that refusal is
absent: a sparse factory on the device (`torch.zeros(..., layout=torch.sparse_coo,
device='xla')`) raises PyTorch's own NotImplementedError ("Could not run ...") instead.

Where no route is there, import still works: only what needs the guard fails, with an error
naming what is missing (see `missing_guard_message`).
"""
import ctypes
import glob
import os
import shutil
import warnings

import torch

from . import guard_build

_SOURCE = os.path.join(os.path.dirname(__file__), "device_hooks.cpp")
_REGISTRY_SYMBOL = "_ZN3c104impl26device_guard_impl_registryE"

route = None          # "built", "python", "compiled", "present" (a guard registered before
                      # this package's) or None: what fills XLA's slot
_FULL = ("built", "compiled", "present")
_failures = []        # why the compiled routes were not taken


def library_stem() -> str:
    """The name of device_hooks.cpp built for the running torch release and this source
    (setup.py builds it; a build of an older source is not picked up)."""
    return guard_build.library_stem(torch.__version__, _SOURCE)


def _device_type(name: str) -> int:
    return int(getattr(torch._C._autograd.DeviceType, name))


def _registry():
    """c10's table of device guards, one pointer per device type (PrivateUse1 is the last)."""
    c10 = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib",
                                             "libc10.*"))[0])
    slots = _device_type("PrivateUse1") + 1
    return (ctypes.c_void_p * slots).in_dll(c10, _REGISTRY_SYMBOL)


def _has_guard() -> bool:
    return bool(_registry()[_device_type("XLA")])


def _load_built() -> bool:
    paths = glob.glob(os.path.join(os.path.dirname(__file__), library_stem() + ".*so"))
    if not paths:
        _failures.append(f"no guard built with the package for torch {torch.__version__}")
        return False
    torch.ops.load_library(paths[0])
    return _has_guard()


def _install_python_guard() -> bool:
    acc = getattr(torch._C, "_acc", None)
    if acc is None or not hasattr(acc, "register_python_privateuseone_device_guard"):
        return False
    registry = _registry()
    private_use1, xla = _device_type("PrivateUse1"), _device_type("XLA")
    if registry[private_use1]:  # another backend holds PrivateUse1: leave it alone
        return False

    class XLAGuard(acc.DeviceGuard):
        def type_(self):
            return torch._C._autograd.DeviceType.XLA

    if not acc.register_python_privateuseone_device_guard(XLAGuard()):
        return False
    registry[xla] = registry[private_use1]
    registry[private_use1] = None  # PrivateUse1 stays free for its own backends
    return True


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


def _can_compile() -> bool:
    # cpp_extension imported only to compile: see guard_build.directory
    import torch.utils.cpp_extension as cpp_extension
    return bool(shutil.which(_compiler())) and cpp_extension.is_ninja_available()


def _compile_now() -> bool:
    if not os.path.exists(guard_build.library_path(library_stem())) and not _can_compile():
        _failures.append(f"no C++ compiler ({_compiler()}) and ninja to compile it now")
        return False
    try:
        guard_build.load_or_build("torch_xla_jax_" + library_stem(), _SOURCE, library_stem(),
                                  torch.ops.load_library)
    except guard_build.BuildBusy as e:
        _failures.append(f"compiling device_hooks.cpp: {e}")
        warnings.warn(f"torch_xla: the compiled device guard was not taken: {e}")
        return False
    except Exception as e:  # a compiler that cannot build it: the next route, and say why
        _failures.append(f"compiling device_hooks.cpp failed: {str(e).splitlines()[0]}")
        return False
    return _has_guard()


def install() -> None:
    """Fills XLA's slot of c10's guard table by the first route available (see above)."""
    global route
    if route is not None:
        return
    if _has_guard():
        route = "present"
        return
    routes = [("built", _load_built), ("compiled", _compile_now),
              ("python", _install_python_guard)]
    for name, take in routes:
        if take():
            route = name
            return
    _explain_missing_guard_in_to()


def missing_guard_message(index=None) -> str:
    """What a user reads where PyTorch needs the guard and none could be installed."""
    if route == "python":
        what = (f"xla:{index} needs a compiled device guard: PyTorch's Python guard serves "
                "xla:0 only (autograd counts one device)")
    else:
        what = ("XLA tensors need a device guard (PyTorch's autograd asks it for every "
                "tensor, as do .to('xla') and indexing assignment)")
    return (
        f"torch_xla: {what}, and none could be installed for torch {torch.__version__}: "
        + "; ".join(_failures) + ". To get one: build the package with this torch and a "
        "C++ compiler (`pip install --no-build-isolation .`), or have a C++ compiler and "
        "ninja on PATH when importing torch_xla, or use a torch release whose torch._C._acc "
        "has a Python device guard (2.11 and newer; it serves xla:0).")


def check(device) -> None:
    """Raises where a tensor on `device` (an XLA device, its index or None) would meet PyTorch
    without the guard it needs, instead of PyTorch aborting the process."""
    if route in _FULL:
        return
    index = device if device is None or isinstance(device, int) else torch.device(device).index
    if route == "python" and not index:
        return
    raise RuntimeError(missing_guard_message(index))


def _explain_missing_guard_in_to() -> None:
    """`t.to('xla')` without a guard: PyTorch's own error, with what to do added."""
    original = torch.Tensor.to

    def to(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except RuntimeError as e:
            if "not linked with support for xla devices" in str(e):
                raise RuntimeError(missing_guard_message()) from e
            raise
    to.__doc__ = original.__doc__
    to.__wrapped__ = original
    torch.Tensor.to = to
