"""The device's floating dtype under XLA_USE_BF16 / XLA_DOWNCAST_BF16 (`_lazy/hooks/device`; seed 4.2,
Q3): read at start-up, so each mode runs in a fresh process."""
import json
import os
import textwrap

import pytest
import torch

from tests.fresh_process import python

_SCRIPT = textwrap.dedent("""
    import json, torch
    import torch_xla.core.xla_model as xm
    d = xm.xla_device()
    s = lambda t: str(t.dtype).replace('torch.', '')
    cpu = torch.arange(4, dtype=torch.float32) / 4
    x = cpu.to(d)
    m = torch.nn.Linear(4, 2).to(d)
    y = m(x)
    out = {
        'randn': s(torch.randn(2, device=d)), 'zeros64': s(torch.zeros(2, device=d, dtype=torch.float64)),
        'to': s(x), 'to64': s(cpu.double().to(d)), 'int': s(torch.arange(3).to(d)),
        'half': s(torch.ones(2, device=d, dtype=torch.float16)),
        'weight': s(m.weight), 'forward': s(y), 'cpu': s(x.cpu()), 'explicit': s(x.float()),
        'values': x.cpu().float().tolist(), 'sum': y.sum().item(),
    }
    print(json.dumps(out))
""")


def _run(var, after_import=False):
    """The script's findings with `var`=1 in its environment, or (`after_import`) set by the
    script itself after `import torch_xla` and before its first device tensor, as
    accelerate's and Lightning's bf16 modes do."""
    env = {"XLA_USE_BF16": None, "XLA_DOWNCAST_BF16": None}
    script = _SCRIPT
    if after_import:
        script = script.replace("d = xm.xla_device()", f"import os; os.environ['{var}'] = '1'; d = xm.xla_device()")
    else:
        env[var] = "1"
    out = python("-c", script, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("after_import", [False, True], ids=["before-import", "after-import"])
@pytest.mark.parametrize("var, f64", [("XLA_USE_BF16", "bfloat16"), ("XLA_DOWNCAST_BF16", "float32")])
def test_bf16_modes(var, f64, after_import):
    r = _run(var, after_import)
    assert r["randn"] == r["to"] == r["weight"] == r["forward"] == "bfloat16"
    assert r["zeros64"] == r["to64"] == f64
    assert r["int"] == "int64" and r["half"] == "float16"
    # .cpu() gives what the tensor says it is; an explicit dtype is honoured.
    assert r["cpu"] == "bfloat16" and r["explicit"] == "float32"
    assert r["values"] == [0.0, 0.25, 0.5, 0.75]  # exact in bfloat16


def test_without_the_variables_nothing_changes(dev):
    assert "XLA_USE_BF16" not in os.environ and "XLA_DOWNCAST_BF16" not in os.environ
    assert torch.randn(2, device=dev).dtype == torch.float32
    assert torch.zeros(2, device=dev, dtype=torch.float64).dtype == torch.float64
    assert torch.ones(3).to(dev).dtype == torch.float32
    m = torch.nn.Linear(3, 2).to(dev)
    assert m.weight.dtype == torch.float32 and m(torch.ones(3, device=dev)).cpu().dtype == torch.float32
