"""torch.compile(backend='openxla' / 'openxla_eval') on XLA tensors: each captured graph is one
XLA program, compiled once per guard set, with results equal to the lazy path's and the CPU's."""
import copy

import pytest
import torch
import torch.nn as nn

import torch_xla
import torch_xla.debug.metrics as met
from tests.training._models import (CNN, MLP, TransformerLM, classification_batches, lm_batches,
                                    loss_of, train)
from torch_xla._lazy.graph.tensor import XLATensor, unwrap
from tests.compare import assert_same

STEPS = 4
MODELS = {
    "mlp": (MLP, lambda: classification_batches((8, 16))),
    "cnn": (CNN, lambda: classification_batches((4, 3, 8, 8))),
    "transformer_lm": (TransformerLM, lm_batches),
}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def count(name):
    return met.counter_value(name) or 0


def sgd(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def compiled_train(model, dev, batches, steps, make_opt=sgd):
    """The whole step under torch.compile: forward and backward (AOTAutograd, one program
    each), and the optimizer step (a graph of its own, after backward's graph break). Also
    gives each step's compile counts and its number of reads from the device."""
    model = model.to(dev)
    opt = make_opt(model.parameters())

    @torch.compile(backend="openxla")
    def step(x, y):
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        return loss

    losses, compiles, reads = [], [], []
    for i in range(steps):
        x, y = (t.to(dev) for t in batches[i % len(batches)])
        before = count("TransferFromDevice")
        losses.append(step(x, y).item())
        compiles.append((count("DynamoCompile"), count("UncachedCompile")))
        reads.append(count("TransferFromDevice") - before)
    return losses, compiles, reads, model


@pytest.mark.parametrize("name", MODELS)
def test_trains_like_the_lazy_path_and_the_cpu(dev, name):
    make_model, make_batches = MODELS[name]
    torch.manual_seed(0)
    model, batches = make_model(), make_batches()
    cpu_losses, _, cpu_model = train(copy.deepcopy(model), "cpu", sgd, batches, STEPS)
    lazy_losses, _, _ = train(copy.deepcopy(model), dev, sgd, batches, STEPS)
    met.clear_counters()
    losses, compiles, _, xla_model = compiled_train(copy.deepcopy(model), dev, batches, STEPS)

    assert_same(torch.tensor(losses), torch.tensor(lazy_losses), rtol=1e-5, atol=0, device="cpu")
    assert_same(torch.tensor(losses), torch.tensor(cpu_losses), rtol=1e-5, atol=0, device="cpu")
    # forward, backward, the first optimizer step (it creates the momentum buffers) and the
    # later one: then nothing compiles, neither graphs nor lazy programs
    assert compiles[1][0] == 4, compiles
    assert compiles[1] == compiles[-1], compiles
    for (key, expected), actual in zip(cpu_model.state_dict().items(), xla_model.state_dict().values()):
        assert_same(actual, expected, rtol=1e-4, atol=1e-5, path=key)


def test_steady_training_step_runs_three_programs_and_no_lazy_one(dev):
    """Forward, backward and optimizer step, each one program: the forward leaves the
    transposed weights it saves for the backward as lazy views (no copy of a weight), and
    the backward computes them, and the seed of `loss.backward()`, inside its own program."""
    torch.manual_seed(0)
    model = MLP().to(dev)
    opt = sgd(model.parameters())
    x, y = (t.to(dev) for t in classification_batches((8, 16))[0])

    @torch.compile(backend="openxla")
    def step():
        opt.zero_grad()
        loss_of(model, x, y).backward()
        opt.step()

    for _ in range(3):
        step()
    met.clear_counters()
    for _ in range(3):
        step()
    assert count("DynamoCompile") == 0 and count("UncachedCompile") == 0
    assert count("DynamoExecute") == 3 * 3
    assert count("CachedCompile") == 0        # no lazy program ran (each run looks one up)

    def buffers():
        state = list(model.parameters()) + [opt.state[p]["momentum_buffer"] for p in model.parameters()]
        return [unwrap(t)._value.data.unsafe_buffer_pointer() for t in state]
    before = buffers()
    step()
    assert buffers() == before  # every parameter and momentum buffer donated: written in place


def test_an_alias_of_a_parameter_sees_each_step(dev):
    model = nn.Linear(8, 4).to(dev)
    opt = sgd(model.parameters())
    x = torch.randn(2, 8, device=dev)

    @torch.compile(backend="openxla")
    def step():
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    step()
    step()
    alias = model.weight.detach()                 # shares the weight's storage
    for _ in range(2):
        before = model.weight.detach().cpu()
        step()
        assert not torch.equal(model.weight.detach().cpu(), before)
        assert_same(alias, model.weight.detach().cpu(), rtol=0, atol=0)


def test_pending_inputs_are_synced_first_and_a_backward_computes_its_own(dev):
    compiled = torch.compile(lambda a, b: a * b + 1, backend="openxla")
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    compiled(x.to(dev), y.to(dev))
    xd, yd = x.to(dev), y.to(dev)
    other = xd * 3                                # pending, not an input of the graph
    met.clear_counters()
    small = (xd * 2).t()                          # two lazy ops, not yet computed
    assert_same(compiled(small, yd), (x * 2).t() * y + 1)
    # as torch_xla: the inputs' graph runs first, and they keep their values
    assert count("DynamoSyncInputExecuteTime") == 1 and count("UncachedCompile") == 1
    assert not unwrap(small)._value.pending and unwrap(other)._value.pending
    # a backward graph computes its small pending inputs (the gradient's seed, the views
    # its forward saved) inside its own program: no program of theirs per step
    model = torch.compile(torch.nn.Linear(3, 3).to(dev), backend="openxla")
    for step in range(2):
        met.clear_counters()
        model(xd).sum().backward()
        model.zero_grad(set_to_none=True)
        torch_xla.sync()
    assert count("DynamoSyncInputExecuteTime") == 0 and count("UncachedCompile") == 0


def test_adamw_step_is_one_program(dev):
    """AdamW under torch.compile: dynamo decomposes addcmul_ into inductor's prims.fma (a
    lowering registered when the op first appears) and counts steps in CPU tensors (written
    back from the device)."""
    adamw = lambda params: torch.optim.AdamW(params, lr=0.01)  # noqa: E731
    torch.manual_seed(0)
    model, batches = MLP(), classification_batches((8, 16))
    cpu_losses, _, cpu_model = train(copy.deepcopy(model), "cpu", adamw, batches, STEPS)
    met.clear_counters()
    losses, compiles, reads, xla_model = compiled_train(copy.deepcopy(model), dev, batches, STEPS,
                                                        adamw)
    assert_same(torch.tensor(losses), torch.tensor(cpu_losses), rtol=1e-5, atol=0, device="cpu")
    assert count("DynamoLazyGraph") == 0
    assert compiles[1] == compiles[-1], compiles
    # the step counts (CPU tensors) are counted on the host: a step compiling nothing reads
    # only its loss (.item()) from the device. (Compiling, torch 2.10-2.12's dynamo also reads
    # each tensor it guards by identity: it writes the guard's text with repr().)
    assert reads[2:] == [1] * (STEPS - 2), reads
    # Adam divides by the gradients' running scale: rounding noise in tiny gradients moves
    # weights by up to ~1e-5 (the lazy path's too)
    for (key, expected), actual in zip(cpu_model.state_dict().items(), xla_model.state_dict().values()):
        assert_same(actual, expected, rtol=1e-3, atol=1e-4, path=key)


@pytest.mark.parametrize("backend", ["openxla", "openxla_eval"])
@pytest.mark.parametrize("name", MODELS)
def test_inference(dev, name, backend):
    make_model, make_batches = MODELS[name]
    torch.manual_seed(0)
    model = make_model().eval()
    compiled = torch.compile(copy.deepcopy(model).to(dev), backend=backend)
    met.clear_all()
    with torch.no_grad():
        for x, _ in make_batches()[:3]:
            assert_same(compiled(x.to(dev)), model(x), rtol=1e-5, atol=1e-5)
    assert count("DynamoCompile") == 1
    assert count("DynamoExecute") == 3
    # torch_xla's samples of each run of the cached graph: its inputs (the parameters, the
    # buffers it reads, the batch) and its output
    n_params, n_buffers = len(list(model.parameters())), len(list(model.buffers()))
    assert met.metric_data("RunCachedGraphInputData")[0] == 3
    assert n_params + 1 <= met.metric_data("RunCachedGraphInputData")[2][-1][1] <= n_params + n_buffers + 1
    assert met.metric_data("RunCachedGraphOutputData")[2][-1][1] == 1


def test_one_compilation_per_guard_set(dev):
    def f(x, y):
        return torch.tanh(x @ y) * 2 + y.sum()

    compiled = torch.compile(f, backend="openxla", dynamic=False)
    a, b = torch.randn(4, 4), torch.randn(4, 8)
    met.clear_counters()
    for _ in range(3):
        assert_same(compiled(a.to(dev), a.to(dev)), f(a, a))
    assert count("DynamoCompile") == 1
    assert count("UncachedCompile") == 1
    assert_same(compiled(a.to(dev), b.to(dev)), f(a, b))  # new shapes
    assert count("DynamoCompile") == 2
    for _ in range(3):  # both guard sets cached
        compiled(a.to(dev), a.to(dev))
        compiled(a.to(dev), b.to(dev))
    assert count("DynamoCompile") == 2
    assert count("DynamoExecute") == 10


def test_dynamic_sizes_compile_once_per_size(dev):
    """The second size makes dynamo trace a graph with symbolic sizes: it is compiled for
    each concrete size it meets, once (size 2 again: dynamo now picks the symbolic graph)."""
    def f(x):
        return (x * x).sum(0) + x.shape[0]

    compiled = torch.compile(f, backend="openxla")
    met.clear_counters()
    for n in (2, 3, 5, 3, 5, 2):
        x = torch.randn(n, 4)
        assert_same(compiled(x.to(dev)), f(x))
    assert count("DynamoCompile") == 4  # 2 (static graph), then 3, 5 and 2 (symbolic graph)


def test_graph_break_runs_the_rest_lazily(dev):
    def f(x):
        y = torch.sin(x) * 3
        print("a graph break", end="")  # dynamo cannot capture print
        return torch.relu(y - 1).sum(1)

    compiled = torch.compile(f, backend="openxla")
    x = torch.randn(5, 6)
    met.clear_counters()
    assert_same(compiled(x.to(dev)), f(x))
    assert_same(compiled(x.to(dev)), f(x))
    assert count("DynamoCompile") == 2  # one graph before the break, one after
    # the engine's own code runs as written: dynamo compiled none of its frames
    entries = torch._C._dynamo.eval_frame._debug_get_cache_entry_list(
        XLATensor.__torch_dispatch__.__func__.__code__)
    assert entries == []


def test_compiled_and_lazy_code_mix(dev):
    compiled = torch.compile(lambda a, b: a * b + 1, backend="openxla")
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    pending = x.to(dev) * 2                       # lazy: not yet computed
    out = compiled(pending, y.to(dev))
    result = (out.exp() + pending).cpu()          # the output used on the lazy path
    assert_same(result, ((x * 2) * y + 1).exp() + x * 2, device="cpu")


def test_optimizer_step_writes_parameters_in_place_and_donates(dev):
    model = nn.Linear(8, 8).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 8, device=dev)).sum().backward()
    step = torch.compile(opt.step, backend="openxla")
    step()  # makes the momentum buffers
    step()
    reference = [p.detach().cpu() for p in model.parameters()]
    grads = [p.grad.cpu() for p in model.parameters()]
    momentum = [opt.state[p]["momentum_buffer"].cpu() for p in model.parameters()]
    old = [unwrap(p)._value.data for p in model.parameters()]
    held = model.bias.detach().clone()            # another tensor holds the bias' buffer
    met.clear_counters()
    step()
    assert count("DynamoCompile") == 0 and count("UncachedCompile") == 0
    for p, before, g, m in zip(model.parameters(), reference, grads, momentum):
        m = 0.9 * m + g
        assert_same(opt.state[p]["momentum_buffer"], m)
        assert_same(p.detach(), before - 0.1 * m)
    assert old[0].is_deleted()                    # the weight's old buffer was donated
    assert not old[1].is_deleted()                # the held bias' was not
    assert_same(held, reference[1])


