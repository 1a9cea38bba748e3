"""Lazy execution, the program cache, scalar parameters and buffer donation."""
import warnings

import numpy as np
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.conftest import compiles
from tests.compare import ALLCLOSE, assert_same
from tests.fresh_process import python


def executions():
    data = met.metric_data("ExecuteTime")
    return data[0] if data else 0


def test_ops_are_recorded_not_run(dev):
    x = torch.randn(4, 4, device=dev)
    xm.mark_step()
    before = executions()
    y = (x @ x).relu() + 1
    z = y.sum()
    assert executions() == before  # nothing ran yet
    assert z.item() == ((x.cpu() @ x.cpu()).relu() + 1).sum().item() or abs(
        z.item() - ((x.cpu() @ x.cpu()).relu() + 1).sum().item()) < 1e-3
    assert executions() == before + 1  # one program for the value that was needed


def test_mark_step_materialises_every_live_tensor_in_one_program(dev):
    a = torch.ones(3, device=dev)
    xm.mark_step()
    before = executions()
    b, c = a * 2, a + 5
    torch_xla.sync()
    assert executions() == before + 1
    after = executions()
    assert b.cpu().tolist() == [2.0] * 3 and c.cpu().tolist() == [6.0] * 3
    assert executions() == after  # already materialised: no new program


def test_same_graph_is_compiled_once(dev):
    def step(x):
        return (x * 3).sin().sum()
    x = torch.randn(8, device=dev)
    step(x).item()
    n = compiles()
    for _ in range(3):
        step(torch.randn(8, device=dev)).item()
    assert compiles() == n
    step(torch.randn(9, device=dev)).item()  # a new shape is a new program
    assert compiles() == n + 1


def test_changing_python_scalars_does_not_recompile(dev):
    x = torch.randn(5, device=dev)
    x_cpu = x.cpu()
    (x * 0.5 + 1.0).cpu()
    n = compiles()
    for lr in (0.1, 0.01, 0.001):
        out = x * lr + 2.0
        assert_same(out, x_cpu * lr + 2.0)
    assert compiles() == n


def _last_program():
    from torch_xla._lazy.runtime import runner
    return runner.cached_programs()[-1]


def test_a_programs_scalars_stay_on_the_device_while_they_are_the_same(dev):
    """A launch reuses the device arrays of the last launch's scalars while their bytes are
    the same; new values (0.0 and -0.0 too: 1/x tells them apart) are placed anew, with no
    new program."""
    x = torch.ones(3, device=dev)
    xm.mark_step()
    y = 1 / (x * 2.0)
    xm.mark_step()
    n, program = compiles(), _last_program()
    placed = program.placed[1]
    for scale, expected in ((2.0, 0.5), (0.0, float("inf")), (-0.0, -float("inf")), (0.0, float("inf"))):
        y = 1 / (x * scale)
        xm.mark_step()
        assert y.cpu().tolist() == [expected] * 3
        assert (program.placed[1] is placed) == (scale == 2.0)
        placed = program.placed[1]
    assert compiles() == n and _last_program() is program


def test_scalars_of_every_python_type_reach_the_program(dev):
    """ints (beyond int32 too), floats and complex numbers, changed between launches."""
    x = torch.ones(2, device=dev, dtype=torch.float64)
    i = torch.ones(2, device=dev, dtype=torch.int64)
    steps = ((2, 0.5, 1 + 2j), (3, 0.5, 1 + 2j), (3, 0.25, 1 - 2j), (2 ** 40, 0.25, 1 - 2j))
    for k, (a, b, c) in enumerate(steps):
        y, z, w = x * b + a, i * a, (x * c).abs()
        xm.mark_step()
        assert y.cpu().tolist() == [a + b] * 2 and z.cpu().tolist() == [a] * 2
        assert w.cpu().tolist() == [abs(c)] * 2
        if k == 1:  # the second step donates the first one's buffers: its program stays
            n = compiles()
    assert compiles() == n


