"""`out=` arguments the CPU refuses (another dtype, an `out` overlapping itself or an input)
are refused at the op with the CPU's error; accepted ones are written as on the CPU, without
running the op on the CPU."""
import warnings

import pytest
import torch

import torch_xla.debug.metrics as met
from tests.conftest import assert_lowered, assert_same


def _idx(d, *values):
    return torch.tensor(values, device=d)


def _expanded(d, n):
    return torch.rand(1, device=d).expand(n)


REFUSED = [
    # an out of another dtype
    lambda d: torch.amax(torch.rand(3, 4, device=d), 0,
                         out=torch.empty(4, dtype=torch.int32, device=d)),
    lambda d: torch.aminmax(torch.rand(3, 4, device=d), dim=0, out=(
        torch.empty(4, device=d), torch.empty(4, dtype=torch.float64, device=d))),
    lambda d: torch.gather(torch.rand(2, 2, device=d), 1, _idx(d, [0, 0], [1, 0]),
                           out=torch.empty(2, 2, dtype=torch.float64, device=d)),
    lambda d: torch.take(torch.rand(6, device=d), _idx(d, 2, 1),
                         out=torch.empty(2, dtype=torch.float64, device=d)),
    lambda d: torch.multinomial(torch.rand(1, 2, device=d), 2, out=torch.empty(1, 2, device=d)),
    lambda d: torch.complex(torch.rand(2, device=d), torch.rand(2, device=d),
                            out=torch.empty(2, dtype=torch.complex128, device=d)),
    lambda d: torch.cat([torch.rand(2, device=d)] * 2,
                        out=torch.empty(4, dtype=torch.int64, device=d)),
    # an out with elements written twice
    lambda d: torch.take(torch.rand(6, device=d), _idx(d, 2, 1, 0), out=_expanded(d, 3)),
    lambda d: torch.bernoulli(torch.rand(6, device=d), out=_expanded(d, 6)),
    lambda d: torch.index_select(torch.rand(3, 6, device=d), 1, _idx(d, 0, 1),
                                 out=torch.rand(1, 6, device=d).expand(2, 6)),
    # an out that is an input, or a view over an input's elements
    lambda d: (lambda src: torch.take(src, _idx(d, 2, 1, 0), out=src))(torch.rand(6, device=d)),
    lambda d: (lambda t: torch.kthvalue(
        t, 5, out=(t, torch.empty((), dtype=torch.long, device=d))))(torch.rand(10, device=d)),
    lambda d: (lambda ind: torch.gather(ind.clone(), 0, ind[1:], out=ind[:1]))(_idx(d, 2, 1, 0)),
    lambda d: (lambda y, z: torch.cat((y, z), out=z[:2, :]))(torch.rand(4, 6, device=d),
                                                             torch.zeros(4, 6, device=d)),
    lambda d: (lambda mask: torch.masked_select(mask.clone(), mask, out=mask))(
        _idx(d, True, False, True)),
    lambda d: torch.mm(torch.rand(3, 3, device=d), torch.rand(3, 3, device=d),
                       out=torch.empty(3, 3, dtype=torch.float64, device=d)),
    lambda d: torch.sort(torch.rand(3, 3, device=d), out=(
        torch.empty(3, 3, device=d), torch.empty(3, 3, dtype=torch.float64, device=d))),
    lambda d: torch.where(torch.rand(3, device=d) > 0.5, torch.rand(3, device=d),
                          torch.rand(3, device=d),
                          out=torch.empty(3, dtype=torch.float64, device=d)),
    lambda d: torch.nonzero(torch.rand(3, device=d), out=torch.empty(0, device=d)),
    # elementwise ops: a result that cannot be cast to out's dtype, an out with elements
    # written twice, an out over some of an input's elements
    lambda d: torch.add(torch.rand(3, device=d), 1,
                        out=torch.empty(3, dtype=torch.long, device=d)),
    lambda d: torch.sqrt(_idx(d, 1, 4), out=torch.empty(2, dtype=torch.long, device=d)),
    lambda d: torch.mul(torch.rand(3, device=d), 2, out=_expanded(d, 3)),
    lambda d: (lambda x: torch.add(x[:-1], 1, out=x[1:]))(torch.rand(4, device=d)),
    # the autograd refusal, for ops with a derivative
    lambda d: torch.floor(torch.rand(3, device=d, requires_grad=True),
                          out=torch.empty(3, device=d)),
]