def test_batch_norm_buffers_are_written_back(dev):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6))
    compiled = torch.compile(copy.deepcopy(model).to(dev), backend="openxla")
    for _ in range(3):
        x = torch.randn(5, 4)
        assert_same(compiled(x.to(dev)), model(x), rtol=1e-5, atol=1e-5)
    for key, value in model.state_dict().items():
        assert_same(compiled._orig_mod.state_dict()[key], value, path=key)


def test_graph_that_cannot_be_one_program_runs_lazily(dev):
    def f(x):
        return (x * 2).cpu() + 1                  # a transfer inside the graph

    compiled = torch.compile(f, backend="openxla_eval")
    x = torch.randn(3)
    met.clear_counters()
    out = compiled(x.to(dev))
    assert out.device.type == "cpu"
    assert_same(out, f(x), device="cpu")
    assert count("DynamoLazyGraph") == 1


def test_an_op_without_meta_kernel_is_traced_on_the_device_and_falls_back(dev):
    """aten::_foobar has no meta kernel: tracing runs it on zeros on the XLA device (as
    PyTorch's fake tensors do on theirs), and the graph, holding an op with no lowering, runs
    lazily, the op through the counted CPU fallback."""
    def f(t):
        return torch._foobar(t * 2) * 2

    compiled = torch.compile(f, backend="openxla")
    x = torch.randn(7)
    met.clear_all()
    for scale in (1, 3):
        assert_same(compiled(x.to(dev) * scale).cpu(), f(x * scale), device="cpu")
    assert count("aten::_foobar") >= 2 and count("DynamoLazyGraph") == 2


