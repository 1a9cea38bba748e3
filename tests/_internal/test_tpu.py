"""torch_xla._internal.tpu: the TPU count and version on a host without TPUs."""
import pytest


def test_tpu_count_is_zero_on_a_host_without_tpus(monkeypatch):
    from torch_xla._internal import tpu
    assert tpu.num_available_chips() == 0 and tpu.num_available_devices() == 0
    monkeypatch.delenv("TPU_ACCELERATOR_TYPE", raising=False)
    monkeypatch.delenv("ACCELERATOR_TYPE", raising=False)
    with pytest.raises(EnvironmentError, match="no TPU"):
        tpu.version()
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v3-8")
    assert tpu.version() == 3 and tpu.num_logical_cores_per_chip() == 2
