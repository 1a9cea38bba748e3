"""FSDPv1 (`XlaFullyShardedDataParallel`) and ZeRO-1 (`ZeroRedundancyOptimizer`): on one
device in this process, and on 4 DataParallel threads in one subprocess
(tests/distributed/_fsdp_main.py: losses and parameters against the whole batch on the CPU,
nested, checkpointed, dim-0 sharding with clipping, no_sync, compile counts)."""
import copy
import gc
import pickle
import weakref

import pytest
import torch
import torch.nn as nn

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla.distributed.fsdp import (XlaFullyShardedDataParallel as FSDP, always_wrap_policy,
                                        consolidate_sharded_model_checkpoints)
from torch_xla.distributed.fsdp.consolidate_sharded_ckpts import main as consolidate_main
from torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel import collect_tensors
from torch_xla.distributed.zero_redundancy_optimizer import ZeroRedundancyOptimizer
from tests.compare import assert_same
from tests.fresh_process import python


def test_four_replicas_train_as_one_model_on_the_whole_batch():
    proc = python("-m", "tests.distributed._fsdp_main", env={"CPU_NUM_DEVICES": 4})
    lines = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("ok ")]
    assert lines == ["root", "nested", "compiles", "checkpointed", "dim0+clip", "no_sync", "zero1"], proc.stdout


def test_collected_tensors_die_with_their_last_reference(dev):
    """The tensors a forward collects (for its optimization barrier) are not kept by a
    reference cycle until the collector runs: pending, they would stay roots of the step's
    graph, on which the replicas of a DataParallel run must agree."""
    a, b = torch.ones(2, device=dev), torch.zeros(3, device=dev)
    refs = [weakref.ref(a), weakref.ref(b)]
    gc.disable()
    try:
        got = collect_tensors(({"x": [a, (b, a)]}, 4, torch.ones(1)))
        assert len(got) == 2 and got[0] is a and got[1] is b
        del a, b, got
        assert [r() for r in refs] == [None, None]
    finally:
        gc.enable()


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))


def test_only_shards_are_parameters_and_the_module_is_reachable(dev):
    model = FSDP(_mlp(), auto_wrap_policy=always_wrap_policy)
    names = [n for n, _ in model.named_parameters()]
    assert len(names) == 4 and all("_fsdp_shard" in n for n in names)
    assert all(p._is_sharded and p.device == dev and p.dim() == 1 for p in model.parameters())
    assert isinstance(model.module.module, nn.Sequential)  # what transformers unwraps
    assert [n for n, _ in model.get_original_names_and_sharded_parameters()] == [
        "0.weight", "0.bias", "2.weight", "2.bias"]
    with pytest.raises(RuntimeError, match="already wrapped with FSDP"):
        FSDP(model)
    with pytest.raises(RuntimeError, match="must define a `forward`"):
        FSDP(nn.ModuleList([nn.Linear(2, 2)]))
    with pytest.raises(NotImplementedError, match="flatten_parameters=True"):
        FSDP(_mlp(), flatten_parameters=True)


def test_checkpoint_files_consolidate_into_the_unwrapped_state_dict(dev, tmp_path, capsys):
    ref = _mlp()
    model = FSDP(copy.deepcopy(ref), auto_wrap_policy=always_wrap_policy)
    xm.save({"model": model.state_dict(), "shard_metadata": model.get_shard_metadata()},
            str(tmp_path / "rank-0-of-1.pth"))
    full, path = consolidate_sharded_model_checkpoints(str(tmp_path / "rank-"), "*-of-1.pth")
    assert path == str(tmp_path / "rank-_consolidated.pth")
    assert_same(dict(full), ref.state_dict(), device="cpu")
    consolidate_main(["--ckpt_prefix", str(tmp_path / "rank-"), "--ckpt_suffix", "*-of-1.pth",
                      "--save_path", str(tmp_path / "full.pth")])
    assert_same(dict(torch.load(tmp_path / "full.pth")["model"]), ref.state_dict(), device="cpu")
    loaded = FSDP(_mlp().apply(lambda m: nn.init.zeros_(m.weight) if isinstance(m, nn.Linear) else None),
                  auto_wrap_policy=always_wrap_policy)
    loaded.load_state_dict(model.state_dict())
    x = torch.randn(4, 3)
    assert_same(loaded(x.to(dev)), ref(x))


class _CreatesFileWhenUnpickled:
    """What a checkpoint from elsewhere could hold: unpickling it opens (creates) a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def test_a_checkpoint_file_that_would_run_code_is_refused(dev, tmp_path):
    model, marker = FSDP(_mlp(), auto_wrap_policy=always_wrap_policy), tmp_path / "ran"
    torch.save({"model": model.state_dict(), "shard_metadata": model.get_shard_metadata(),
                "extra": _CreatesFileWhenUnpickled(str(marker))}, tmp_path / "rank-0-of-1.pth")
    with pytest.raises(pickle.UnpicklingError, match="rank-0-of-1.pth is refused"):
        consolidate_sharded_model_checkpoints(str(tmp_path / "rank-"), "*-of-1.pth", save_model=False)
    assert not marker.exists()


def test_steady_training_compiles_once_and_matches_the_cpu(dev):
    ref = _mlp()
    model = FSDP(copy.deepcopy(ref), auto_wrap_policy=always_wrap_policy, compute_dtype=torch.float32)
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    x, y = torch.randn(6, 3), torch.randn(6, 2)
    compiles = []
    for _ in range(4):
        loss = nn.functional.mse_loss(model(x.to(dev)), y.to(dev))
        loss.backward()
        model.clip_grad_norm_(0.5)
        opt.step()
        opt.zero_grad()
        xm.mark_step()
        compiles.append(met.counter_value("UncachedCompile"))
        ref_loss = nn.functional.mse_loss(ref(x), y)
        ref_loss.backward()
        nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        ref_opt.step()
        ref_opt.zero_grad()
        assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    assert compiles[-1] == compiles[-2] == compiles[-3], compiles


def test_zero1_steps_as_the_plain_optimizer(dev):
    ref = _mlp()
    model = copy.deepcopy(ref).to(dev)
    opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9, grad_clipping=False)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(6, 3), torch.randn(6, 2)
    for _ in range(3):
        nn.functional.mse_loss(model(x.to(dev)), y.to(dev)).backward()
        opt.step()
        opt.zero_grad()
        xm.mark_step()
        nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    assert_same(xm._maybe_convert_to_cpu(model.state_dict()), ref.state_dict(), device="cpu")
    assert set(opt.state_dict()) >= {"state", "param_groups", "base_state", "shape_info"}