@pytest.mark.parametrize("case", range(len(REFUSED)))
def test_refused_out_arguments_raise_the_cpus_error_at_the_op(dev, case):
    make = REFUSED[case]
    with pytest.raises((RuntimeError, TypeError)) as on_cpu:
        make("cpu")
    with pytest.raises(on_cpu.type) as on_xla:
        make(dev)  # at the op
    assert str(on_xla.value) == str(on_cpu.value)


ACCEPTED = [
    lambda d: torch.amax(torch.arange(12., device=d).view(3, 4), 0, out=torch.empty(0, device=d)),
    lambda d: torch.take(torch.arange(6., device=d), _idx(d, 2, 1), out=torch.empty(2, device=d)),
    lambda d: torch.cat([torch.arange(3, device=d)] * 2,
                        out=torch.empty(6, dtype=torch.float64, device=d)),
    lambda d: (lambda t: torch.kthvalue(t, 2, out=(torch.empty((), device=d),
                                                   torch.empty((), dtype=torch.long, device=d))))(
        torch.arange(5., device=d)),
    # views of one base that do not overlap
    lambda d: (lambda buf: torch.index_select(buf[:2], 0, _idx(d, 1, 0), out=buf[2:]))(
        torch.arange(8., device=d).view(4, 2)),
    lambda d: torch.mm(torch.eye(3, device=d), torch.arange(9., device=d).view(3, 3),
                       out=torch.empty(3, 3, device=d)),
    lambda d: torch.nonzero(_idx(d, 0, 1, 2), out=torch.empty(0, dtype=torch.long, device=d)),
    # elementwise ops: an out that is an input, a result cast to out's dtype
    lambda d: (lambda x: torch.add(x, 1, out=x))(torch.arange(3., device=d)),
    lambda d: (lambda x: torch.mul(x[1:], 2, out=x[1:]))(torch.arange(4., device=d)),
    lambda d: torch.eq(torch.arange(3., device=d), 1,
                       out=torch.empty(3, dtype=torch.long, device=d)),
    lambda d: torch.add(_idx(d, 1, 2), 1, out=torch.empty(2, device=d)),
    # no derivative, no autograd refusal
    lambda d: torch.eq(torch.arange(3., device=d, requires_grad=True), 1,
                       out=torch.empty(3, dtype=torch.bool, device=d)),
]


@pytest.mark.parametrize("case", range(len(ACCEPTED)))
def test_accepted_out_arguments_are_written_as_on_the_cpu_without_a_cpu_run(dev, case):
    make = ACCEPTED[case]
    expected = make("cpu")
    met.clear_counters()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resizing a non-empty out warns on both
        actual = make(dev)
    assert not met.counter_value("OutArgumentProbe")
    assert_lowered()  # the views' layouts are read without the CPU
    assert_same(actual, expected)


def test_the_probe_runs_only_when_the_metadata_show_a_refusal(dev):
    met.clear_counters()
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.take(torch.rand(6, device=dev), _idx(dev, 2, 1, 0), out=_expanded(dev, 3))
    assert met.counter_value("OutArgumentProbe") == 1


def test_out_arguments_refuse_inputs_that_require_grad(dev):
    x = torch.rand(3, device=dev, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"amax\(\): functions with out=\.\.\. arguments don't "
                                           "support automatic differentiation"):
        torch.amax(x, 0, out=torch.empty((), device=dev))
    with torch.no_grad():
        out = torch.empty((), device=dev)
        torch.amax(x, 0, out=out)
    assert out.item() == x.max().item()
