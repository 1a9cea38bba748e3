"""Checks run in a subprocess, each reported as itself.

A module of checks (a dict of name -> function, `CHECKS`) runs them with `main`, in one
process while they pass: each prints `start NAME`, then `ok NAME`, or `FAIL NAME`, its
traceback and `END NAME`. The process stops at the first failure, so that nothing a failed
check left behind (a process group, a half-made mesh, a crash) can reach the next one;
`run` starts a fresh process for the checks after it. A check that ends its process
(a crash, a timeout) is reported failed with that process's output.
"""
import re
import sys
import traceback

from tests.fresh_process import python


def main(checks, names, setup=None) -> None:
    """In the subprocess: runs `names` of `checks` (all of them if none), stopping at the
    first failure (exit status 1)."""
    if setup is not None:
        setup()
    for name in names or checks:
        print(f"start {name}", flush=True)
        try:
            checks[name]()
        except Exception:  # noqa: BLE001  (reported to the test)
            print(f"FAIL {name}", flush=True)
            traceback.print_exc(file=sys.stdout)
            print(f"END {name}", flush=True)
            sys.exit(1)
        print(f"ok {name}", flush=True)


def run(module, names, env=None, timeout=600):
    """Runs the checks `names` of `module` (`python -m module`, `env` laid over this
    environment), a fresh process after each failure; {name: None if it passed, else what it
    printed (or the process's output)}."""
    results, left = {}, list(names)
    while left:
        proc = python("-m", module, *left, env=env, timeout=timeout, check=False)
        out, err = proc.stdout, proc.stderr
        ended = f"timed out after {timeout} s" if proc.returncode is None else f"exit status {proc.returncode}"
        done = 0
        for name in left:
            if re.search(rf"^ok {name}$", out, re.M):
                results[name], done = None, done + 1
                continue
            failure = re.search(rf"^FAIL {name}$(.*?)^END {name}$", out, re.M | re.S)
            started = re.search(rf"^start {name}$(.*)", out, re.M | re.S)
            if failure:
                results[name] = failure.group(1)
            elif started:  # it ended the process
                results[name] = f"the process ended ({ended}) in it:{started.group(1)[-3000:]}\n{err[-5000:]}"
            else:  # the process ended before it started
                results[name] = f"the process ended ({ended}) before it:\n{out[-3000:]}\n{err[-5000:]}"
            done += 1
            break
        left = left[done:]
    return results
