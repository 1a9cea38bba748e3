"""The seed's examples (../shared/seed_examples, laid beside the repository) run as they stand."""
import os
import pathlib
import subprocess
import sys

import pytest

SEED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "seed_examples"
pytestmark = pytest.mark.skipif(not SEED.is_dir(), reason=f"the seed's examples are not at {SEED}")


def run(script, timeout=900, **env):
    full_env = dict(os.environ, **env)
    full_env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run([sys.executable, script], cwd=SEED, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def test_s2_tensors():
    result = run("s2_tensors.py")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "xla:0" in result.stdout and result.stdout.strip().endswith("ok")


def test_s3_1_single_device_learns():
    result = run("s3_1_single_device.py")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("loss") == 5


def test_s4_2_bf16():
    result = run("s4_2_bf16.py")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "torch.bfloat16" in result.stdout
