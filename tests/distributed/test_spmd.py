"""SPMD over 8 CPU devices (`xr.use_spmd()`, `torch_xla.distributed.spmd`): the checks of
tests/distributed/_spmd_main.py, run together in one subprocess with CPU_NUM_DEVICES=8
(SPMD mode is for a whole process; this one has 1 device and stays out of it)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import torch_xla.distributed.spmd as xs
from tests.distributed import _spmd_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("spmd_checkpoint"))


@pytest.fixture(scope="module")
def spmd_results(checkpoint_dir):
    env = dict(os.environ, CPU_NUM_DEVICES="8", PYTHONPATH=ROOT, SPMD_CHECKPOINT_DIR=checkpoint_dir)
    proc = subprocess.run([sys.executable, "-m", "tests.distributed._spmd_main"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    results = {name: status for status, name in re.findall(r"^(ok|FAIL) (\w+)$", proc.stdout, re.M)}
    return proc, results


@pytest.mark.parametrize("name", list(_spmd_main.CHECKS))
def test_spmd(spmd_results, name):
    proc, results = spmd_results
    failure = re.search(rf"^FAIL {name}$(.*?)^END {name}$", proc.stdout, re.M | re.S)
    assert results.get(name) == "ok", (failure.group(1) if failure else
                                       proc.stdout[-3000:] + proc.stderr[-5000:])


def test_mark_sharding_needs_spmd_mode(dev):
    mesh = xs.Mesh(np.arange(1), (1,))
    with pytest.raises(RuntimeError, match=r"use_spmd\(\)"):
        xs.mark_sharding(torch.ones(2).to(dev), mesh, (0,))


def test_checkpoint_saved_on_8_devices_loads_on_4(spmd_results, checkpoint_dir):
    """The checkpoint `checkpoint_saved_on_one_mesh_loads_on_another` wrote on 8 devices,
    loaded onto a 2 x 2 mesh of 4 devices: every tensor as saved."""
    assert spmd_results[1].get("checkpoint_saved_on_one_mesh_loads_on_another") == "ok"
    env = dict(os.environ, CPU_NUM_DEVICES="4", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "tests.distributed._spmd_ckpt", checkpoint_dir],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.split() == ["loaded"], proc.stdout[-2000:] + proc.stderr[-4000:]
