"""How processes find each other (`_lazy/runtime/hosts`), without starting any: torchrun's layout,
the coordinator's address, the address gloo listens at. tests/multihost runs them on
hosts of their own."""
import datetime
import os

import pytest
import torch.distributed as dist

from torch_xla._lazy.runtime import hosts

TORCHRUN = {"TORCHELASTIC_RUN_ID": "job", "TORCHELASTIC_USE_AGENT_STORE": "True", "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2"}
LAYOUT = ("TORCH_XLA_NUM_PROCESSES", "TORCH_XLA_PROCESS_ID", "TORCH_XLA_LOCAL_PROCESS_ID",
          "TORCH_XLA_NUM_HOSTS", "TORCH_XLA_HOST_INDEX", "TORCH_XLA_LOCAL_DEVICE",
          "TORCH_XLA_COORDINATOR", "XLA_COORDINATOR_PORT", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def env(monkeypatch):
    for name in LAYOUT:  # set, then removed: restored as they were after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    for name, value in TORCHRUN.items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def test_torchrun_layout_becomes_the_runtime_layout(env):
    env.setenv("PJRT_DEVICE", "CPU")
    hosts.adopt_torchrun_layout()
    assert [os.environ.get(n) for n in LAYOUT[:6]] == ["8", "5", "1", "2", "1", None]
    env.setenv("PJRT_DEVICE", "CUDA")  # a GPU host's process drives its local rank's GPU
    hosts.adopt_torchrun_layout()
    assert os.environ["TORCH_XLA_LOCAL_DEVICE"] == "1"


def test_coordinator_from_the_environment(env):
    with pytest.raises(RuntimeError, match="TORCH_XLA_COORDINATOR=host:port"):
        hosts.coordinator()
    env.setenv("MASTER_ADDR", "10.1.2.3")
    env.setenv("XLA_COORDINATOR_PORT", "8547")
    assert hosts.coordinator() == "10.1.2.3:8547"
    env.setenv("TORCH_XLA_COORDINATOR", "10.9.9.9:1234")
    assert hosts.coordinator() == "10.9.9.9:1234"


def test_coordinator_port_agreed_through_torchruns_store(env):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=30))
    env.setenv("MASTER_ADDR", "127.0.0.1")
    env.setenv("MASTER_PORT", str(store.port))
    env.setenv("TORCH_XLA_PROCESS_ID", "0")  # process 0 picks and publishes the port
    first = hosts.coordinator()
    host, port = first.rsplit(":", 1)
    assert host == "127.0.0.1" and 0 < int(port) < 65536 and port != str(store.port)
    env.delenv("TORCH_XLA_COORDINATOR")
    env.setenv("TORCH_XLA_PROCESS_ID", "3")  # another reads it
    assert hosts.coordinator() == first
    env.delenv("TORCH_XLA_COORDINATOR")
    env.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")  # no store to agree through
    with pytest.raises(RuntimeError, match="XLA_COORDINATOR_PORT"):
        hosts.coordinator()


def test_gloo_listens_where_the_coordinator_is_reached_from():
    assert hosts.local_address("127.0.0.1:1234") == "127.0.0.1"
    assert hosts.local_address("[::1]:1234") == "::1"
