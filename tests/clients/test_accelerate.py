"""Hugging Face accelerate on the XLA device, unchanged: Accelerator(), prepare, a training
loop with accelerator.backward and gather, save_state and load_state; on one device in this
process, and on 4 with torch_xla.launch (a process each)."""
import json

import pytest
import torch

pytest.importorskip("accelerate", reason="accelerate is a client pinned in requirements-ci.txt")

import torch_xla  # noqa: E402
from tests.clients import _accelerate  # noqa: E402
from tests.compare import assert_same


def _tensors(weights):
    """The weights of a result (lists of floats, as JSON carries them) as float32 tensors."""
    return [torch.tensor(w) for w in weights]


@pytest.fixture
def fresh_state():
    from accelerate.state import AcceleratorState, PartialState
    yield
    AcceleratorState._reset_state(True)
    PartialState._reset_state()


@pytest.mark.parametrize("kwargs", [{}, {"cpu": True}])
def test_constructors_choose_the_xla_device(kwargs, fresh_state):
    """With torch_xla installed accelerate picks XLA, cpu=True or not (its choice, as with
    torch_xla; USE_TORCH_XLA=0 turns that off)."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedType
    acc = Accelerator(**kwargs)
    assert acc.device == torch.device("xla", 0) and acc.distributed_type == DistributedType.XLA
    assert acc.num_processes == 1 and acc.is_main_process


def test_training_on_one_device_matches_sgd_on_the_cpu(tmp_path, fresh_state):
    result = _accelerate.train(str(tmp_path))
    assert result["device"] == "xla:0" and result["processes"] == 1
    assert_same(_tensors(result["weights"]), _tensors(_accelerate.reference_weights(1)), rtol=1e-5, atol=1e-5,
                device="cpu")
    assert all(len(g) == 1 for g in result["gathered"])
    assert result["gathered"][-1][0] < result["gathered"][0][0]
    assert result["restored"] and "pytorch_model.bin" in result["files"]


def test_load_state_of_a_safetensors_checkpoint(tmp_path, fresh_state):
    result = _accelerate.train(str(tmp_path), epochs=1, safe_serialization=True)
    assert result["restored"] and "model.safetensors" in result["files"]


def test_four_processes_train_like_sgd_on_the_global_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("CPU_NUM_DEVICES", "4")
    torch_xla.launch(_accelerate.replica, args=(str(tmp_path),))
    results = [json.loads((tmp_path / f"replica{i}.json").read_text()) for i in range(4)]
    assert [(r["processes"], r["index"]) for r in results] == [(4, i) for i in range(4)]
    expected = _tensors(_accelerate.reference_weights(4))
    for r in results:
        assert_same(_tensors(r["weights"]), expected, rtol=1e-5, atol=1e-5, device="cpu")
        assert r["gathered"] == results[0]["gathered"]  # every replica sees every loss
        assert all(len(g) == 4 for g in r["gathered"]) and r["restored"]
    assert len(set(results[0]["gathered"][0])) == 4  # one distinct loss per replica's batch
    assert {f"random_states_{i}.pkl" for i in range(4)} <= set(results[0]["files"])
