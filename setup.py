"""Builds the package. Where torch and a C++ compiler are in the build environment
(`pip install --no-build-isolation .`, `python setup.py build_ext --inplace`), the XLA device
hooks (torch_xla/_lazy/hooks/device_hooks.cpp: the device guard and the refusal of sparse layouts)
are compiled for that torch release too, so that importing torch_xla later needs no compiler;
elsewhere the package is pure Python and the guard comes from the routes
torch_xla/_lazy/hooks/device_guard.py describes."""
import importlib.util
import os
import shutil

from setuptools import setup


def _guard_extensions():
    try:
        import torch
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        return [], {}
    if not shutil.which(os.environ.get("CXX", "c++")):
        return [], {}
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "guard_build", os.path.join(here, "torch_xla", "_lazy", "hooks", "guard_build.py"))
    guard_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard_build)
    name = guard_build.library_stem(torch.__version__,
                                    os.path.join(here, "torch_xla", "_lazy", "hooks", "device_hooks.cpp"))
    extension = CppExtension(f"torch_xla._lazy.hooks.{name}",
                             ["torch_xla/_lazy/hooks/device_hooks.cpp"])
    return [extension], {"build_ext": BuildExtension.with_options(use_ninja=False)}


extensions, commands = _guard_extensions()
setup(ext_modules=extensions, cmdclass=commands)
