"""The replica-facing API on 4 processes (xmp.spawn): see tests/distributed/_api_workers.py."""
import torch_xla
from tests.distributed import _api_workers


def test_replica_api_on_four_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("CPU_NUM_DEVICES", "4")
    torch_xla.launch(_api_workers.replica, args=(str(tmp_path),))
