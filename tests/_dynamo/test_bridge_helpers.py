"""The dynamo bridge's helpers and settings torch_xla scripts use: the compile counter,
`config.skip_input_data_check`, `NoneRemover`, the aot_function backend."""
import pytest
import torch

import torch_xla
import torch_xla.debug.metrics as met
from torch_xla._dynamo import config, dynamo_backend2
from torch_xla._dynamo.dynamo_bridge import NoneRemover
from tests.compare import assert_same


def _f(a):
    return a.cos() * 2


def test_the_aot_function_backend_compiles_one_program(dev):
    met.clear_counters()
    x = torch.randn(3, device=dev)
    out = torch.compile(_f, backend=dynamo_backend2.dynamo_backend)(x)
    assert_same(out, _f(x.cpu()))
    assert met.counter_value("DynamoExtractCompiledGraph") == 1


def test_skip_input_data_check_refuses_pending_inputs(dev, monkeypatch):
    monkeypatch.setattr(config, "skip_input_data_check", True)
    g = torch.compile(_f, backend="openxla")
    x = torch.randn(3, device=dev)
    torch_xla.sync()
    assert_same(g(x), _f(x.cpu()))
    with pytest.raises(RuntimeError, match="can not be a pending ir"):
        g(x + 1)


@pytest.mark.parametrize("kind", [list, tuple])
def test_none_remover_round_trip(kind):
    values = kind(["a", None, "b", None])
    remover = NoneRemover()
    kept = remover.remove_nones(values)
    assert kept == kind(["a", "b"]) and remover.none_poslist == [1, 3]
    if kind is list:
        assert kept is values  # lists change in place
    assert remover.add_nones(kept) == kind(["a", None, "b", None])


def test_alias_with_buffer_donor_config_is_set_within_only():
    from torch_xla._dynamo.dynamo_bridge import alias_with_buffer_donor_config
    with alias_with_buffer_donor_config() as saved:
        assert saved is False and torch_xla._XLAC._xla_get_enable_alias_with_buffer_donor_config()
    assert not torch_xla._XLAC._xla_get_enable_alias_with_buffer_donor_config()
