"""Test setup: one CPU device for the XLA client, the `dev` fixture, and the device-vs-CPU
helpers of tests/compare.py, which tests import from there or from here."""
import os

os.environ.setdefault("CPU_NUM_DEVICES", "1")

import pytest

import torch_xla.core.xla_model as xm
from tests.compare import (assert_lowered, assert_same, check, check_lowered, compiles,  # noqa: F401
                           fallbacks, tensors, to_xla)


@pytest.fixture
def dev():
    return xm.xla_device()
