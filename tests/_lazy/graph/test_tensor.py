"""The XLA tensor as users see it: device, factories, printing, transfers, scalars, layout."""
import io

import pytest
import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.compare import EXACT, assert_same
from tests.fresh_process import python


def test_device_names():
    assert str(xm.xla_device()) == "xla:0"
    assert torch_xla.device() == torch.device("xla", 0)
    assert xm.get_xla_supported_devices() == ["xla:0"]
    assert torch_xla.devices() == [torch.device("xla", 0)]


@pytest.mark.parametrize("device", ["xla", "xla:0", torch.device("xla"), torch.device("xla", 0)])
def test_every_spelling_of_the_device(device):
    t = torch.ones(2, 3, device=device)
    assert t.device == torch.device("xla", 0)
    u = torch.arange(4).to(device)
    assert u.device.type == "xla" and u.cpu().tolist() == [0, 1, 2, 3]
    m = torch.nn.Linear(3, 1).to(device)
    assert m.weight.device.type == "xla"


def test_factories_match_cpu(dev):
    cases = [
        lambda d: torch.zeros(2, 3, device=d),
        lambda d: torch.ones(4, dtype=torch.int32, device=d),
        lambda d: torch.full((2, 2), 7, device=d),
        lambda d: torch.full((2,), 1.5, dtype=torch.float64, device=d),
        lambda d: torch.arange(5, device=d),
        lambda d: torch.arange(0.0, 1.0, 0.25, device=d),
        lambda d: torch.linspace(-1, 1, 5, device=d),
        lambda d: torch.eye(3, device=d),
        lambda d: torch.eye(2, 4, dtype=torch.bool, device=d),
        lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
        lambda d: torch.tensor(3.5, device=d),
        lambda d: torch.zeros_like(torch.empty(2, 2, device=d)),
        lambda d: torch.ones_like(torch.empty(3, dtype=torch.int64, device=d)),
        lambda d: torch.empty(2, 2, device=d).new_full((3,), 2.0),
    ]
    for make in cases:
        expected, actual = make("cpu"), make(dev)
        assert actual.device == dev
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert_same(actual, expected, **EXACT)


def test_random_factories_shape_dtype_and_range(dev):
    assert torch.randn(3, 4, device=dev).shape == (3, 4)
    r = torch.rand(1000, device=dev).cpu()
    assert r.dtype == torch.float32 and 0 <= r.min() and r.max() < 1
    i = torch.randint(3, 7, (500,), device=dev).cpu()
    assert i.dtype == torch.int64 and set(i.tolist()) == {3, 4, 5, 6}
    p = torch.randperm(10, device=dev).cpu()
    assert sorted(p.tolist()) == list(range(10))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.uint8, torch.bool, torch.complex64,
                                   torch.float8_e4m3fn, torch.float8_e5m2])
def test_round_trip_every_dtype(dev, dtype):
    src = (torch.arange(-3, 3) * 1.5).to(dtype)
    on_device = src.to(dev)
    assert on_device.dtype == dtype
    assert torch.equal(on_device.cpu().view(torch.uint8), src.view(torch.uint8))
    assert_same((on_device.float() * 2), src.float() * 2, **EXACT)


@pytest.mark.parametrize("make", [
    lambda dev: torch.eye(3).to_sparse().to(dev),
    lambda dev: torch.eye(3, device=dev).to_sparse(),
    lambda dev: torch.eye(3, device=dev).to_sparse_csr(),
    lambda dev: torch.eye(3, device=dev).to_sparse(layout=torch.sparse_bsr, blocksize=(1, 1)),
    lambda dev: torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2), (3,), device=dev),
    lambda dev: torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]),
                                        torch.ones(2), (2, 2), device=dev),
    lambda dev: torch.zeros(2, 2, layout=torch.sparse_coo, device=dev),
    lambda dev: torch.empty(2, 2, layout=torch.sparse_csr, device=dev),
], ids=["to-device", "to_sparse", "to_sparse_csr", "to_sparse-bsr", "sparse_coo_tensor",
        "sparse_csr_tensor", "zeros-coo", "empty-csr"])
def test_sparse_layouts_are_refused_by_name(dev, make):
    with pytest.raises(NotImplementedError, match="sparse tensors .*not supported on XLA devices"):
        make(dev).cpu()


def test_sparse_embedding_gradients_are_refused_by_name(dev):
    weight = torch.randn(5, 2, device=dev, requires_grad=True)
    out = torch.nn.functional.embedding(torch.tensor([1, 3], device=dev), weight, sparse=True)
    with pytest.raises(NotImplementedError, match="sparse tensors .*not supported on XLA devices"):
        out.sum().backward()
        weight.grad.cpu()


@pytest.mark.parametrize("make", [
    lambda dev: torch.zeros(2, dtype=torch.chalf).to(dev),
    lambda dev: torch.zeros(2, device=dev, dtype=torch.chalf),
    lambda dev: torch.zeros(2, device=dev).to(torch.chalf),
    lambda dev: torch.zeros(2, device=dev).chalf(),
    lambda dev: torch.complex(torch.zeros(2, device=dev).half(), torch.zeros(2, device=dev).half()),
], ids=["to-device", "factory", "to-dtype", "chalf", "complex-of-halves"])
def test_complex32_is_refused_by_name(dev, make):
    with pytest.raises(TypeError, match="torch.complex32 is not supported on XLA devices"):
        make(dev).cpu()


