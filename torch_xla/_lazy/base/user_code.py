"""Where user code is on the stack: the innermost frame outside the engine, PyTorch, jax
and the standard library, for messages that name the user's line (a failed op, a failed
check, why a program was compiled)."""
import linecache
import os
import sys
import sysconfig

import jax
import torch

# Code that is not the user's: the engine, PyTorch, jax and the standard library.
PACKAGE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")) + os.sep  # torch_xla/
_LIBRARY_DIRS = (PACKAGE_DIR,) + tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                                       for m in (torch, jax)) + (
    os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep,)
_user_paths = {}  # a code object's file name -> its absolute path, or "" for library code


def _user_path(filename) -> str:
    known = _user_paths.get(filename)
    if known is None:
        path = os.path.abspath(filename)
        library = path.startswith(_LIBRARY_DIRS) or filename.startswith("<")
        known = _user_paths[filename] = "" if library else path
    return known


def frames():
    """The frames of this thread's stack, innermost first (from the caller's caller)."""
    frame = sys._getframe(2)
    while frame is not None:
        yield frame
        frame = frame.f_back


_ENGINE_DIR = os.path.join(PACKAGE_DIR, "_lazy") + os.sep


def stack_lines() -> list:
    """This thread's Python frames outside the engine, innermost first, as torch_xla lists
    them (`  function (file:line)`)."""
    return [f"  {f.f_code.co_name} ({f.f_code.co_filename}:{f.f_lineno})"
            for f in frames() if not f.f_code.co_filename.startswith(_ENGINE_DIR)]


def _innermost_user(frame):
    while frame is not None:
        path = _user_path(frame.f_code.co_filename)
        if path:
            return path, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return None


_ENGINE_RUN = getattr(getattr(torch.autograd, "graph", None), "_engine_run_backward", None)


def _backward_caller():
    """The user line waiting in PyTorch's autograd engine (`backward()`, `autograd.grad`),
    where every thread waiting there waits at the same line; else None."""
    if _ENGINE_RUN is None:
        return None
    lines = set()
    for frame in sys._current_frames().values():
        while frame is not None and frame.f_code is not _ENGINE_RUN.__code__:
            frame = frame.f_back
        if frame is not None:
            lines.add(_innermost_user(frame))
    return lines.pop() if len(lines) == 1 else None


def user_line():
    """(file, line, function, in_backward) of the innermost user frame on this thread's
    stack. The backward pass has only library code between its ops and autograd's engine:
    run on this thread (`_lazy/hooks/device`), the line that called backward is the first user
    frame beyond the engine; run on autograd's thread for a device (whose stack is library
    code alone), it is the line another thread waits at. Then in_backward is true. None
    when neither is known."""
    engine = _ENGINE_RUN.__code__ if _ENGINE_RUN is not None else None
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code is engine:
            where = _innermost_user(frame)
            return None if where is None else where + (True,)
        path = _user_path(code.co_filename)
        if path:
            return path, frame.f_lineno, code.co_name, False
        frame = frame.f_back
    where = _backward_caller()
    return None if where is None else where + (True,)


def describe(where) -> tuple:
    """('file:line in function', the source line) of a `user_line()`."""
    path, line, function = where[:3]
    return f"{path}:{line} in {function}", linecache.getline(path, line).strip()


def user_frame():
    """`describe` of the innermost user frame on this thread's stack, or None."""
    where = _innermost_user(sys._getframe(1))
    return None if where is None else describe(where)
