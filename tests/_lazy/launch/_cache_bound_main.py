"""Run by tests/_lazy/launch/test_graph_program.py with small cache bounds: 5,000 small steps over 50
distinct shapes (50 steps each, the cycle run twice). Prints, every 500 steps, the resident
memory (MB), the sizes of the caches, the live device arrays (less the scalars programs
keep) and the live compiled programs; then the eviction counts, the result and the number of compilations."""
import gc
import json
import os

import jax
import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from torch_xla._lazy.trace import dispatch, meta
from torch_xla._lazy.launch import graph_program
from torch_xla._lazy.runtime import runner

STEPS, SHAPES, STEPS_PER_SHAPE, EVERY = 5000, 50, 50, 500


def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def live_programs():
    """The live compiled programs, and the device arrays they hold: each keeps its last
    scalars on the device (`Program.pack_on`; programs share a value's array), bounded by
    the programs, not counted as the step's arrays."""
    programs = [o for o in gc.get_objects() if type(o) is graph_program.Program]
    return len(programs), len({id(a) for p in programs if p.placed is not None for a in p.placed[1]})


def main():
    dev = xm.xla_device()
    total = torch.zeros((), device=dev)
    xm.mark_step()
    met.clear_counters()
    samples = []
    for step in range(STEPS):
        n = 1 + (step // STEPS_PER_SHAPE) % SHAPES
        x = torch.full((n, 3), 0.5, device=dev)
        total = total + (x * 2 + 1).sum() * 1e-3
        xm.mark_step()
        if step % EVERY == EVERY - 1:
            gc.collect()
            programs, placed = live_programs()
            samples.append({
                "rss_mb": resident_mb(), "programs": runner.cache_size(), "meta": len(meta._cache),
                "routes": len(dispatch._routes), "live_arrays": len(jax.live_arrays()) - placed,
                "live_programs": programs})
    evictions = {n: met.counter_value(n) for n in met.counter_names() if n.endswith("CacheEvictions")}
    print(json.dumps({"samples": samples, "evictions": evictions, "total": total.item(),
                      "compiles": met.counter_value("UncachedCompile")}))


if __name__ == "__main__":
    main()
