import pytest
import torch

from tests.conftest import check_lowered


def lists():
    torch.manual_seed(0)
    return ([torch.rand(3) + 0.5, torch.rand(2, 2) + 0.5], [torch.randn(3), torch.randn(2, 2)],
            [torch.rand(3) + 1, torch.rand(2, 2) + 1])


def inplace(op):
    """Runs an in-place foreach op on copies of the first list, returns the list."""
    def fn(a, b, c):
        a = [t.clone() for t in a]
        op(a, b, c)
        return a
    return fn


@pytest.mark.parametrize("op", [
    lambda a, b, c: torch._foreach_add(a, b),
    lambda a, b, c: torch._foreach_add(a, b, alpha=-2),
    lambda a, b, c: torch._foreach_add(a, 1.5),
    lambda a, b, c: torch._foreach_add(a, [1, 2.5]),
    lambda a, b, c: torch._foreach_add(a, torch.tensor(2.0).to(a[0].device), alpha=3),
    lambda a, b, c: torch._foreach_sub(a, b, alpha=0.5),
    lambda a, b, c: torch._foreach_sub(a, [1.0, 2.0]),
    lambda a, b, c: torch._foreach_mul(a, b),
    lambda a, b, c: torch._foreach_mul(a, 2),
    lambda a, b, c: torch._foreach_mul(a, torch.tensor(3.0).to(a[0].device)),
    lambda a, b, c: torch._foreach_div(a, c),
    lambda a, b, c: torch._foreach_div(a, [2.0, 4.0]),
    lambda a, b, c: torch._foreach_div(a, torch.tensor(2.0).to(a[0].device)),
    lambda a, b, c: torch._foreach_maximum(a, b),
    lambda a, b, c: torch._foreach_minimum(a, 0.7),
    lambda a, b, c: torch._foreach_clamp_min(b, 0.1),
    lambda a, b, c: torch._foreach_clamp_max(b, [0.1, -0.2]),
    lambda a, b, c: torch._foreach_pow(a, 2),
    lambda a, b, c: torch._foreach_pow(a, b),
    lambda a, b, c: torch._foreach_pow(a, [0.5, 3]),
    lambda a, b, c: torch._foreach_pow(2.0, b),
    lambda a, b, c: torch._foreach_addcmul(a, b, c),
    lambda a, b, c: torch._foreach_addcmul(a, b, c, value=-0.5),
    lambda a, b, c: torch._foreach_addcmul(a, b, c, [0.1, 0.2]),
    lambda a, b, c: torch._foreach_addcdiv(a, b, c, value=2),
    lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.1, 0.2]),
    lambda a, b, c: torch._foreach_lerp(a, b, 0.3),
    lambda a, b, c: torch._foreach_lerp(a, b, c),
    lambda a, b, c: torch._foreach_lerp(a, b, [0.2, 0.9]),
    lambda a, b, c: torch._foreach_norm(b),
    lambda a, b, c: torch._foreach_norm(b, 1),
    lambda a, b, c: torch._foreach_norm(b, float("inf")),
    lambda a, b, c: torch._foreach_max(b),
], ids=range(33))
def test_functional(op):
    check_lowered(op, *lists())


@pytest.mark.parametrize("name", ["sqrt", "neg", "abs", "exp", "log", "sign", "reciprocal",
                                  "sigmoid", "tanh", "floor", "round", "trunc", "erf", "expm1"])
def test_unary(name):
    check_lowered(lambda a, b, c: getattr(torch, f"_foreach_{name}")(b if name in ("neg", "abs", "sign") else a),
                  *lists())


@pytest.mark.parametrize("op", [
    lambda a, b, c: torch._foreach_add_(a, b, alpha=2),
    lambda a, b, c: torch._foreach_mul_(a, 0.9),
    lambda a, b, c: torch._foreach_addcmul_(a, b, c, value=0.1),
    lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [0.1, 0.2]),
    lambda a, b, c: torch._foreach_lerp_(a, b, 0.1),
    lambda a, b, c: torch._foreach_zero_(a),
    lambda a, b, c: torch._foreach_copy_(a, b),
    lambda a, b, c: torch._foreach_sqrt_(a),
    lambda a, b, c: torch._foreach_clamp_min_(a, 0.9),
], ids=range(9))
def test_inplace(op):
    check_lowered(inplace(op), *lists())


def test_int_lists_promote_with_float_scalars():
    check_lowered(lambda a: torch._foreach_mul(a, 0.5), [torch.arange(3), torch.arange(4).view(2, 2)])


@pytest.mark.parametrize("make", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True),
    lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
    lambda p: torch.optim.AdamW(p, lr=0.01, amsgrad=True, foreach=True),
    lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, foreach=True),
    lambda p: torch.optim.Adagrad(p, lr=0.1, foreach=True),
], ids=["sgd", "adam", "adamw", "rmsprop", "adagrad"])
def test_optimizer_steps(make):
    """Two steps of a foreach optimizer on a small model, against the CPU."""
    def train(w, b, x):
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
        opt = make([w, b])
        for _ in range(2):
            opt.zero_grad()
            ((x @ w.t() + b).tanh() ** 2).sum().backward()
            opt.step()
        return w, b
    torch.manual_seed(0)
    check_lowered(train, torch.randn(3, 4), torch.randn(3), torch.randn(5, 4), rtol=1e-5, atol=1e-5)
