"""Programs on disk found by the engine's graph key: a second process loads them without
lowering or compiling, and only keys with an exact spelling are stored."""
import json
import os
import pickle
import textwrap

import numpy as np
import pytest
import torch

from torch_xla._lazy.runtime import runner
from torch_xla._lazy.graph.ir import In, Sc
from torch_xla._lazy.launch.program_store import key_text
from tests.fresh_process import python


def test_key_text_spells_keys_exactly_or_refuses():
    key = (("aten.add.Tensor", ((In(0), Sc(0, float)), ()), (((2, 3), torch.float32),)),
           torch.device("xla", 0), torch.contiguous_format, slice(None, 4), float, {"b": 1, "a": 2})
    assert key_text(key) == key_text(key) is not None
    # keys that differ are spelled differently: floats by their bits, containers by type
    assert key_text((0.1,)) != key_text((0.1 + 2 ** -55,))
    assert key_text((0.0,)) != key_text((-0.0,))
    assert key_text((1,)) != key_text((1.0,)) != key_text((True,))
    assert key_text(((1, 2),)) != key_text(([1, 2],))
    assert key_text((torch.float32,)) != key_text((torch.bfloat16,))
    # anything without an exact, process-independent spelling is refused
    for unspelled in (lambda x: x, np.zeros(3), torch.zeros(3), object(), print):
        assert key_text(("aten.op", (unspelled,))) is None


_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    import torch_xla, torch_xla.runtime as xr, torch_xla.debug.metrics as met
    xr.initialize_cache(sys.argv[1])
    d = torch_xla.device()
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 3).to(d)
    x = torch.randn(5, 8, device=d)
    loss = torch.nn.functional.dropout(layer(x).relu(), 0.25).sum()
    loss.backward()
    torch_xla.sync()
    values = [loss.item(), layer.weight.grad.sum().item()]
    lowered = met.metric_data('LoweringTime')
    print(json.dumps({'values': values,
                      'hit': met.counter_value('PersistentCacheHit'),
                      'compiled': met.counter_value('UncachedCompile'),
                      'lowered': lowered[0] if lowered else 0}))
""")


def _run(cache):
    return json.loads(python("-c", _SCRIPT, cache).stdout.strip().splitlines()[-1])


def test_second_process_loads_the_programs_without_lowering_them(tmp_path):
    runs = [_run(tmp_path) for _ in range(2)]
    first, second = runs
    assert first["hit"] is None and first["lowered"] == first["compiled"] >= 1
    assert len(list((tmp_path / "programs").iterdir())) >= 1
    assert second["values"] == first["values"]
    assert second["compiled"] == first["compiled"]
    assert second["lowered"] == 0 and second["hit"] == second["compiled"]


class _CreatesFileWhenUnpickled:
    """What an entry written by someone else could hold: unpickling it opens (creates) a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def test_an_entry_that_would_run_code_when_unpickled_is_compiled_anew(tmp_path):
    cache, marker = tmp_path / "cache", tmp_path / "ran"
    first = _run(cache)
    entries = list((cache / "programs").iterdir())
    for entry in entries:  # in the format this store used to read: a pickle
        entry.write_bytes(pickle.dumps(_CreatesFileWhenUnpickled(str(marker))))
    second = _run(cache)
    assert not marker.exists()
    assert second["values"] == first["values"]
    assert second["lowered"] == second["compiled"] == first["compiled"]  # every program compiled
    assert all(e.read_bytes().startswith(b"TXLAPRG1") for e in entries)  # and rewritten


def test_a_cache_directory_others_can_write_to_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    assert runner.persistent_cache() is None
    with pytest.warns(UserWarning, match="is writable by everyone"):
        runner.initialize_persistent_cache(shared)
    assert runner.persistent_cache() is None
