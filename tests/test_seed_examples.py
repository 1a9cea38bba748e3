"""The seed's examples (../shared/seed_examples, laid beside the repository) run as they stand."""
import pathlib
import re

import pytest

from tests.fresh_process import python

SEED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "seed_examples"
pytestmark = pytest.mark.skipif(not SEED.is_dir(), reason=f"the seed's examples are not at {SEED}")


def run(script, **env):
    return python(script, cwd=SEED, env=env)


def test_s2_tensors():
    result = run("s2_tensors.py")
    assert "xla:0" in result.stdout and result.stdout.strip().endswith("ok")


def test_s3_1_single_device_learns():
    result = run("s3_1_single_device.py")
    printed = re.findall(r"^epoch (\d+) loss (\S+)$", result.stdout, re.M)
    assert [int(epoch) for epoch, _ in printed] == list(range(5)), result.stdout
    losses = [float(loss) for _, loss in printed]
    assert losses[-1] < 0.5 * losses[0], losses  # the loss falls


def test_s4_2_bf16():
    result = run("s4_2_bf16.py")
    assert "torch.bfloat16" in result.stdout
