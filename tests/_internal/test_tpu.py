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


_TPU_ENV = """
ACCELERATOR_TYPE: 'v4-16'
CHIPS_PER_HOST_BOUNDS: '2,2,1'
HOST_BOUNDS: '1,1,2'
TPU_CHIPS_PER_PROCESS_BOUNDS: '2,2,1'
TPU_PROCESS_BOUNDS: '1,1,2'
WORKER_ID: '1'
"""
_ENDPOINTS = "t1v-w-0:8470:10.0.0.5,t1v-w-1:8470:10.0.0.6"


@pytest.fixture
def tpu_vm(monkeypatch):
    """A host of a two-host v4-16 slice, as its metadata server describes it."""
    from torch_xla._internal import tpu
    for name in ("TPU_SKIP_MDS_QUERY", "TPU_ACCELERATOR_TYPE", "ACCELERATOR_TYPE",
                 "TPU_PROCESS_BOUNDS", "TPU_CHIPS_PER_PROCESS_BOUNDS", "CLOUD_TPU_TASK_ID",
                 "TPU_PROCESS_ADDRESSES", "TPU_VISIBLE_CHIPS", "TPU_PROCESS_PORT"):
        monkeypatch.delenv(name, raising=False)
    metadata = {"tpu-env": _TPU_ENV, "worker-network-endpoints": _ENDPOINTS}
    monkeypatch.setattr(tpu, "_get_metadata", metadata.__getitem__)
    return tpu


def test_the_slice_is_read_from_the_metadata_server(tpu_vm):
    env = tpu_vm.get_tpu_env()
    assert env["ACCELERATOR_TYPE"] == "v4-16" and env["WORKER_ID"] == "1"
    assert tpu_vm.version() == 4 and tpu_vm.get_tpu_type() == "v4" and tpu_vm.worker_id() == 1
    assert tpu_vm.get_worker_ips() == ["10.0.0.5", "10.0.0.6"] and tpu_vm.num_tpu_workers() == 2


def test_each_local_process_gets_one_chip_of_the_slice(tpu_vm):
    import os
    tpu_vm.configure_topology(local_rank=2, local_world_size=4)
    assert os.environ["TPU_PROCESS_BOUNDS"] == "2,2,2"  # 1,1,2 hosts of 2,2,1 chips
    assert os.environ["TPU_CHIPS_PER_PROCESS_BOUNDS"] == "1,1,1"
    assert os.environ["CLOUD_TPU_TASK_ID"] == "6" and os.environ["TPU_VISIBLE_CHIPS"] == "2"
    assert os.environ["TPU_PROCESS_PORT"] == "8478"
    assert os.environ["TPU_PROCESS_ADDRESSES"].split(",") == [
        f"10.0.0.{h}:{p}" for h in (5, 6) for p in range(8476, 8480)]
    assert tpu_vm.task_id() == 6 and tpu_vm.process_bounds_size() == 8


def test_the_environment_stands_for_the_metadata_when_told(tpu_vm, monkeypatch):
    monkeypatch.setenv("TPU_SKIP_MDS_QUERY", "1")
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    monkeypatch.setenv("TPU_HOST_BOUNDS", "1,1,1")
    monkeypatch.setenv("TPU_CHIPS_PER_HOST_BOUNDS", "2,4,1")
    monkeypatch.setenv("TPU_WORKER_ID", "0")
    assert tpu_vm.get_tpu_env() == {"ACCELERATOR_TYPE": "v5litepod-8", "TPU_PROCESS_BOUNDS": "1,1,1",
                                    "TPU_CHIPS_PER_PROCESS_BOUNDS": "2,4,1", "WORKER_ID": "0"}
    assert tpu_vm.version() == 5 and tpu_vm.get_worker_ips() == ["localhost"]


def test_no_more_local_processes_than_the_slice_has(tpu_vm, monkeypatch):
    monkeypatch.setattr(tpu_vm, "num_available_chips", lambda: 4)
    assert tpu_vm.num_local_processes() == 4
    monkeypatch.setenv("TPU_PROCESS_BOUNDS", "1,1,1")
    assert tpu_vm.num_local_processes() == 1


def test_importing_leaves_the_metadata_switch_as_the_user_set_it():
    from tests.fresh_process import python
    code = "import os, torch_xla; print(os.environ.get('TPU_SKIP_MDS_QUERY'))"
    assert python("-c", code, env={"TPU_SKIP_MDS_QUERY": None}).stdout.strip() == "None"
