"""Checks of `_check_runner` itself (tests/distributed/test_check_runner.py): one that fails
leaving state behind in its process, one that ends its process, and checks around them."""
import os
import sys

from ._check_runner import main

CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


@check
def passes_first():
    pass


@check
def fails_leaving_state_behind():
    os.environ["CHECK_RUNNER_LEFT_BEHIND"] = "1"
    raise AssertionError("failed on purpose")


@check
def sees_a_fresh_process():
    assert "CHECK_RUNNER_LEFT_BEHIND" not in os.environ


@check
def ends_its_process():
    os._exit(3)


@check
def runs_after_a_crash():
    pass


if __name__ == "__main__":
    main(CHECKS, sys.argv[1:])
