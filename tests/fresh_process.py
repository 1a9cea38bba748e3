"""Running Python in a fresh interpreter, for what one process cannot show twice: a device
count or SPMD mode fixed at start, an environment variable read once, a second process
reading what the first wrote, a process killed midway.

`python("-m", "tests.x", env={...})` or `python("-c", code)` runs the interpreter of this
test run with this repository first on its path, in this process's environment with `env`
laid over it (a value of None removes the variable), under a timeout; it returns the
completed process (text output) and, unless `check=False`, raises with the exit status and
the ends of both outputs when the process fails or times out (with `check=False`, a process
that timed out is killed and returned with `returncode` None and what it printed). `start` is
the same launch without waiting, for tests that talk to the process or kill it.
"""
import os
import pathlib
import subprocess
import sys

ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
TIMEOUT = 900  # a liveness bound, generous enough for a busy machine


def environment(env=None):
    """This process's environment with this repository first on PYTHONPATH and `env` laid over it."""
    out = dict(os.environ)
    out.pop("PYTEST_CURRENT_TEST", None)  # pytest's own marker, not the child's
    out["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = str(value)
    return out


def _text(out):
    if out is None:
        return ""
    return out.decode(errors="replace") if isinstance(out, bytes) else out


def _failure(proc, why):
    """The message of a failed fresh process: why, its command and the ends of its outputs."""
    return (f"{why}: python {' '.join(proc.args[1:])[:200]}\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}")


def python(*argv, env=None, cwd=ROOT, timeout=TIMEOUT, check=True):
    """Runs `python *argv` in a fresh interpreter (see the module docstring)."""
    try:
        proc = subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, env=environment(env),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        proc = subprocess.CompletedProcess(e.cmd, None, _text(e.stdout), _text(e.stderr))
        if check:
            raise AssertionError(_failure(proc, f"no exit within {timeout} s")) from None
        return proc
    if check and proc.returncode != 0:
        raise AssertionError(_failure(proc, f"exit status {proc.returncode}"))
    return proc


def start(*argv, env=None, cwd=ROOT, **popen):
    """`python *argv` started in a fresh interpreter, not waited for; its outputs are text pipes
    unless `popen` (subprocess.Popen's arguments) says otherwise."""
    popen = dict(dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), **popen)
    return subprocess.Popen([sys.executable, *map(str, argv)], cwd=cwd, env=environment(env), **popen)
