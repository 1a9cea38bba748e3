"""transformers' Trainer on the XLA device, unchanged: a tiny GPT-2 built from a config (no
downloads) trains, evaluates and saves; on one device in this process, and on 4 with
torch_xla.launch (a process each)."""
import json
import os

import pytest
import torch

pytest.importorskip("transformers", reason="transformers is a client pinned in requirements-ci.txt")

from tests.clients import _hf  # noqa: E402  (sets the offline variables first)
import torch_xla  # noqa: E402
from tests.compare import assert_same


@pytest.fixture
def fresh_state():
    yield
    from accelerate.state import AcceleratorState, PartialState
    AcceleratorState._reset_state(True)
    PartialState._reset_state()


def test_training_arguments_pick_the_xla_device(fresh_state):
    from transformers import TrainingArguments
    assert TrainingArguments(output_dir="unused", report_to=[]).device == torch.device("xla", 0)


def _reloaded(path):
    from transformers import GPT2LMHeadModel
    return GPT2LMHeadModel.from_pretrained(path, local_files_only=True)


def test_trainer_trains_evaluates_and_saves(tmp_path, fresh_state):
    result = _hf.train(str(tmp_path))
    assert result["device"] == "xla:0" and result["model_device"] == "xla:0"
    losses = result["losses"]
    assert len(losses) == 8 and losses[-1] < 0.8 * losses[0], losses
    saved = _reloaded(tmp_path / "final")
    for name, value in saved.state_dict().items():
        assert_same(value, torch.tensor(result["weights"][name]), device="cpu")
    # The evaluation on the device is the CPU's loss of the same weights.
    assert result["eval_loss"] == pytest.approx(_hf.cpu_loss(saved, _hf.PatternDataset(32, seed=1), 8), rel=1e-5)


def test_syncfree_adamw_through_the_trainer(tmp_path, fresh_state):
    """optim='adamw_torch_xla' is transformers' name for torch_xla.amp.syncfree.AdamW."""
    result = _hf.train(str(tmp_path), epochs=1, optim="adamw_torch_xla")
    assert result["losses"][-1] < result["losses"][0]


def test_four_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("CPU_NUM_DEVICES", "4")
    torch_xla.launch(_hf.replica, args=(str(tmp_path),))
    results = [json.loads((tmp_path / f"replica{i}.json").read_text()) for i in range(4)]
    assert [(r["world"], r["index"]) for r in results] == [(4, i) for i in range(4)]
    for r in results:  # gradients were averaged: every replica holds the same model
        assert r["weights"] == results[0]["weights"] and r["eval_loss"] == results[0]["eval_loss"]
    assert len(results[0]["losses"]) == 2 and results[0]["losses"][1] < results[0]["losses"][0]
    saved = _reloaded(tmp_path / "final")
    assert results[0]["eval_loss"] == pytest.approx(_hf.cpu_loss(saved, _hf.PatternDataset(32, seed=1), 8), rel=1e-5)
    assert sorted(os.listdir(tmp_path / "final")) == ["config.json", "generation_config.json", "model.safetensors",
                                                      "training_args.bin"]


def test_four_processes_with_fsdp_xla(tmp_path, monkeypatch):
    """fsdp="full_shard", fsdp_config={"xla": True} (each GPT2Block wrapped): every replica
    holds a quarter of each (padded) parameter, and the checkpoint the Trainer consolidates from
    their shards evaluates on the CPU as the Trainer evaluated through FSDP."""
    monkeypatch.setenv("CPU_NUM_DEVICES", "4")
    torch_xla.launch(_hf.replica, args=(str(tmp_path), True))
    results = [json.loads((tmp_path / f"replica{i}.json").read_text()) for i in range(4)]
    # each parameter flattened, padded to a multiple of 4 x 128 (FSDP's shard multiple), a quarter each
    shards = sum(-(-p.numel() // 512) * 128 for p in _hf.tiny_gpt2().parameters())
    for r in results:
        assert r["model_class"] == "XlaFullyShardedDataParallel" and r["parameters"] == shards, r["parameters"]
        assert r["losses"] == results[0]["losses"] and r["eval_loss"] == results[0]["eval_loss"]
    assert len(results[0]["losses"]) == 2 and results[0]["losses"][1] < results[0]["losses"][0]
    saved = _reloaded(tmp_path / "final")
    assert results[0]["eval_loss"] == pytest.approx(_hf.cpu_loss(saved, _hf.PatternDataset(32, seed=1), 8), rel=1e-5)
