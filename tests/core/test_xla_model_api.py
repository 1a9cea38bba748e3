"""torch_xla.core.xla_model beyond the step and the collectives' values (those are in
tests/distributed): devices, replication, transfers, saving, random state, barriers."""
import io
import time

import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr
import torch_xla.utils.utils as xu
from tests.conftest import compiles


def test_small_queries(dev, capsys):
    assert xm.is_xla_tensor(torch.ones(1, device=dev)) and not xm.is_xla_tensor(torch.ones(1))
    assert xm.xla_device_kind() == "cpu" == xm.xla_device_kind(dev)
    xm.master_print("from the master", 3)
    assert capsys.readouterr().out == "from the master 3\n"
    info = xm.get_memory_info(dev)
    assert info["bytes_limit"] > 0 and info["bytes_used"] >= 0


def test_memory_info_counts_live_buffers(dev):
    import gc
    big = torch.zeros(1024, 256, device=dev) + 1  # 1 MiB
    xm.mark_step()
    held = xm.get_memory_info(dev)["bytes_used"]
    assert held >= 1024 * 256 * 4
    del big  # (other buffers may be freed meanwhile too: the drop is at least big's)
    gc.collect()
    assert held - xm.get_memory_info(dev)["bytes_used"] >= 1024 * 256 * 4


def test_set_replication_makes_the_thread_that_replica(dev):
    xm.set_replication(dev, [dev])
    assert xr.world_size() == 1 and xr.global_ordinal() == 0 and torch_xla.device() == dev
    xm.set_replication(dev, [])
    assert xr.world_size() == 1
    with pytest.raises(RuntimeError, match="Invalid XLA device index 1"):
        xm.set_replication("xla:1", ["xla:1"])
    with pytest.raises(ValueError, match="not an XLA device"):
        xm.set_replication("cpu", [])