def test_changing_learning_rate_in_a_training_loop_does_not_recompile(dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x, y = torch.randn(8, 4, device=dev), torch.randn(8, 1, device=dev)
    counts = []
    for _ in range(6):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        xm.optimizer_step(opt, barrier=True)
        sched.step()
        counts.append(compiles())
    assert counts[2] == counts[-1], counts


def test_updated_parameters_are_donated(dev):
    """An in-place update replaces the parameter's buffer; the old one is given to XLA to
    reuse (donated), so a step never holds two copies of the model."""
    p = torch.randn(64, 64, device=dev)
    xm.mark_step()
    from torch_xla._lazy.graph.tensor import unwrap
    old = unwrap(p)._value.data
    p.mul_(0.5).add_(1.0)
    xm.mark_step()
    assert old.is_deleted()
    assert unwrap(p)._value.data is not old and not unwrap(p)._value.data.is_deleted()


def test_buffers_still_held_are_not_donated(dev):
    p = torch.randn(16, device=dev)
    xm.mark_step()
    keep = p.clone()  # another live tensor on the same values
    p.add_(1.0)
    xm.mark_step()
    assert_same(p, keep.cpu() + 1.0)


def test_pending_tensors_survive_a_partial_sync(dev):
    x = torch.randn(6, device=dev)
    xm.mark_step()
    a = x * 2
    b = a + 1
    assert_same(a, x.cpu() * 2, **ALLCLOSE)  # syncs only a
    assert_same(b, x.cpu() * 2 + 1)


def test_metrics_report_names_compilations(dev):
    (torch.randn(3, device=dev) * 7).cpu()
    report = met.metrics_report()
    assert "CompileTime" in report and "ExecuteTime" in report
    assert met.counter_value("UncachedCompile") >= 1
    assert "CompileTime" in met.metric_names()
    assert "CompileTime" in met.short_metrics_report()
    assert "UncachedCompile" in met.short_metrics_report(counter_names=["UncachedCompile"])


def test_a_steady_loop_leaks_nothing(dev):
    """Programs, device buffers and tracked tensors stay constant step after step."""
    import jax
    from torch_xla._lazy.runtime import runner
    from torch_xla._lazy.graph import tensor
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8, device=dev), torch.randn(4, 1, device=dev)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        xm.optimizer_step(opt, barrier=True)
    for _ in range(4):
        step()
    sizes = []
    for _ in range(3):
        for _ in range(10):
            step()
        xm.wait_device_ops()
        sizes.append((runner.cache_size(), len(jax.live_arrays()), len(tensor.live_tensors()), len(tensor._refs)))
    assert sizes[0] == sizes[1] == sizes[2], sizes


def test_each_program_runs_on_its_tensors_device():
    """The device is part of a program's key and its placement: the same graph on xla:1
    after xla:0 compiles again and leaves its buffers on device 1, factories-only included."""
    proc = python("-m", "tests._lazy.launch._placement_main", env={"CPU_NUM_DEVICES": 2})
    assert proc.stdout.split() == ["ok"]


