"""Records each unittest outcome of the process as one JSON line in $UPSTREAM_TESTS_RECORD.

scripts/upstream-tests puts this folder on PYTHONPATH so that a test file runs unmodified
(`python3 test_x.py`, as upstream's run_tests.sh runs it) while every result its unittest
runner reports (absltest's and torch's runners derive from it) is written down as it happens:
a file that is killed at its timeout still leaves the results it reached.
"""
import json
import os
import traceback

_PATH = os.environ.get("UPSTREAM_TESTS_RECORD")


def _why(err):
  """The exception as `Type: message`, what the report shows as the reason."""
  if err is None:
    return ""
  kind, value, _ = err
  # the first part is `Type: message` (notes, such as jax's on filtered frames, follow it)
  return traceback.format_exception_only(kind, value)[0].strip()[:400]


def _write(test, outcome, why=""):
  test_id = test.id() if hasattr(test, "id") else str(test)
  with open(_PATH, "a") as out:
    out.write(json.dumps({"id": test_id, "outcome": outcome, "why": why}) + "\n")


def _install():
  import unittest.result as result

  base = result.TestResult
  originals = {name: getattr(base, name) for name in (
      "addSuccess", "addFailure", "addError", "addSkip", "addExpectedFailure",
      "addUnexpectedSuccess", "addSubTest")}

  def add_success(self, test):
    _write(test, "passed")
    return originals["addSuccess"](self, test)

  def add_failure(self, test, err):
    _write(test, "failed", _why(err))
    return originals["addFailure"](self, test, err)

  def add_error(self, test, err):
    _write(test, "error", _why(err))
    return originals["addError"](self, test, err)

  def add_skip(self, test, reason):
    _write(test, "skipped", str(reason)[:400])
    return originals["addSkip"](self, test, reason)

  def add_expected_failure(self, test, err):
    _write(test, "xfail", _why(err))
    return originals["addExpectedFailure"](self, test, err)

  def add_unexpected_success(self, test):
    _write(test, "failed", "unexpected success")
    return originals["addUnexpectedSuccess"](self, test)

  def add_sub_test(self, test, subtest, err):
    if err is not None:  # a failing subtest fails its test; passing ones are not counted
      outcome = "failed" if issubclass(err[0], test.failureException) else "error"
      _write(subtest, outcome, _why(err))
    return originals["addSubTest"](self, test, subtest, err)

  base.addSuccess = add_success
  base.addFailure = add_failure
  base.addError = add_error
  base.addSkip = add_skip
  base.addExpectedFailure = add_expected_failure
  base.addUnexpectedSuccess = add_unexpected_success
  base.addSubTest = add_sub_test


if _PATH:
  _install()
