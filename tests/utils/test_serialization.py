"""torch_xla.utils.serialization: the structure in one file, each tensor in a file of its
own, CPU tensors back with the saved values; only the master writes."""
import os
import pickle
import re

import pytest
import torch

import torch_xla.utils.serialization as xser
from tests.compare import assert_same


def test_save_and_load_a_state_dict(dev, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).to(dev)
    extra = torch.arange(4, device=dev) * 2  # pending: computed by the save
    path = str(tmp_path / "data.pt")
    xser.save({"model": model.state_dict(), "extra": (extra, extra), "step": 7}, path)
    assert sorted(os.listdir(path + ".tensors")) == ["tensor_0.pt", "tensor_1.pt", "tensor_2.pt"]
    loaded = xser.load(path)
    assert loaded["step"] == 7
    assert all(t.device.type == "cpu" for t in loaded["model"].values())
    assert_same(dict(model.state_dict()), dict(loaded["model"]))
    a, b = loaded["extra"]  # one tensor saved twice is one file
    assert a is b and torch.equal(a, torch.arange(4) * 2)
    cpu = torch.nn.Linear(3, 2)
    cpu.load_state_dict(loaded["model"])
    assert_same(cpu.to(dev).state_dict(), model.state_dict())


def test_only_the_master_writes(dev, tmp_path, monkeypatch):
    from torch_xla._lazy.runtime import pjrt
    monkeypatch.setattr(pjrt, "local_ordinal", lambda: 1)  # this process: not the master
    path = str(tmp_path / "data.pt")
    xser.save([torch.ones(2, device=dev)], path)
    assert not os.path.exists(path) and not os.path.exists(path + ".tensors")
    xser.save([torch.ones(2, device=dev)], path, master_only=False)
    assert torch.equal(xser.load(path)[0], torch.ones(2))


class Holder:
    """A user's class in a saved structure: loads only where the user allows it."""

    def __init__(self, weight):
        self.weight = weight


def test_objects_of_the_users_classes_load_where_allowed(dev, tmp_path):
    path = str(tmp_path / "data.pt")
    xser.save({"holder": Holder(torch.ones(2, device=dev))}, path)
    with pytest.raises(pickle.UnpicklingError, match="safe_globals"):
        xser.load(path)
    with torch.serialization.safe_globals([Holder]):
        loaded = xser.load(path)["holder"]
    assert type(loaded) is Holder and torch.equal(loaded.weight, torch.ones(2))


class _CreatesFileWhenUnpickled:
    """What a file from elsewhere could hold: unpickling it opens (creates) a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize("crafted", ["structure", "tensor"])
def test_a_file_that_would_run_code_is_refused(dev, tmp_path, crafted):
    path, marker = str(tmp_path / "data.pt"), str(tmp_path / "ran")
    xser.save({"w": torch.ones(2, device=dev)}, path)
    target = path if crafted == "structure" else os.path.join(path + ".tensors", "tensor_0.pt")
    torch.save({"w": _CreatesFileWhenUnpickled(marker)}, target)
    with pytest.raises(pickle.UnpicklingError, match=f"(?s){re.escape(target)} is refused.*GLOBAL io.open"):
        xser.load(path)
    assert not os.path.exists(marker)
