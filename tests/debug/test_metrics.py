"""torch_xla.debug.metrics' short report, and the names torch_xla's scripts read."""
import gc

import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met


def test_short_report_shows_what_is_named_and_the_fallbacks(dev):
    met.clear_all()
    (torch.randn(3, 5, 7, device=dev) * 2).cpu()  # a graph no other test makes: it compiles here
    default = met.short_metrics_report()
    assert "Metric: CompileTime" in default and "Metric: ExecuteTime" in default
    assert "UncachedCompile" not in default  # not in torch_xla's short list
    named = met.short_metrics_report(counter_names=["UncachedCompile"], metric_names=["ExecuteTime"])
    assert "Counter: UncachedCompile\n  Value: 1" in named
    assert "Metric: ExecuteTime" in named and "CompileTime" not in named


def test_a_program_over_the_replicas_counts_as_replicated(dev):
    met.clear_all()
    xm.all_reduce(xm.REDUCE_SUM, torch.ones(2, device=dev)).cpu()
    assert met.counter_value("ExecuteReplicated") == 1
    assert met.metric_data("ExecuteReplicatedTime")[0] == 1


def test_donated_buffers_are_counted_as_aliases(dev):
    t1, t2 = torch.randn(4, 2, device=dev), torch.randn(4, 2, device=dev)
    torch_xla.sync()
    met.clear_all()
    t3 = t1 + t2
    t1 *= 2.0
    t2 += 2.0
    torch_xla.sync()
    assert met.metric_data("InputOutputAliasCount")[1] == 2
    assert t3.shape == (4, 2)


def test_an_upload_is_timed_and_its_bytes_counted_each_way(dev):
    met.clear_all()
    t = torch.ones(3, 5, device=dev)  # a factory: no upload
    assert met.metric_data("TensorToData") is None
    t = torch.arange(6, dtype=torch.int32).to(dev)
    assert met.metric_data("TensorToData")[0] == 1 and met.metric_data("OutboundData")[1] == 24
    (t.double() * 2).cpu()
    assert met.metric_data("InboundData")[1] == 48  # into the host
    assert "Metric: TensorToData" in met.metrics_report()
    met.clear_metrics()
    assert "TensorToData" not in met.metric_names()


def test_every_op_is_timed_as_lazy_tracing(dev):
    x = torch.ones(4, device=dev)
    met.clear_all()
    y = (x * 2 + 1).relu()
    total, ns, samples = met.metric_data("LazyTracing")
    assert total >= 3 and ns > 0 and len(samples) == total
    assert met.counter_value("xla::mul") == met.counter_value("xla::add") == 1
    assert y.shape == (4,)


def test_tracing_samples_are_kept_whole_past_the_fold(dev):
    x = torch.ones(2, device=dev)
    met.clear_all()
    for _ in range(50):  # more ops than are kept unfolded, in one steady step
        for _ in range(100):
            x = x + 1
        torch_xla.sync()
    total, ns, samples = met.metric_data("LazyTracing")
    assert total >= 5000 and len(samples) <= 2048 and ns >= sum(v for _, v in samples)
    assert x.cpu()[0].item() == 5001


def test_a_step_samples_its_graph_and_the_wrapping_of_its_data(dev):
    x = torch.ones(3, device=dev)
    torch_xla.sync()
    met.clear_all()
    y = x * 2 + 1
    torch_xla.sync()
    assert met.metric_data("TensorsGraphSize")[1] == 2  # mul, add
    for name in ("UnwrapXlaData", "WrapXlaData", "DeviceLockWait"):
        assert met.metric_data(name)[0] == 1, name
    assert met.counter_value("CreateCompileHandles") == met.counter_value("UncachedCompile") == 1
    assert met.counter_value("StableHloCompile") == 1  # compiled from StableHLO, as all are
    assert y.cpu().tolist() == [3.0, 3.0, 3.0]


def test_scalars_placed_anew_count_as_device_data_cache_misses(dev):
    x = torch.ones(3, device=dev)
    torch_xla.sync()
    met.clear_all()
    misses, uploads = [], []
    # values no other test uses; a value a program holds placed serves the others too
    for step in (lambda: x * 2.0202, lambda: x * 2.0202, lambda: x + 2.0202, lambda: x * 3.0303):
        step().cpu()
        misses.append(met.counter_value("DeviceDataCacheMiss") or 0)
        uploads.append(met.metric_data("TransferToDeviceTime")[0])
    # each placing is a transfer to the device, timed
    assert misses == [1, 1, 1, 2] and uploads == [1, 1, 1, 2]
    assert met.counter_value("DeviceDataCacheMiss") == met.counter_value("TransferToDevice") == 2


def test_tensors_made_and_gone_are_counted(dev):
    met.clear_all()
    ts = [torch.ones(2, device=dev) for _ in range(3)]
    made = met.counter_value("CreateXlaTensor")
    assert made >= 3 and "CreateXlaTensor" in met.counter_names()
    gone = met.counter_value("DestroyXlaTensor") or 0
    del ts
    gc.collect()
    assert met.counter_value("DestroyXlaTensor") >= gone + 3
    met.clear_counters()
    assert met.counter_value("DestroyXlaTensor") is None


def test_a_tensor_from_data_is_one_xla_tensor(dev):
    met.clear_all()
    t = torch.tensor([2077, 1], device=dev)
    assert met.counter_value("CreateXlaTensor") == 1
    t.add_(1)  # the functional wrapper lifted from it updates in place as any other
    assert t.tolist() == [2078, 2]


def test_counters_of_ops_and_of_tensors_take_increments(dev):
    met.clear_all()
    torch.ones(2, device=dev) + 1
    before = met.counter_value("xla::add")
    torch_xla._XLAC._xla_increment_counter("xla::add", 3)
    torch_xla._XLAC._xla_increment_counter("MadeUpCounter", 2)
    assert met.counter_value("xla::add") == before + 3 and met.counter_value("MadeUpCounter") == 2
    assert "MadeUpCounter" in met.counter_names()


def test_a_value_read_on_the_host_counts_as_torch_xla_counts_it(dev):
    met.clear_all()
    t = torch.tensor(100, device=dev) * 2
    if t:
        t += 1
    assert met.executed_fallback_ops() == ["aten::_local_scalar_dense"]
    assert "aten::_local_scalar_dense" in met.short_metrics_report(counter_names=["MarkStep"])


def test_each_copy_to_the_cpu_counts_as_torch_xla_counts_it(dev):
    t = torch.ones(3, device=dev) * 2
    met.clear_all()
    t.cpu()
    t.to("cpu")
    assert met.counter_value("xla::_to_cpu") == 2


def test_execute_time_spans_the_run_not_the_launch(dev):
    import time
    a = torch.randn(1500, 1500, device=dev)
    torch_xla.sync()

    def step():
        y = a
        for _ in range(6):
            y = y @ a / 1500
        return y.sum()
    step().cpu()  # compiled: the timed step below only runs
    met.clear_all()
    begin = time.perf_counter_ns()
    s = step()
    torch_xla.sync()
    s.cpu()
    wall = time.perf_counter_ns() - begin
    count, total, samples = met.metric_data("ExecuteTime")
    assert count == 1 and total == samples[-1][1]
    assert total > 0.5 * wall  # the launch alone is a small part of it