def test_openxla_eval_keeps_gradients_through_the_lazy_path(dev):
    model = nn.Linear(3, 2)
    compiled = torch.compile(copy.deepcopy(model).to(dev), backend="openxla_eval")
    x = torch.randn(4, 3)
    compiled(x.to(dev)).sum().backward()
    model(x).sum().backward()
    assert_same(compiled.weight.grad, model.weight.grad)


def test_dropout_draws_new_masks_without_recompiling(dev):
    drop = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True),
                         backend="openxla")
    x = torch.ones(64, device=dev)
    first = drop(x).cpu()
    met.clear_counters()
    second = drop(x).cpu()
    assert count("DynamoCompile") == 0
    assert not torch.equal(first, second)
    assert set(first.unique().tolist()) <= {0.0, 2.0}


def test_a_traced_module_with_its_own_parameters_sees_their_updates(dev):
    import torch_xla._dynamo.dynamo_bridge as bridge
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4)).to(dev)
    x = torch.randn(5, 6).to(dev)
    graph = bridge.extract_compiled_graph(torch.fx.symbolic_trace(model), (x,))
    reference = copy.deepcopy(model)
    assert_same(graph(x)[0], reference(x))
    assert_same(model[1].running_mean, reference[1].running_mean)  # the buffer it wrote
    with torch.no_grad():
        model[0].weight.mul_(2)
        reference[0].weight.mul_(2)
    assert_same(graph(x)[0], reference(x))


