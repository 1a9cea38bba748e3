"""`_check_runner`: checks in a subprocess, each failure reported as itself alone."""
from tests.distributed import _check_runner, _check_runner_sample


def test_a_failure_or_a_crash_reaches_no_other_check():
    results = _check_runner.run("tests.distributed._check_runner_sample", list(_check_runner_sample.CHECKS),
                                {"CHECK_RUNNER_LEFT_BEHIND": None})
    assert results.keys() == _check_runner_sample.CHECKS.keys()
    assert "AssertionError: failed on purpose" in results.pop("fails_leaving_state_behind")
    assert "exit status 3" in results.pop("ends_its_process")
    assert results == {"passes_first": None, "sees_a_fresh_process": None, "runs_after_a_crash": None}