def test_print_and_repr_show_the_device(dev):
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    text = repr(t)
    assert "device='xla:0'" in text and "1., 2." in text
    assert str(t) == text
    assert "device='xla:0'" in repr(torch.tensor(7, device=dev))


def test_scalars_from_the_device(dev):
    t = torch.tensor([1.5, -2.0], device=dev)
    assert t.sum().item() == -0.5
    assert t.tolist() == [1.5, -2.0]
    assert bool(t[0] > 0) is True
    assert int(torch.tensor(3, device=dev)) == 3
    if t[1] < 0:
        pass
    else:
        pytest.fail("control flow on a device value went the wrong way")


def test_dtype_conversions(dev):
    t = torch.tensor([1.7, -2.2, 0.0], device=dev)
    assert t.to(torch.int32).cpu().tolist() == [1, -2, 0]
    assert t.to(torch.bool).cpu().tolist() == [True, True, False]
    assert t.double().dtype == torch.float64
    assert t.to("cpu").device.type == "cpu"
    assert t.to(dev, torch.float16).dtype == torch.float16


def test_layout_is_hidden_and_contiguous(dev):
    x = torch.randn(3, 4, device=dev)
    for v in (x, x.t(), x[:, 1:3], x.transpose(0, 1).contiguous(), x.expand(2, 3, 4)):
        assert v.is_contiguous()
    assert x.t().stride() == (3, 1)


def test_save_and_load_through_the_cpu(dev, tmp_path):
    t = torch.randn(3, 3, device=dev)
    torch.save(t.cpu(), tmp_path / "t.pt")
    loaded = torch.load(tmp_path / "t.pt").to(dev)
    assert_same(loaded, t.cpu(), **EXACT)
    buf = io.BytesIO()
    torch.save({"w": t.cpu()}, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf, map_location="cpu")["w"], t.cpu())


def test_transfers_are_counted(dev):
    met.clear_all()
    t = torch.ones(4).to(dev)
    t.cpu()
    assert met.counter_value("TransferToDevice") >= 1
    assert met.counter_value("TransferFromDevice") >= 1
    assert met.metric_data("TransferToDeviceTime")[0] >= 1


def test_storage_data_pointer_is_zero_as_in_torch_xla(dev):
    """Device data has no host address: 0, as torch_xla says; CPU storages are untouched."""
    t = torch.ones(3, device=dev)
    assert t.untyped_storage().data_ptr() == 0
    assert t.data_ptr() == 0
    cpu = torch.ones(3)
    assert cpu.untyped_storage().data_ptr() == cpu.data_ptr() != 0


def test_a_device_count_that_cannot_take_effect_is_an_error_naming_the_variable():
    """jax started by the user before torch_xla, with another count: no silent collapse."""
    script = ("import jax; jax.devices()\n"
              "import torch, torch_xla.core.xla_model as xm\n"
              "torch.randn(2, 2, device=xm.xla_device())\n")
    proc = python("-c", script, env={"CPU_NUM_DEVICES": 3}, check=False)
    assert proc.returncode != 0
    assert "CPU_NUM_DEVICES=3 cannot take effect" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("first", ["torch.randn(2, 2, device=xm.xla_device())",
                                   "torch.randn(2, 2, device='xla')"])
def test_the_readme_example_then_four_devices(first):
    """The first call creating a tensor on the device starts the runtime with every
    configured device, whether it names the device through xm or as a string."""
    script = ("import torch, torch_xla, torch_xla.core.xla_model as xm\n"
              f"t = {first}\n"
              "t3 = torch.ones(2, device='xla:3') + 1\n"
              "print(len(xm.get_xla_supported_devices()), (t + 1).cpu().shape, t3.cpu().tolist())\n")
    proc = python("-c", script, env={"CPU_NUM_DEVICES": 4})
    assert proc.stdout.split() == ["4", "torch.Size([2,", "2])", "[2.0,", "2.0]"]


def test_the_live_tensor_registry_forgets_dead_tensors_without_a_sync(dev):
    """Tensors are registered as made and forgotten lazily: thousands of temporaries and no
    mark_step keep the registry within twice the live tensors (or its minimum), and the
    live ones are listed in creation order."""
    import gc
    from torch_xla._lazy.graph import tensor
    gc.collect()  # other tests' garbage dies now, not while the bound is measured
    a = torch.ones(3, device=dev)
    kept = []
    for i in range(5000):
        b = a + i  # dies at the next iteration
        if i % 1000 == 0:
            kept.append(b)
    assert len(tensor._refs) <= max(tensor._MIN_BOUND, 2 * len(tensor.live_tensors())) + 1
    inner = [tensor.unwrap(t) for t in kept]
    live = tensor.live_tensors()
    assert all(any(t is i for t in live) for i in inner)
    positions = [next(k for k, t in enumerate(live) if t is i) for i in inner]
    assert positions == sorted(positions)
    assert len(tensor._refs) == len(live)  # read: pruned
    xm.mark_step()
    assert_same(kept[-1], torch.full((3,), 4001.0))
