"""assume_pure: a torch function traced once into one jax function; values and gradients
as on the CPU, tensors it closes over read afresh, random ops seeded by rng_seed."""
import torch

import torch_xla
import torch_xla.experimental.assume_pure as ap
from tests.compare import EXACT, assert_same, check, compiles
from torch_xla.experimental.assume_pure import PureModule, assume_pure


def test_values_and_gradients_match_the_cpu(dev):
    def f(a, b, scale=1.0):
        return torch.sin(a @ b) * scale, (a * b).sum()
    pure = assume_pure(f)
    a, b = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
    check(lambda a, b: (pure if a.device.type == "xla" else f)(a, b, scale=2.0), a, b, grads=True)


def test_traced_once_and_compiled_once(dev):
    traces = []

    @assume_pure
    def f(a):
        traces.append(1)
        return torch.tanh(a @ a)
    counts = []
    for _ in range(3):
        a = torch.ones(3, 3, device=dev, requires_grad=True)
        f(a).sum().backward()
        torch_xla.sync()
        counts.append(compiles())
    assert len(traces) == 1
    assert counts[1] == counts[2]


def test_closed_over_parameters_get_gradients_and_fresh_values(dev):
    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 2)
    model = torch.nn.Linear(4, 2).to(dev)
    model.load_state_dict(cpu.state_dict())
    pure = assume_pure(lambda x: torch.relu(model(x)))
    x = torch.randn(3, 4)
    for _ in range(2):  # the second call reads the parameters the first step updated
        out = pure(x.to(dev))
        out.sum().backward()
        torch.relu(cpu(x)).sum().backward()
        with torch.no_grad():
            for p, q in zip(model.parameters(), cpu.parameters()):
                assert_same(p.grad, q.grad)
                p -= 0.1 * p.grad
                q -= 0.1 * q.grad
                p.grad = q.grad = None
        torch_xla.sync()
    assert_same(pure(x.to(dev)), torch.relu(cpu(x)))


def test_pure_module_matches_the_module(dev):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    model = PureModule(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(),
                                           torch.nn.Linear(8, 2)).to(dev))
    model._module.load_state_dict(cpu.state_dict())
    x = torch.randn(5, 4)
    model(x.to(dev)).sum().backward()
    cpu(x).sum().backward()
    for p, q in zip(model.parameters(), cpu.parameters()):
        assert_same(p.grad, q.grad)


def test_rng_seed_argument(dev):
    noisy = assume_pure(lambda a: a + torch.rand_like(a), add_rng_seed_argument=True)
    a = torch.zeros(4, device=dev)
    r0, r1, r0_again = noisy(a, rng_seed=0), noisy(a, rng_seed=1), noisy(a, rng_seed=0)
    assert not torch.equal(r0.cpu(), r1.cpu())
    assert_same(r0, r0_again.cpu(), **EXACT)


def test_assume_pure_torch_traces_each_call_unless_cached_by_name(dev):
    traces = []

    def f(a, b):
        traces.append(1)
        return torch.sin(a @ b)
    a = torch.randn(3, 3)
    each_call = ap.assume_pure_torch(f)
    cached = ap.assume_pure_torch(f, use_cache=True)
    with torch.no_grad():
        for g in (each_call, each_call, cached, cached):
            assert_same(g(a.to(dev), a.to(dev)), torch.sin(a @ a))
        assert len(traces) == 3
        assert set(ap._XLA_COMPUTATION_CACHE) == {"f"}
        # a call of another signature is traced for it (torch_xla would reuse the first)
        assert cached(a[:2].to(dev), a.to(dev)).shape == (2, 3) and len(traces) == 4
    ap._XLA_COMPUTATION_CACHE.clear()
    check(lambda a: (ap.assume_pure_torch(f) if a.device.type == "xla" else f)(a, a),
          a.requires_grad_(), grads=True)  # with gradients (torch_xla's is forward only)
