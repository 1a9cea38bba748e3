"""torch_xla's top-level API (torch_xla/torch_xla.py, torch_xla/__init__.py): devices, sync and
step closures, compile/step, launch, seeds, the version and distribution metadata, and what
`import torch_xla` makes reachable."""
import importlib.metadata

import pytest
import torch
from packaging.version import Version

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr
from torch_xla.utils import closures

from tests.compare import EXACT, assert_same, compiles
from tests.fresh_process import python


def _executions():
    return compiles() + (met.counter_value("CachedCompile") or 0)


def test_version_and_distribution_metadata():
    """Clients gate on importlib.metadata (Lightning asks torch_xla>=2.5): the distribution
    is torch_xla, its version the 2.9 API with this project's label."""
    version = importlib.metadata.version("torch_xla")
    assert version == torch_xla.__version__
    assert Version(version).release[:2] == (2, 9) and Version(version) >= Version("2.5")
    assert Version(version).local.startswith("jax")


def test_import_makes_the_submodules_reachable():
    code = ("import torch_xla; print(torch_xla.runtime.world_size(), "
            "torch_xla.core.xla_model.xla_device(), callable(torch_xla._XLAC._xla_get_default_device), "
            "torch_xla.experimental.__name__, torch_xla.runtime.is_spmd())")
    out = python("-c", code, env={"XLA_USE_SPMD": 1})  # torch_xla's older switch: SPMD from the start
    assert out.stdout.split() == ["1", "xla:0", "True", "torch_xla.experimental", "True"]


def test_devices():
    assert torch_xla.device() == torch.device("xla", 0) == torch_xla.device(0)
    assert torch_xla.devices() == [torch.device("xla", 0)]
    assert torch_xla.real_devices() == ["CPU:0"] and torch_xla.device_count() == 1
    with pytest.raises(IndexError, match="out of range"):
        torch_xla.device(1)


def test_the_device_is_ready_once_asked_for():
    # the imports PyTorch makes on a process's first op (DTensor's, dynamo's) are made when
    # the device is asked for, not inside the first step
    code = ("import sys, torch, torch_xla; d = torch_xla.device(); before = set(sys.modules); "
            "(torch.ones(3).to(d) + 1).cpu(); print([m for m in set(sys.modules) - before if m.startswith('torch')])")
    assert python("-c", code).stdout.split() == ["[]"]
    # asked for inside a function dynamo traces whole (fullgraph): no graph break
    compiled = torch.compile(lambda x: x + torch_xla.device().index, backend="openxla", fullgraph=True)
    assert compiled(torch.ones(2, device="xla")).tolist() == [1.0, 1.0]


def test_sync_runs_the_pending_graph_then_the_step_closures(dev):
    seen = []
    t = torch.ones(3, device=dev) * 2
    xm.add_step_closure(lambda x, tag: seen.append((tag, x.cpu().tolist())), args=(t, "a"))
    xm.add_step_closure(lambda: seen.append("b"))
    assert seen == []
    before = _executions()
    torch_xla.sync(wait=True)
    assert seen == [("a", [2.0, 2.0, 2.0]), "b"]
    assert _executions() == before + 1  # the closure read a computed tensor: no execution of its own
    torch_xla.sync()
    assert len(seen) == 2  # closures run once


def test_async_step_closures_run_in_order_off_the_training_thread(dev):
    import threading
    seen = []
    for i in range(3):
        xm.add_step_closure(lambda i=i: seen.append((i, threading.current_thread().name)), run_async=True)
    xm.mark_step()
    closures.step_closures().handler.wait()
    assert [i for i, _ in seen] == [0, 1, 2]
    assert all(name != threading.current_thread().name for _, name in seen)


def test_an_async_closure_error_is_raised_at_the_next_step(dev):
    def fail():
        raise KeyError("in the closure")
    xm.add_step_closure(fail, run_async=True)
    torch_xla.sync()
    closures.step_closures().handler.wait()
    xm.add_step_closure(lambda: None, run_async=True)
    with pytest.raises(RuntimeError, match="previously raised exception") as info:
        torch_xla.sync()
    assert isinstance(info.value.__cause__, KeyError)
    closures.step_closures().handler = None  # a fresh handler for the tests after this one