def test_caches_are_bounded_and_memory_stays_flat_over_many_shapes():
    """5,000 small steps over 50 distinct shapes, twice over, with room for 16 programs and 64 op
    shapes: the caches stay within their bounds, evictions are counted, evicted programs
    are freed, and memory stays flat."""
    import json
    from tests._lazy.launch import _cache_bound_main as loop
    proc = python("-m", "tests._lazy.launch._cache_bound_main",
                  env={"XLA_COMPILATION_CACHE_SIZE": 16, "XLA_IR_SHAPE_CACHE_SIZE": 64})
    out = json.loads(proc.stdout.splitlines()[-1])
    samples = out["samples"]
    assert all(s["programs"] <= 16 and s["live_programs"] <= 16 and s["meta"] <= 64 for s in samples), samples
    assert len({s["live_arrays"] for s in samples}) == 1, samples
    cycle = loop.SHAPES * loop.STEPS_PER_SHAPE // loop.EVERY  # samples per pass over the shapes
    assert samples[-1]["rss_mb"] - samples[cycle - 1]["rss_mb"] < 8, samples  # the second pass
    assert out["compiles"] == loop.STEPS // loop.STEPS_PER_SHAPE  # a program per change of shape
    # every program compiled (and the one before the loop) is kept or was evicted
    assert out["evictions"]["ProgramCacheEvictions"] + 16 == out["compiles"] + 1
    assert out["evictions"]["MetaCacheEvictions"] > 0
    expected = sum(6 * (1 + (s // loop.STEPS_PER_SHAPE) % loop.SHAPES) for s in range(loop.STEPS)) * 1e-3
    assert abs(out["total"] - expected) < 1e-3 * expected


def _chain(x, a, b):
    y = x
    for _ in range(10):
        y = y * a + b
    return y + (x > 2).to(torch.int64) * 7 + 3


def test_scalars_are_one_parameter_per_distinct_value(dev):
    """A program takes one 0-d parameter per distinct Python scalar (type and bytes), none
    sliced out of an array, each weakly typed, so a float32 tensor times a Python float
    stays float32; scalars that share a parameter and then differ (0.0 and -0.0 too) get a
    program of their own, with the right values."""
    import jax
    from torch_xla._lazy.launch import graph_program
    from torch_xla._lazy.graph.tensor import unwrap
    x = torch.randn(4, device=dev)
    xm.mark_step()
    xc = x.cpu()
    w = graph_program.walk([unwrap(_chain(x, 0.5, 0.25))._value])
    assert len(w.args[2]) == 23 and w.program.slot_types == (float, float, int, int, int)
    text = str(jax.make_jaxpr(w.program.run_packed)(*w.call_args))
    assert " split[" not in text and " slice[" not in text, text
    for a, b in ((0.5, 0.25), (0.5, 0.5), (0.5, -0.5), (0.0, -0.0)):
        out = _chain(x, a, b)
        assert out.dtype == torch.float32
        assert_same(out, _chain(xc, a, b))


def test_scalars_only_float32_ops_use_are_float32_parameters(dev):
    """A scalar every use of which is an add, sub, mul or div of float32 tensors is a float32
    parameter, rounded on the host as the op would round it: the program converts none. One
    that an op of another dtype reads too stays float64 (and exact there)."""
    import jax
    from torch_xla._lazy.launch import graph_program
    from torch_xla._lazy.graph.tensor import unwrap
    x, d = torch.randn(4, device=dev), torch.randn(4, dtype=torch.float64, device=dev)
    xm.mark_step()
    xc, dc = x.cpu(), d.cpu()

    def program_of(*outs):
        w = graph_program.walk([unwrap(o)._value for o in outs])
        return w.program.slot_dtypes, jax.jit(w.program.run_packed).lower(*w.call_args).as_text()
    dtypes, text = program_of(torch.tanh(x * 0.1) / 3 - 2**40 - 1)
    assert dtypes == (np.dtype(np.float32),) * 4 and "convert" not in text, text
    dtypes, _ = program_of(x + 0.1, d + 0.1, x * 2)
    assert dtypes == (np.dtype(np.float64), np.dtype(np.float32))
    for out, expected in ((torch.tanh(x * 0.1) / 3 - 2**40 - 1, torch.tanh(xc * 0.1) / 3 - 2**40 - 1),
                          (x + 1e300, xc + 1e300), (d + 0.1, dc + 0.1), (x - 1e-46, xc - 1e-46)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow warning from the host's rounding
            assert_same(out, expected)


def test_changing_scalars_that_share_a_value_compile_once_per_pattern(dev):
    """Scalars equal at one step and different at the next are a second program; after
    that, both patterns are found again without compiling."""
    x = torch.randn(3, device=dev)
    xm.mark_step()
    for a, b in ((0.5, 0.5), (0.5, 0.25)):
        (x * a + b).cpu()
    n = compiles()
    for a, b in ((0.75, 0.75), (0.125, 0.375), (2.0, 2.0)):
        assert_same(x * a + b, x.cpu() * a + b)
    assert compiles() == n


def test_a_training_steps_first_run_compiles_one_program(dev):
    """The first step of an MLP with SGD momentum (the graph of the forward, the backward,
    the optimizer and cross_entropy's value check) compiles one program, and the next
    step none."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(8, 12, device=dev), torch.randint(0, 5, (8,), device=dev)
    xm.mark_step()

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        xm.optimizer_step(opt, barrier=True)
    counts = []
    for _ in range(3):
        before = compiles()
        step()
        xm.wait_device_ops()
        counts.append(compiles() - before)
    assert counts == [1, 1, 0]  # the momentum buffers exist from the second step on