def test_rate_tracker(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    tracker = xm.RateTracker(smooth_factor=0.5)
    tracker.add(10)
    clock[0] += 2
    assert tracker.rate() == 5.0
    tracker.add(30)
    clock[0] += 2
    assert tracker.rate() == 0.5 * 15.0 + 0.5 * 5.0
    assert tracker.global_rate() == 40 / 4
    monkeypatch.setenv("RATE_TRACKER_SMOOTHING", "0.25")
    assert xm.RateTracker()._smooth_factor == 0.25


def test_send_cpu_data_to_device_walks_nested_data(dev):
    class Holder:
        def __init__(self, t):
            self.t = t
    cpu = torch.arange(3.0)
    out = xm.send_cpu_data_to_device({"a": (cpu, 2), "b": [cpu], "h": Holder(cpu)}, dev)
    assert out["a"][0].device == dev and out["a"][1] == 2 and isinstance(out["a"], list)
    assert out["a"][0] is out["b"][0]  # the same tensor is sent once
    assert out["h"].t.device == dev and torch.equal(out["h"].t.cpu(), cpu)
    single = xm.send_cpu_data_to_device(cpu, dev)
    assert isinstance(single, list) and single[0].device == dev
    leaf = xm.send_cpu_data_to_device(torch.ones(2, requires_grad=True), dev)[0]
    assert leaf.requires_grad and leaf.is_leaf and not single[0].requires_grad


def test_maybe_convert_to_cpu(dev):
    t = torch.ones(2, device=dev) * 5
    data = {"t": t, "n": [t, 1]}
    cpu = xm._maybe_convert_to_cpu(data)
    assert cpu["t"].device.type == "cpu" and cpu["t"].tolist() == [5.0, 5.0] and cpu["n"][1] == 1
    before = compiles() + (met.counter_value("CachedCompile") or 0)
    same = xm._maybe_convert_to_cpu({"t": t * 2}, convert=False)
    assert same["t"].device == dev
    assert compiles() + (met.counter_value("CachedCompile") or 0) == before + 1  # materialised


def test_fetch_gradients():
    a, b, c = (torch.nn.Parameter(torch.ones(2)) for _ in range(3))
    a.grad, c.grad = torch.full((2,), 1.0), torch.full((2,), 3.0)
    opt = torch.optim.SGD([{"params": [a, b]}, {"params": [c]}], lr=0.1)
    assert [g.tolist() for g in xm._fetch_gradients(opt)] == [[1.0, 1.0], [3.0, 3.0]]


def test_save_holds_no_collective(tmp_path, dev, monkeypatch):
    """`if xm.is_master_ordinal(): xm.save(...)` must not wait for other replicas."""
    def no_collective(*args, **kwargs):
        raise AssertionError("xm.save ran a collective")
    monkeypatch.setattr(xm, "rendezvous", no_collective)
    monkeypatch.setattr(xm, "all_gather", no_collective)
    if xm.is_master_ordinal():
        xm.save({"w": torch.ones(2, device=dev)}, tmp_path / "w.pt")
    assert torch.load(tmp_path / "w.pt")["w"].tolist() == [1.0, 1.0]


def test_rendezvous_alone_and_its_replica_list(dev):
    assert xm.rendezvous("alone", b"abc") == [b"abc"]
    assert xm.rendezvous("alone", b"abc", replicas=[0]) == [b"abc"]
    with pytest.raises(ValueError, match="distinct ordinals"):
        xm.rendezvous("bad", b"", replicas=[1])


def test_fork_rng_restores_the_state(dev):
    xm.set_rng_state(11, dev)
    with xm.fork_rng(dev):
        a = torch.rand(3, device=dev).cpu()
    b = torch.rand(3, device=dev).cpu()
    assert torch.equal(a, b)
    with xm.fork_rng(enabled=False):
        torch.rand(3, device=dev).cpu()
    assert not torch.equal(torch.rand(3, device=dev).cpu(), b)


def test_optimization_barrier_keeps_values_and_autograd(dev):
    w = torch.nn.Parameter(torch.arange(3.0, device=dev))
    y = w * 2
    xm.optimization_barrier_([w, y])
    assert "optimization_barrier" in xm.get_stablehlo([y])
    (y * y).sum().backward()
    assert y.cpu().tolist() == [0.0, 2.0, 4.0] and w.grad.cpu().tolist() == [0.0, 8.0, 16.0]


def test_stablehlo_bytecode(dev):
    """A versioned StableHLO portable artifact, which reads back as the program."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir.dialects import stablehlo
    t = torch.ones(2, device=dev) + 1
    code = xm.get_stablehlo_bytecode([t])
    assert isinstance(code, bytes) and code.startswith(b"ML\xefR")
    with mlir.make_ir_context() as context:
        assert "stablehlo.add" in str(stablehlo.deserialize_portable_artifact(context, code))


def test_bucketized_collectives_on_one_replica(dev):
    ts = [torch.full((4,), float(i), device=dev) for i in range(3)]
    gathered = xm.all_gather_bucketized(ts, bucket_cap_mb=0)  # every tensor a bucket of its own
    assert [g.cpu().tolist() for g in gathered] == [[float(i)] * 4 for i in range(3)]
    scattered = xm.reduce_scatter_bucketized(xm.REDUCE_SUM, ts, 2.0, 0, 1)
    assert [s.cpu().tolist() for s in scattered] == [[2.0 * i] * 4 for i in range(3)]
    with pytest.raises(RuntimeError, match="pin_layout=True is not yet supported"):
        xm.all_gather_bucketized(ts, pin_layout=True)
    with pytest.raises(TypeError, match="list of Tensors"):
        xm.all_gather_bucketized(ts[0])


def test_buckets_follow_the_cap():
    calls = []
    sizes = [1, 1, 3, 1]  # MB of float32 data
    ts = [torch.zeros(s * 262144) for s in sizes]
    xm._in_buckets(lambda bucket, outs: calls.append([t.numel() // 262144 for t in bucket]) or bucket,
                   ts, None, bucket_cap_mb=2)
    assert calls == [[1, 1], [3], [1]]


def test_utils_getenv_and_sample_generator(monkeypatch):
    monkeypatch.setenv("FLAG", "0")
    assert xu.getenv_as("FLAG", bool) is False and xu.getenv_as("MISSING", int, 4) == 4
    monkeypatch.setenv("FLAG", "3")
    assert xu.getenv_as("FLAG", int) == 3 and xu.check_env_flag("FLAG")
    gen = xu.SampleGenerator(data=(torch.ones(2), 1), sample_count=3)
    assert len(gen) == 3 and list(gen) == [gen._data] * 3 and list(gen) == [gen._data] * 3
    batches = list(xu.FnDataGenerator(lambda x: x.sum(1), 4, torch.ones, dims=[3], count=2))
    assert len(batches) == 2 and batches[0][1].tolist() == [3.0] * 4
    assert xu.shape([[1, 2], [3, 4], [5, 6]]) == [3, 2] and xu.flatten_nested_tuple((1, (2, (3,)))) == (1, 2, 3)
    assert xu.parallel_work(2, lambda x: x * 2, [1, 2, 3]) == [2, 4, 6]
    assert xu.as_list(1) == [1] and xu.list_copy_append([1], 2) == [1, 2]
    buf = io.StringIO()
    with xu.TimedScope("took ", printfn=lambda s: buf.write(s)):
        pass
    assert buf.getvalue().startswith("took ") and buf.getvalue().endswith("ms")


def test_real_and_replication_device_names(dev):
    kind = xm.xla_device_hw(dev)
    assert xm.xla_real_devices([dev]) == [f"{kind}:0"]
    assert xm.xla_real_devices() == [f"{kind}:{i}" for i in range(len(xm.get_xla_supported_devices()))]
    assert xm.xla_replication_devices() == xm.xla_real_devices()
    if len(xm.get_xla_supported_devices()) > 1:
        with pytest.raises(RuntimeError, match="Cannot replicate if number of devices"):
            xm.xla_replication_devices([dev])


@pytest.mark.parametrize("device", ["xla", "cpu"])
def test_check_view_sharing_refuses_two_views_of_one_storage(device):
    class Nested:
        def __init__(self, x, y):
            self.x, self.y = x, y
    a = torch.rand(16, device=device)
    b, c = a[:10], a[6:]
    with pytest.raises(RuntimeError, match="is sharing a view with tensor ID"):
        xm.check_view_sharing([b, c])
    with pytest.raises(RuntimeError, match="is sharing a view"):
        xm.check_view_sharing(Nested(b, c))
    xm.check_view_sharing([a, a, torch.rand(3, device=device)])  # one tensor twice, others apart
