"""xr.initialize_cache: a second process loads its programs from disk instead of compiling."""
import json
import os
import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    import torch_xla, torch_xla.runtime as xr, torch_xla.debug.metrics as met
    xr.initialize_cache(sys.argv[1], readonly=sys.argv[2] == 'readonly')
    d = torch_xla.device()
    x = torch.arange(6, dtype=torch.float32).to(d).reshape(2, 3)
    values = [(x * 2 + 1).sum(1).cpu().tolist()]
    if sys.argv[2] == 'readonly':  # a program the first run never built
        values.append((x.t() @ x).trace().item())
    print(json.dumps({'values': values, 'hit': met.counter_value('PersistentCacheHit'),
                      'miss': met.counter_value('PersistentCacheMiss'),
                      'compiled': met.counter_value('UncachedCompile')}))
""")


def _run(cache_dir, mode):
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(cache_dir), mode], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_programs_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = _run(cache, "write")
    assert first["hit"] is None and first["miss"] == first["compiled"] >= 1
    entries = sorted(os.listdir(cache))
    assert len(entries) == first["compiled"]

    second = _run(cache, "readonly")
    assert second["values"][0] == first["values"][0] == [9.0, 27.0]
    assert second["values"][1] == 55.0  # sum of squares of 0..5
    # the first run's programs are loaded; the new one is compiled but, read-only, not written
    assert second["hit"] == first["compiled"] and second["miss"] is None
    assert second["compiled"] == first["compiled"] + 1
    assert sorted(os.listdir(cache)) == entries
