"""The program runner: the one place programs are compiled, cached, counted and explained."""
import ast
import pathlib
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import torch_xla.debug.metrics as met
from torch_xla._lazy.runtime import runner
from torch_xla._lazy.runtime.graph_analysis import Explanation

PACKAGE = pathlib.Path(__file__).resolve().parents[3] / "torch_xla"


def _compile_sites(path):
    """Lines of `path` that jit, lower, compile or export a program: `jax.jit`, `jit(...)`
    imported from jax, `jax.export.export`, `<x>.lower(<args>)` and `<x>.compile(...)`
    (but `re.compile`, `torch.compile` and the runner's own `runner.compile`)."""
    sites = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jax"):
            sites += [node.lineno for a in node.names if a.name in ("jit", "export")]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, base = node.func.attr, node.func.value
        base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
        dotted = ast.unparse(node.func)
        if dotted in ("jax.jit", "jax.export.export") \
                or (attr == "lower" and base_name != "runner" and (node.args or node.keywords)) \
                or (attr == "compile" and base_name not in ("re", "torch", "runner")):
            sites.append(node.lineno)
    return sites


def test_programs_are_compiled_only_by_the_runner():
    found = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "runner.py" and (lines := _compile_sites(p))}
    assert not found, f"compiled outside torch_xla/_lazy/runtime/runner.py: {found}"


def test_the_site_finder_sees_each_kind_of_site(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import jax\nf = jax.jit(abs)\ng = f.lower(1)\nh = g.compile()\n"
                      "import re\nr = re.compile('x')\ns = 'A'.lower()\n")
    assert _compile_sites(source) == [2, 3, 4]


def test_compile_caches_counts_and_times_each_program(monkeypatch):
    monkeypatch.setenv("XLA_TEST_CACHE_SIZE", "2")
    monkeypatch.setattr(runner, "_cache", runner.LRUCache("Program", "XLA_TEST_CACHE_SIZE", 100))
    met.clear_all()
    placement = runner.on_device(0)
    explained = []
    args = (np.ones(3, np.float32),)
    for n in range(3):
        key = ("test", n)
        assert runner.lookup(key, placement) is None
        program = runner.compile(lambda x, n=n: x * n, args, placement, key=key,
                                 explain=Explanation((1, 1), lambda n=n: explained.append(n) or []))
        assert runner.lookup(key, placement) is program
        assert np.asarray(runner.execute(program, jnp.ones(3, jnp.float32))).tolist() == [n] * 3
    assert runner.is_cached(program) and runner.cache_size() == 2
    assert met.counter_value("UncachedCompile") == 3 and met.counter_value("CachedCompile") == 3
    assert met.metric_data("CompileTime")[0] == 3 and met.metric_data("ExecuteTime")[0] == 3
    assert met.counter_value("ProgramCacheEvictions") == 1
    assert explained == []  # PT_XLA_DEBUG is not set


def test_the_analysis_is_written_under_pt_xla_debug(monkeypatch, tmp_path):
    log = tmp_path / "analysis.txt"
    monkeypatch.setenv("PT_XLA_DEBUG_LEVEL", "1")
    monkeypatch.setenv("PT_XLA_DEBUG_FILE", str(log))
    explanation = Explanation((1, 1), lambda: ["why: a test"])
    program = runner.compile(lambda x: x + 1, (np.ones(2, np.float32),), runner.on_device(0),
                             explain=explanation)
    runner.execute(program, jnp.ones(2, jnp.float32))  # level 1: no execution analysis
    text = log.read_text()
    assert text.count("Compilation Analysis: Compilation Cause\n") == 1, text
    assert "Compilation Analysis:   why: a test\n" in text and "Execution Analysis" not in text
    assert "Compilation Analysis:   Number of Graph Inputs: 1\n" in text
    assert "Post Compilation Analysis: Graph input size: 0.000000 GB\n" in text
    monkeypatch.setenv("PT_XLA_DEBUG_LEVEL", "2")
    runner.execute(program, jnp.ones(2, jnp.float32))
    runner.execute(program, jnp.ones(2, jnp.float32), analysed=False)  # (an eager op's run)
    assert log.read_text().count("Execution Analysis: Execution Cause\n") == 1


def test_runs_launched_and_read_from_several_threads_are_each_timed_once():
    """Replica threads launch programs and look for finished runs at once (`xmp` over
    threads): a few rounds, threads switching often, as on a busy machine."""
    import threading
    program = runner.compile(lambda x: x @ x @ x @ x, (np.ones((256, 256), np.float32),),
                             runner.on_device(0))  # long enough for runs to queue up
    x = jnp.ones((256, 256), jnp.float32)
    met.clear_all()
    errors = []

    def replica():
        try:
            for _ in range(200):
                out = runner.execute(program, x)
                runner.before_wait()
            out.block_until_ready()
            runner.time_finished_runs(after_wait=True)
        except Exception as e:  # noqa: BLE001 (reported below, in the test's thread)
            errors.append(e)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(5):
            threads = [threading.Thread(target=replica) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    runner.time_finished_runs()
    assert met.metric_data("ExecuteTime")[0] == 5 * 4 * 200 and not runner.running()


@pytest.mark.parametrize("donate", [False, True])
def test_donation_gives_the_first_arguments_buffers_to_the_program(donate):
    import jax
    x = jax.device_put(np.ones(4, np.float32), runner.on_device(0).device)
    program = runner.compile(lambda a, b: (a[0] + b,), ((x,), x + 0), runner.on_device(0), donate=donate)
    out, = runner.execute(program, (x,), x + 1)
    assert np.asarray(out).tolist() == [3.0] * 4
    assert x.is_deleted() is donate


@pytest.mark.skipif(runner.max_maps is None, reason="the process's memory maps are Linux's /proc")
def test_the_cache_keeps_the_process_within_its_memory_maps(monkeypatch):
    """Each compiled program holds memory maps of its own (XLA's CPU kernels); the cache
    evicts the least recently used half once the process holds over half the maps Linux
    allows it, and the evicted programs' maps are freed."""
    monkeypatch.setattr(runner, "_cache", runner.LRUCache("Program", "XLA_TEST_CACHE_SIZE", 100))
    monkeypatch.setattr(runner, "MAPS_CHECK_EVERY", 8)
    monkeypatch.setattr(runner, "_compiled_since_check", 0)
    placement = runner.on_device(0)

    def program(n):
        return lambda x: (jnp.tanh(x @ x.T) * n).sum(0) + jnp.cumsum(x, 0)[0]
    args = (np.ones((4, 4), np.float32),)
    runner.compile(program(-1), args, placement)  # jax's own first-compile maps, uncached
    before = runner._memory_maps()
    monkeypatch.setattr(runner, "max_maps", 2 * (before + 30))
    met.clear_all()
    for n in range(7):
        runner.compile(program(n), args, placement, key=("maps", n))
    grown = runner._memory_maps()
    assert grown > before + 30, "each program maps its kernels"  # the premise of the bound
    assert runner.cache_size() == 7 and met.counter_value("ProgramCacheEvictions") is None
    runner.compile(program(7), args, placement, key=("maps", 7))  # the 8th: the maps counted
    assert runner.cache_size() == 4 and met.counter_value("ProgramCacheEvictions") == 4
    assert runner._memory_maps() < grown
    assert runner.lookup(("maps", 0), placement) is None
    assert runner.lookup(("maps", 7), placement) is not None