def test_compile_runs_the_function_as_one_graph(dev):
    x = torch.ones(4, device=dev)
    pending = x + 1  # pending work before the call runs first, in a graph of its own

    @torch_xla.compile
    def f(a):
        return (a * 2).sin() + a.cos()

    before = _executions()
    out = f(x)
    assert _executions() == before + 2
    assert_same(out, (torch.ones(4) * 2).sin() + torch.ones(4).cos())
    assert pending.cpu().tolist() == [2.0] * 4


def test_compile_does_not_wait_for_the_call_before_and_still_raises_its_check(dev):
    """Entering torch_xla.compile runs what is pending without waiting for the call before's
    program (the function's tracing overlaps it, as in torch_xla): one wait per call, at its
    end. An index check that failed in one call raises by the end of the next."""
    table = torch.randn(3, 2, device=dev)
    step = torch_xla.compile(lambda i: torch.nn.functional.embedding(i, table).sum())
    step(torch.tensor([0, 1], device=dev))
    waits = met.metric_data("DeviceLockWait")[0]
    step(torch.tensor([1, 2], device=dev))
    assert met.metric_data("DeviceLockWait")[0] == waits + 1
    step(torch.tensor([0, 5], device=dev))
    with pytest.raises(IndexError, match="^index out of range in self"):
        step(torch.tensor([0, 1], device=dev))


def test_compile_as_a_context_and_step(dev):
    x = torch.ones(2, device=dev)
    with torch_xla.compile():
        y = x * 3
    with torch_xla.step():
        z = y + 1
    before = _executions()
    assert z.cpu().tolist() == [4.0, 4.0] and _executions() == before  # already computed


def test_a_step_that_raises_still_runs_what_it_traced(dev):
    x = torch.ones(2, device=dev)
    with pytest.raises(ValueError, match="stop"):
        with torch_xla.step():
            y = x * 5
            raise ValueError("stop")
    before = _executions()
    assert y.cpu().tolist() == [5.0, 5.0] and _executions() == before  # already computed


def test_full_graph_refuses_a_function_that_runs_a_graph_inside(dev):
    x = torch.ones(2, device=dev)

    def reads_a_value(a):
        return a * (a.sum().item())
    torch_xla.compile(lambda a: a * 2, full_graph=True)(x)
    with pytest.raises(RuntimeError, match="full_graph=True.*1 graph"):
        torch_xla.compile(reads_a_value, full_graph=True)(x)


def test_max_different_graphs(dev):
    """Each compiled call is one graph; the limit counts distinct ones, and the one too many
    raises at the op that makes it (the detector's own cases: tests/_lazy/graph/test_dynamic_shape_detector.py)."""
    def f(a):
        return a * 2
    compiled = torch_xla.compile(f, max_different_graphs=2)
    compiled(torch.ones(2, device=dev))
    compiled(torch.zeros(2, device=dev))  # same graph, other data
    compiled(torch.ones(3, device=dev))
    with pytest.raises(RuntimeError, match=r"exceeded: 2\nGot: \[\] aten::mul, xla_shape=f32\[4\]"):
        compiled(torch.ones(4, device=dev))


def test_custom_compile_options_raise_naming_what_to_do():
    torch_xla.set_custom_compile_options({})
    with pytest.raises(NotImplementedError, match="XLA_FLAGS"):
        torch_xla.compile(lambda: None, custom_compile_options={"xla_cpu_enable_fast_math": True})


def test_manual_seed_repeats_random_values(dev):
    torch_xla.manual_seed(7)
    a = torch.rand(4, device=dev).cpu()
    torch_xla.manual_seed(7, dev)
    assert_same(torch.rand(4, device=dev), a, **EXACT)
    assert xm.get_rng_state(dev) != 7


def _launched(index, out):
    out.append((index, xr.world_size()))


def test_launch_debug_single_process_runs_here():
    out = []
    torch_xla.launch(_launched, args=(out,), debug_single_process=True)
    assert out == [(0, 1)]


def test_launch_under_torchrun_runs_the_local_rank_here(monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.setenv("LOCAL_RANK", "0")
    out = []
    torch_xla.launch(_launched, args=(out,))
    assert out == [(0, 1)]
