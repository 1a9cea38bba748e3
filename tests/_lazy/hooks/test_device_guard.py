"""The XLA device guard without a C++ compiler: `import torch_xla` and training work where no
compiler can be found, and where no guard can be had, using the device raises naming the fix."""
import os
import textwrap

import pytest
import torch

from tests.fresh_process import python

_TRAIN = """
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch_xla._lazy.hooks import device_guard
device = xm.xla_device()
model = torch.nn.Linear(4, 2).to('xla')
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
before = model.weight.detach().cpu().clone()
loss = model(torch.ones(3, 4, device=device)).pow(2).sum()
loss.backward()
xm.optimizer_step(optimizer, barrier=True)
grid = torch.zeros(2, 3, device=device)
grid[:, 0] = 5
print(device_guard.route, model.weight.device, bool((model.weight.cpu() != before).all()),
      grid.sum().item())
"""


def _run_without_compiler(tmp_path, script, **env):
    """Runs `script` in a fresh interpreter that finds no C++ compiler and no ninja, with an
    empty extensions cache (so nothing compiled earlier can be picked up)."""
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    cache = tmp_path / "extensions"
    proc = python("-c", textwrap.dedent(script), check=False,
                  env=dict(env, PATH=bare, CXX=tmp_path / "missing-c++", TORCH_EXTENSIONS_DIR=cache))
    assert not cache.exists() or not any(cache.iterdir()), "something was compiled"
    return proc


def _built_guard_exists():
    import glob
    from torch_xla._lazy.hooks import device_guard
    return bool(glob.glob(os.path.join(os.path.dirname(device_guard.__file__),
                                       device_guard.library_stem() + ".*so")))


def test_import_and_a_training_step_need_no_compiler(tmp_path):
    proc = _run_without_compiler(tmp_path, _TRAIN, CPU_NUM_DEVICES="1")
    if not _built_guard_exists() and not hasattr(torch._C, "_acc"):
        # A torch without a Python guard, and no guard built with the package: the device
        # says what is missing instead of training.
        assert proc.returncode != 0
        assert "none could be installed" in proc.stderr and "--no-build-isolation" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr[-4000:]
    route, device, moved, total = proc.stdout.split()
    assert route == ("built" if _built_guard_exists() else "python")
    assert (device, moved, float(total)) == ("xla:0", "True", 10.0)


def test_without_any_guard_import_works_and_the_device_names_the_fix(tmp_path):
    """A torch whose torch._C has no Python guard (as torch 2.9), and no compiler."""
    proc = _run_without_compiler(tmp_path, """
        import torch
        if hasattr(torch._C, "_acc"):
            del torch._C._acc
        import torch_xla
        from torch_xla._lazy.hooks import device_guard
        print(device_guard.route)
        for make in (lambda: torch.zeros(2).to('xla'), lambda: torch.zeros(2, device='xla:0')):
            try:
                make()
            except RuntimeError as e:
                print(str(e))
        """, CPU_NUM_DEVICES="1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    if _built_guard_exists():
        assert lines == ["built"]
        return
    assert lines[0] == "None" and len(lines) == 3
    for message in lines[1:]:
        assert "XLA tensors need a device guard" in message
        assert "no C++ compiler" in message and "--no-build-isolation" in message


def test_python_guard_serves_xla_0_and_refuses_xla_1_with_the_fix(tmp_path):
    if _built_guard_exists() or not hasattr(torch._C, "_acc"):
        pytest.skip("this torch takes another route than PyTorch's Python guard")
    proc = _run_without_compiler(tmp_path, """
        import torch
        import torch_xla
        from torch_xla._lazy.hooks import device_guard
        x = torch.ones(2, device='xla:0', requires_grad=True)
        (x * 3).sum().backward()
        print(device_guard.route, x.grad.cpu().tolist())
        try:
            torch.ones(2, device='xla:1')
        except RuntimeError as e:
            print(str(e))
        """, CPU_NUM_DEVICES="2")
    assert proc.returncode == 0, proc.stderr[-4000:]
    first, message = proc.stdout.splitlines()
    assert first == "python [3.0, 3.0]"
    assert message.startswith("torch_xla: xla:1 needs a compiled device guard")


def test_python_guard_sparse_factories_raise_pytorchs_not_implemented_error(tmp_path):
    """Without device_hooks.cpp there is no fallback on the sparse XLA keys (Python cannot
    register one): a sparse factory on the device raises PyTorch's NotImplementedError."""
    if _built_guard_exists() or not hasattr(torch._C, "_acc"):
        pytest.skip("this torch takes another route than PyTorch's Python guard")
    proc = _run_without_compiler(tmp_path, """
        import torch
        import torch_xla
        from torch_xla._lazy.hooks import device_guard
        print(device_guard.route)
        for layout in (torch.sparse_coo, torch.sparse_csr):
            try:
                torch.zeros(2, 2, layout=layout, device='xla')
            except NotImplementedError as e:
                print(str(e).splitlines()[0])
        """, CPU_NUM_DEVICES="1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    route, *messages = proc.stdout.splitlines()
    assert route == "python" and len(messages) == 2
    assert messages[0].startswith("Could not run 'aten::empty.memory_format'")
    assert "'SparseXLA' backend" in messages[0]
    assert messages[1].startswith("Could not run 'new_compressed_tensor' from the 'xla' device")
