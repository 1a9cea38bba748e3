"""torch_xla.runtime: the runtime's layout and device attributes, the master's address, the
device type fixed once the runtime started, SPMD's switch, and `initialize_cache` (a second
process loads its programs from disk instead of compiling)."""
import json
import os
import textwrap

import pytest

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from tests.fresh_process import python


def test_runtime_layout():
    assert (xr.host_index(), xr.local_process_count(), xr.global_device_count(), xr.local_device_count()) == (0, 1, 1, 1)
    attributes = xr.runtime_device_attributes("CPU:0")
    assert attributes["name"] == "CPU:0" and attributes["device_kind"] == "cpu"
    assert xr.runtime_device_attributes("xla:0") == attributes == xr.global_runtime_device_attributes()[0]
    with pytest.raises(RuntimeError, match="Unknown XLA device"):
        xr.runtime_device_attributes("TPU:0")
    assert xr.is_bf16_supported() and not xr.is_spmd()


def test_master_ip_comes_from_the_coordinator(monkeypatch):
    monkeypatch.delenv("TORCH_XLA_COORDINATOR", raising=False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(RuntimeError, match="IP discovery not supported for device: CPU"):
        xr.get_master_ip()
    monkeypatch.setenv("TORCH_XLA_COORDINATOR", "10.1.2.3:8476")
    assert xr.get_master_ip() == "10.1.2.3"
    monkeypatch.delenv("TORCH_XLA_COORDINATOR")
    monkeypatch.setenv("MASTER_ADDR", "10.1.2.4")  # torchrun's, before the runtime joins
    assert xr.get_master_ip() == "10.1.2.4"


def test_device_type_is_fixed_once_the_runtime_started(monkeypatch):
    xm.xla_device()
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    xr.set_device_type("CPU")
    with pytest.raises(RuntimeError, match="after XLA runtime is initialized"):
        xr.set_device_type("TPU")


def test_whether_the_runtime_started_is_asked_through_xlac(monkeypatch):
    """As torch_xla's: scripts that stand in for `_XLAC._xla_runtime_is_initialized` decide."""
    import torch_xla._XLAC
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    monkeypatch.setattr(torch_xla._XLAC, "_xla_runtime_is_initialized", lambda: False)
    xr.set_device_type("TPU")
    assert os.environ["PJRT_DEVICE"] == "TPU"


def test_device_type_defaults_to_the_cpu_unless_the_default_is_turned_off():
    """As torch_xla's: an unset PJRT_DEVICE means the CPU; with PJRT_SELECT_DEFAULT_DEVICE=0
    no device is selected (None), and a runtime that has to start says what to set."""
    proc = python("-c", textwrap.dedent("""
        import os
        import torch_xla.runtime as xr
        os.environ.pop("PJRT_DEVICE", None)
        print(xr.device_type())
        os.environ["PJRT_SELECT_DEFAULT_DEVICE"] = "0"
        print(xr.device_type())
        import torch, torch_xla
        try:
            (torch.ones(1, device=torch_xla.device()) + 1).cpu()
        except RuntimeError as e:
            print("raised", "PJRT_DEVICE is unset" in str(e))
    """), env={"PJRT_DEVICE": None})
    assert proc.stdout.split() == ["CPU", "None", "raised", "True"]


def test_spmd_auto_sharding_raises_and_leaves_spmd_off():
    with pytest.raises(NotImplementedError, match="auto-sharding"):
        xr.use_spmd(auto=True)
    assert not xr.is_spmd()


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
    out = python("-c", _SCRIPT, cache_dir, mode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_programs_from_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = _run(cache, "write")
    assert first["hit"] is None and first["miss"] == first["compiled"] >= 1
    entries = sorted(os.listdir(cache))  # jax's entries, and the engine's own (`programs`)
    assert len(entries) == first["compiled"] + 1 and "programs" in entries
    assert len(os.listdir(cache / "programs")) == first["compiled"]

    second = _run(cache, "readonly")
    assert second["values"][0] == first["values"][0] == [9.0, 27.0]
    assert second["values"][1] == 55.0  # sum of squares of 0..5
    # the first run's programs are loaded; the new one is compiled but, read-only, not written
    assert second["hit"] == first["compiled"] and second["miss"] is None
    assert second["compiled"] == first["compiled"] + 1
    assert sorted(os.listdir(cache)) == entries
    assert len(os.listdir(cache / "programs")) == first["compiled"]


def test_a_gpu_runtime_without_jax_s_plugin_says_which_to_install():
    """PJRT_DEVICE=CUDA where jax has no CUDA backend: the first tensor made on the device
    raises at its line, naming jax's plugin at the installed jax's release (on a machine with
    the plugin and a GPU this test has nothing to show)."""
    import jax
    try:
        jax.devices("cuda")
        pytest.skip("jax has a CUDA backend here: the error this test checks cannot happen")
    except RuntimeError:
        pass
    proc = python("-c", textwrap.dedent("""
        import torch, torch_xla
        import torch_xla.runtime as xr
        print(xr.device_type())
        try:
            torch.ones(2, device="xla")
        except RuntimeError as e:
            print(e)
    """), env={"PJRT_DEVICE": "CUDA"})
    kind, message = proc.stdout.split("\n", 1)
    assert kind == "CUDA"
    assert "PJRT_DEVICE=CUDA selects jax's cuda backend" in message
    assert f"pip install 'jax[cuda12]=={jax.__version__}'" in message and "nvidia-smi" in message


def test_gpu_num_devices_says_how_many_processes_spawn_starts(monkeypatch):
    """Read without starting the runtime (which would take the GPUs' memory in the parent)."""
    import torch_xla.distributed.xla_multiprocessing as xmp
    monkeypatch.setenv("PJRT_DEVICE", "CUDA")
    monkeypatch.setenv("GPU_NUM_DEVICES", "3")
    assert xmp._device_count() == 3
