"""torch_xla.debug.metrics' short report, and the names torch_xla's scripts read."""
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