def test_cpu_tensors_in_a_compiled_graph_follow_each_ops_device_rules(dev):
    xt, index, cpu = torch.rand(5).to(dev), torch.tensor([4, 0, 2]), torch.arange(3)
    lazy = count("DynamoLazyGraph")
    assert_same(torch.compile(lambda a, i: a[i], backend="openxla")(xt, index), xt.cpu()[index])
    with pytest.warns(UserWarning, match=r"Found tensor with shape torch.Size\(\[3\]\) on cpu"):
        assert_same(torch.compile(lambda t: torch.stack([t]), backend="openxla")(cpu),
                    torch.stack([cpu]), device="cpu")  # a CPU function stays on the CPU
    # refused by dynamo's fake tensors, in torch's words: "... on the same device, but found
    # at least two devices" (torch 2.13 and newer), "found two different devices" (older)
    with pytest.raises(RuntimeError, match="same device|two different devices"):
        torch.compile(lambda a, t: a + t, backend="openxla")(xt[:3], cpu)
    assert count("DynamoLazyGraph") > lazy


def test_a_graph_of_cpu_tensors_warns_and_runs_on_the_cpu_without_xla(dev):
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU())
    x = torch.randn(5, 6)
    met.clear_all()
    with pytest.warns(UserWarning) as caught:
        out = torch.compile(model, backend="openxla")(x)
    shapes = {str(w.message).split(" on ")[0] for w in caught if "Found tensor" in str(w.message)}
    assert shapes == {f"Found tensor with shape {s}" for s in
                      (torch.Size([5, 6]), torch.Size([4, 6]), torch.Size([4]))}, shapes
    assert out.device.type == "cpu"
    assert_same(out, model(x), device="cpu")
    # nothing lowered, compiled or run by XLA: no op counted, the graph handed over only
    assert met.counter_names() == ["DynamoExtractCompiledGraph"], met.counter_names()


def test_a_compiled_graph_counts_its_ops_once_when_traced(dev):
    compiled = torch.compile(lambda a, b: torch.tanh(a * b) + 1, backend="openxla")
    a, b = torch.randn(3, device=dev), torch.randn(3, device=dev)
    torch_xla.sync()
    met.clear_counters()
    compiled(a, b)
    assert {"xla::mul", "xla::tanh", "xla::add"} <= set(met.counter_names())
    met.clear_counters()
    compiled(a, b)
    assert not [n for n in met.counter_names() if n.startswith("xla::")]
