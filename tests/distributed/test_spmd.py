"""SPMD over 8 CPU devices (`xr.use_spmd()`, `torch_xla.distributed.spmd`): the checks of
tests/distributed/_spmd_main.py, run in a subprocess with CPU_NUM_DEVICES=8 (SPMD mode is
for a whole process; this one has 1 device and stays out of it), a fresh one after a
failure, so that each failure is reported as itself (`_check_runner`)."""
import os
from unittest import mock

import numpy as np
import pytest
import torch

import torch_xla.debug.metrics as met
import torch_xla.distributed.spmd as xs
from tests.distributed import _check_runner, _spmd_main
from tests.fresh_process import python


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("spmd_checkpoint"))


@pytest.fixture(scope="module")
def spmd_results(checkpoint_dir):
    env = {"CPU_NUM_DEVICES": 8, "SPMD_CHECKPOINT_DIR": checkpoint_dir}
    return _check_runner.run("tests.distributed._spmd_main", list(_spmd_main.CHECKS), env)


@pytest.mark.parametrize("name", list(_spmd_main.CHECKS))
def test_spmd(spmd_results, name):
    assert spmd_results[name] is None, spmd_results[name]


def test_mark_sharding_needs_spmd_mode(dev):
    mesh = xs.Mesh(np.arange(1), (1,))
    with pytest.raises(RuntimeError, match=r"use_spmd\(\)"):
        xs.mark_sharding(torch.ones(2).to(dev), mesh, (0,))


def test_checkpoint_saved_on_8_devices_loads_on_4(spmd_results, checkpoint_dir):
    """The checkpoint `checkpoint_saved_on_one_mesh_loads_on_another` wrote on 8 devices,
    loaded onto a 2 x 2 mesh of 4 devices: every tensor as saved."""
    assert spmd_results["checkpoint_saved_on_one_mesh_loads_on_another"] is None
    proc = python("-m", "tests.distributed._spmd_ckpt", checkpoint_dir, env={"CPU_NUM_DEVICES": 4})
    assert proc.stdout.split() == ["loaded"], proc.stdout[-2000:] + proc.stderr[-4000:]


def test_a_process_killed_in_an_async_save_leaves_the_last_checkpoint_to_restore(tmp_path):
    """SIGKILL while the background thread writes checkpoint 1 (its data written, not yet
    complete): a fresh process sees checkpoint 0 alone and restores it exactly."""
    env = {"CPU_NUM_DEVICES": 4}
    saved = python("-m", "tests.distributed._spmd_ckpt_kill", "save", tmp_path, env=env, check=False)
    assert saved.returncode == -9, saved.stdout[-2000:] + saved.stderr[-4000:]
    assert sorted(os.listdir(tmp_path)) == ["0", "1", "expected.pt"]
    restored = python("-m", "tests.distributed._spmd_ckpt_kill", "restore", tmp_path, env=env)
    # less the lines torch 2.9 and 2.10's gloo prints on stdout for each process group it
    # connects ("[Gloo] Rank 0 is connected to 0 peer ranks. ...")
    printed = [line for line in restored.stdout.splitlines() if not line.startswith("[Gloo] ")]
    assert printed == ["restored"], restored.stdout[-2000:] + restored.stderr[-4000:]


def test_hybrid_mesh_places_a_tpu_slices_devices_by_their_torus_coordinates():
    """On a runtime whose devices are TPU chips of two slices (attributes as PJRT gives them,
    listed out of order), each slice's devices fill its ICI block by their coordinates (the
    mesh's last axis along x), as jax's mesh_utils lays out a TPU torus, slice 0 first."""
    coords = [(0, 0), (1, 0), (0, 1), (1, 1)]
    ordinals = [[5, 2, 7, 0], [3, 6, 1, 4]]  # each slice's chips, in the order of `coords`
    attributes = [{"name": f"TPU:{ordinals[s][i]}", "coords": [x, y, 0], "core_on_chip": 0,
                   "slice_index": s} for s in (1, 0) for i, (x, y) in enumerate(coords)]
    with mock.patch("torch_xla.runtime.global_runtime_device_attributes", return_value=attributes), \
            mock.patch("torch_xla.runtime.global_runtime_device_count", return_value=8):
        hybrid = xs.HybridMesh(ici_mesh_shape=(2, 2), dcn_mesh_shape=(2, 1))
    at = {(s, x, y): ordinals[s][i] for s in (0, 1) for i, (x, y) in enumerate(coords)}
    assert hybrid.get_logical_mesh().tolist() == [[at[row // 2, col, row % 2] for col in (0, 1)]
                                                 for row in range(4)]


def test_a_meshs_shardings_are_made_once_per_partition_spec():
    met.clear_all()
    mesh = xs.Mesh(np.arange(1), (1, 1), ('a', 'b'))
    mesh.get_op_sharding((0, 1))
    assert met.counter_value("CreateOpSharding") == 1
    xs.Mesh(np.arange(1), (1, 1), ('a', 'b')).get_op_sharding(('a', 'b'))  # the same layout
    assert met.counter_value("CreateOpSharding") == 1
    mesh.get_op_sharding((0, None))
    assert met.counter_value("CreateOpSharding") == 2
