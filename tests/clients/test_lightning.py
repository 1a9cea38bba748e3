"""PyTorch Lightning with this package installed: Trainer(accelerator='cpu') and 'auto' still
train on the CPU, and a LightningModule fits, with save_checkpoint, through Lightning's XLA
strategies: SingleDeviceXLAStrategy in this process, XLAStrategy on 4 devices."""
import json

import pytest
import torch

pytest.importorskip("lightning", reason="lightning is a client pinned in requirements-ci.txt")

from tests.clients import _lightning  # noqa: E402
from tests.compare import assert_same
from tests.fresh_process import python


def _checkpoint_weights(path):
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


@pytest.fixture
def xla_available():
    from lightning.fabric.accelerators.xla import XLAAccelerator
    original = XLAAccelerator.__dict__["auto_device_count"]
    _lightning.tell_device_count(1)
    yield
    XLAAccelerator.auto_device_count = original
    XLAAccelerator.is_available.cache_clear()


def test_lightning_sees_no_tpu_here():
    from lightning.fabric.accelerators.xla import XLAAccelerator
    XLAAccelerator.is_available.cache_clear()
    assert XLAAccelerator.auto_device_count() == 0 and not XLAAccelerator.is_available()


@pytest.mark.parametrize("accelerator", ["cpu", "auto"])
def test_cpu_and_auto_still_train_on_the_cpu(accelerator, tmp_path):
    result = _lightning.fit(accelerator, 1, str(tmp_path))
    assert (result["strategy"], result["accelerator"]) == ("SingleDeviceStrategy", "CPUAccelerator")
    assert_same(_checkpoint_weights(result["checkpoint"]), _lightning.reference_weights(), device="cpu")


def test_single_device_xla_strategy(tmp_path, xla_available):
    result = _lightning.fit("tpu", 1, str(tmp_path))
    assert (result["strategy"], result["accelerator"]) == ("SingleDeviceXLAStrategy", "XLAAccelerator")
    assert_same(_checkpoint_weights(result["checkpoint"]), _lightning.reference_weights(), rtol=1e-5, atol=1e-5,
                device="cpu")


def test_xla_strategy_on_four_devices(tmp_path):
    python("-m", "tests.clients._lightning", "fit", 4, tmp_path, env={"CPU_NUM_DEVICES": 4})
    result = json.loads((tmp_path / "result.json").read_text())
    assert (result["strategy"], result["accelerator"]) == ("XLAStrategy", "XLAAccelerator")
    assert_same(_checkpoint_weights(result["checkpoint"]), _lightning.reference_weights(), rtol=1e-5, atol=1e-5,
                device="cpu")


def test_xla_fsdp_strategy_on_four_devices(tmp_path):
    """Fabric's XLAFSDPStrategy (FSDPv1, the Linear auto-wrapped): the replicas' shards
    consolidate into the weights of full-batch SGD on the CPU."""
    from torch_xla.distributed.fsdp import consolidate_sharded_model_checkpoints
    python("-m", "tests.clients._lightning", "fsdp", 4, tmp_path, env={"CPU_NUM_DEVICES": 4})
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["strategy"] == "XLAFSDPStrategy"
    assert torch.load(tmp_path / "shard-0-of-4.pth", weights_only=False)["class"] == "XlaFullyShardedDataParallel"
    weights, _ = consolidate_sharded_model_checkpoints(result["prefix"], "*-of-4.pth", save_model=False)
    assert_same(dict(weights), _lightning.reference_weights(), rtol=1e-5, atol=1e-5,
                device="cpu")
