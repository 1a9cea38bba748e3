"""Value checks PyTorch makes on the CPU (indices out of range, integer division by zero):
on XLA they raise PyTorch's error at the next sync after the step's program ran (a host
read, the next `mark_step`, `wait_device_ops`), from an output of the step's program."""
import gc
import io
import math

import pytest
import torch
import torch.nn.functional as F

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from tests.compare import assert_same, check, compiles, to_xla
from torch_xla._lazy.trace import value_checks


def L(*values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def F32(*values):
    return torch.tensor(values, dtype=torch.float32)


def ar(*shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    return torch.arange(n).to(dtype).reshape(shape)


def _set(x, i, v):
    y = x.clone()
    y[i] = v
    return y


def _floordiv_(x, y):
    x = x.clone()
    x //= y
    return x


# name -> (fn, args): each raises on the CPU; the device raises the same at the next sync
BAD = {
    "index": (lambda x, i: x[i], (ar(3), L(5))),
    "index_negative": (lambda x, i: x[i], (ar(3), L(-4))),
    "index_after_a_slice": (lambda x, i: x[:, i], (ar(2, 3), L(3))),
    "index_two_tensors": (lambda x, i, j: x[i, j], (ar(2, 3), L([0], [1]), L(5, 0))),
    "index_size_0_dim": (lambda x, i: x[:, i], (ar(2, 0), L(0))),
    "index_int32": (lambda x, i: x[i], (ar(3), L(1, 7, 5, dtype=torch.int32))),
    "index_cpu_indices": (lambda x: x[torch.tensor([1, 3])], (ar(3),)),
    "setitem": (_set, (ar(3), L(3), 1.0)),
    "index_put_accumulate": (lambda x, i, v: x.index_put((i,), v, accumulate=True),
                             (ar(3), L(-5), ar(1))),
    "gather": (lambda x, i: torch.gather(x, 1, i), (ar(2, 3), L([0, 5], [7, 0]))),
    "gather_negative": (lambda x, i: torch.gather(x, -1, i), (ar(2, 3), L([-1]))),
    "gather_0d": (lambda x, i: torch.gather(x, 0, i), (torch.tensor(1.0), torch.tensor(1))),
    "scatter": (lambda x, i, s: torch.scatter(x, 1, i, s), (ar(2, 3), L([3]), ar(1, 1))),
    "scatter_value": (lambda x, i: torch.scatter(x, 0, i, 2.0), (ar(2, 3), L([2]))),
    "scatter_legacy_reduce": (lambda x, i, s: torch.scatter(x, 1, i, s, reduce="add"),
                              (ar(2, 3), L([3]), ar(1, 1))),
    "scatter_add": (lambda x, i, s: torch.scatter_add(x, 1, i, s), (ar(2, 3), L([-1]), ar(1, 1))),
    "scatter_reduce": (lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "amax", include_self=False),
                       (ar(2, 3), L([3]), ar(1, 1))),
    "index_select_matrix_dim_1": (lambda x, i: torch.index_select(x, 1, i), (ar(2, 3), L(1, 4, 3))),
    "index_select_dim_0": (lambda x, i: torch.index_select(x, 0, i), (ar(2, 3), L(2))),
    "index_select_3d": (lambda x, i: torch.index_select(x, 2, i), (ar(2, 3, 4), L(-1))),
    "index_add": (lambda x, i, s: x.index_add(1, i, s), (ar(2, 3), L(3), ar(2, 1))),
    "index_add_1d": (lambda x, i, s: x.index_add(0, i, s), (ar(3), L(3), ar(1))),
    "index_add_alpha": (lambda x, i, s: x.index_add(1, i, s, alpha=2), (ar(2, 3), L(3), ar(2, 1))),
    "index_copy": (lambda x, i, s: x.index_copy(1, i, s), (ar(2, 3), L(-1), ar(2, 1))),
    "index_fill": (lambda x, i: x.index_fill(1, i, -1.0), (ar(2, 3), L(-4))),
    "index_reduce": (lambda x, i, s: x.index_reduce(0, i, s, "prod"), (ar(2, 3), L(2), ar(1, 3))),
    "take": (lambda x, i: torch.take(x, i), (ar(2, 3), L(1, 9, 8))),
    "take_negative": (lambda x, i: torch.take(x, i), (ar(2, 3), L(-7))),
    "put": (lambda x, i, s: x.put(i, s, accumulate=True), (ar(2, 3), L(6), ar(1))),
    "embedding": (lambda w, i: F.embedding(i, w), (ar(3, 2), L([0, 3]))),
    "embedding_negative": (lambda w, i: F.embedding(i, w, padding_idx=0), (ar(3, 2), L(-1))),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t), (ar(2, 3), L(0, 3))),
    "cross_entropy_smoothed": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
                               (ar(2, 3), L(-1, 0))),
    "nll_loss_2d": (lambda x, t: F.nll_loss(x, t, reduction="none"), (ar(2, 3, 4), L([0, 1, 2, 7], [0, 0, 0, 0]))),
    "floor_divide": (lambda x, y: x // y, (L(1, 2), L(0, 1))),
    "floor_divide_broadcast": (lambda x, y: x // y, (L([1], [2]), L(0))),
    "div_trunc": (lambda x, y: torch.div(x, y, rounding_mode="trunc"), (L(1, 2), L(1, 0))),
    "div_floor_int32": (lambda x, y: torch.div(x, y, rounding_mode="floor"),
                        (L(1, dtype=torch.int32), L(0, dtype=torch.int32))),
    "remainder": (lambda x, y: x % y, (L(5, 2, dtype=torch.uint8), L(0, 1, dtype=torch.uint8))),
    "remainder_of_a_number": (lambda y: torch.remainder(3, y), (L(0, 1),)),
    "fmod": (lambda x, y: torch.fmod(x, y), (L(1, 2), L(0, 0))),
    "floor_divide_in_place": (_floordiv_, (L(1, 2), L(1, 0))),
    "binary_cross_entropy": (lambda x, t: F.binary_cross_entropy(x, t), (F32(0.5, 1.5), F32(0, 1))),
    "binary_cross_entropy_nan": (lambda x, t: F.binary_cross_entropy(x, t), (F32(math.nan), F32(0))),
    "bernoulli": (lambda p: torch.bernoulli(p), (F32(0.5, -0.1),)),
    "bernoulli_tensor_p": (lambda x, p: x.clone().bernoulli_(p), (F32(0, 0), F32(0.5, 2))),
    "poisson": (lambda r: torch.poisson(r), (F32(1, -1),)),
}


def _executions():
    data = met.metric_data("ExecuteTime")
    return data[0] if data else 0


@pytest.mark.parametrize("name", BAD)
def test_a_bad_value_raises_pytorchs_error_at_the_next_sync(name):
    fn, args = BAD[name]
    with pytest.raises(Exception) as cpu:
        fn(*args)
    args = to_xla(args)
    xm.mark_step()
    before, reads = _executions(), met.counter_value("TransferFromDevice") or 0
    fn(*args)  # no error at the op: the values are on the device
    xm.mark_step()  # launches the step's program and returns: nothing read, nothing raised
    assert (met.counter_value("TransferFromDevice") or 0) == reads
    with pytest.raises(type(cpu.value)) as dev:
        (xm.mark_step if len(name) % 2 else xm.wait_device_ops)()  # the next sync raises
    message = str(dev.value)
    assert type(dev.value) is type(cpu.value)
    assert message.split("\n")[0] == str(cpu.value)
    line = fn.__code__.co_firstlineno + (2 if fn in (_set, _floordiv_) else 0)  # the op's line
    assert f"{__file__}:{line} in {fn.__name__}" in message
    assert _executions() - before == 1  # the check was an output of the step's program
    xm.mark_step()  # the check was made once: the next step runs


# name -> (fn, args) PyTorch accepts, negative indices that wrap included
GOOD = {
    "index_negative": (lambda x, i: x[i], (ar(2, 3), L(-2, 1))),
    "index_negative_second_dim": (lambda x, i, j: x[i, j], (ar(2, 3), L(0, -1), L(-3, 2))),
    "index_put_negative": (lambda x, i: _set(x, i, 7.0), (ar(3), L(-3))),
    "index_fill_negative": (lambda x, i: x.index_fill(1, i, -1.0), (ar(2, 3), L(-3, 2))),
    "take_negative": (lambda x, i: torch.take(x, i), (ar(2, 3), L(-6, 5))),
    "put_negative": (lambda x, i, s: x.put(i, s), (ar(2, 3), L(-6), ar(1))),
    "gather": (lambda x, i: torch.gather(x, 1, i), (ar(2, 3), L([2, 0], [1, 1]))),
    "nll_loss_ignored_target": (lambda x, t: F.nll_loss(x, t, ignore_index=3), (ar(2, 3), L(0, 3))),
    "cross_entropy_default_ignore": (lambda x, t: F.cross_entropy(x, t), (ar(2, 3), L(-100, 2))),
    "float_floor_divide_by_zero": (lambda x, y: x // y, (ar(2), ar(2))),
    "int_true_division_by_zero": (lambda x, y: x / y, (L(1, 2), L(0, 1))),
    "int_by_float_zero": (lambda x: (x // 0.0, torch.fmod(x, 0.0)), (L(1, 2),)),
    "empty_int_division": (lambda x, y: x // y, (L(dtype=torch.int64), L(0))),
    "empty_index": (lambda x, i: x[i], (ar(3), L(dtype=torch.int64))),
    "binary_cross_entropy_at_the_bounds": (lambda x, t: F.binary_cross_entropy(x, t),
                                           (F32(0, 1, 0.5), F32(0, 1, 1))),
}


@pytest.mark.parametrize("name", GOOD)
def test_good_values_pass(name):
    fn, args = GOOD[name]
    check(fn, *args)


def test_a_host_read_raises_before_mark_step():
    x, i = to_xla((ar(3), L(5)))
    with pytest.raises(IndexError, match="^index 5 is out of bounds for dimension 0 with size 3"):
        x[i].sum().item()
    with pytest.raises(RuntimeError, match="^ZeroDivisionError"):
        (i // (i - 5)).cpu()
    xm.mark_step()


def _host_reads(v):
    """Every way the host reads a value: each must raise a failed check's error first."""
    return {"cpu": v.cpu, "item": lambda: v[0].item(), "tolist": v.tolist, "print": lambda: repr(v),
            "host ==": lambda: bool(v == 2.0), "equal": lambda: torch.equal(v, v),
            "_maybe_convert_to_cpu": lambda: xm._maybe_convert_to_cpu([v]),
            "save": lambda: torch.save(v, io.BytesIO()), "to the CPU": lambda: v.to("cpu"),
            "a later step's value": lambda: (v + 1).cpu()}


def test_a_value_of_a_failed_check_raises_when_read_after_mark_step():
    """mark_step launches the step and returns; a read of a value computed from the failed
    op raises its error (never XLA's clamped value), each time; a value of the same step
    that does not depend on it reads; the next mark_step does not raise it again."""
    x, i = to_xla((ar(3), L(5)))
    v = x[i]
    s, w = v.sum() * 2, x * 2
    xm.mark_step()
    assert w.cpu().tolist() == [0.0, 2.0, 4.0]
    for how, read in list(_host_reads(v).items()) + [("a result computed with it", s.item)]:
        with pytest.raises(IndexError, match=r"^index 5 is out of bounds for dimension 0 with "
                           r"size 3\n.* index was called at .*: v = x\[i\]") as e:
            read()
        assert "index 5" in str(e.value), how
    y = torch.ones(2, device=xm.xla_device()) + 1
    xm.mark_step()  # the error was raised to its reader: this step is not blamed for it
    xm.mark_step()
    assert y.cpu().tolist() == [2.0, 2.0]


def test_a_failed_read_leaves_no_reader_state_behind():
    """The kept error holds no frame of the read that raised it: printing holds a guard
    disabling functorch in a local, which must not outlive the failed print."""
    x, i = to_xla((ar(3), L(5)))
    v = x[i]
    xm.mark_step()
    for _ in range(2):
        with pytest.raises(IndexError):
            repr(v)
    gc.collect()
    assert torch.func.grad(lambda t: (t * t).sum())(torch.ones(2)).tolist() == [2.0, 2.0]


def test_a_divisor_check_guards_the_quotient():
    a, b = to_xla((L(4, 6), L(2, 0)))
    q, r = a // b, a + b
    xm.mark_step()
    assert r.cpu().tolist() == [6, 6]
    with pytest.raises(RuntimeError, match="^ZeroDivisionError"):
        q.cpu()
    xm.wait_device_ops()


def test_a_number_or_cpu_scalar_divisor_raises_at_the_op():
    x = to_xla(L(1, 2))
    xm.mark_step()
    before = _executions()
    for divide in (lambda: x // 0, lambda: x % 0, lambda: torch.fmod(x, False),
                   lambda: torch.div(x, 0, rounding_mode="trunc"), lambda: x % torch.tensor(0)):
        with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
            divide()
    assert _executions() == before
    assert (x // 2).cpu().tolist() == [0, 1]


def test_a_cpu_scalar_index_is_checked_at_the_op():
    x = to_xla(ar(3))
    xm.mark_step()
    before = _executions()
    with pytest.raises(RuntimeError, match="^index 5 is out of bounds for dimension 0 with size 3$"):
        torch.gather(x, 0, torch.tensor(5))
    with pytest.raises(IndexError, match="^out of range: tried to access index -4 on a tensor of 3"):
        torch.take(x, torch.tensor(-4))
    assert _executions() == before
    assert torch.take(x, torch.tensor(-3)).item() == 0.0


def test_off_switch(monkeypatch):
    """XLA_VALUE_CHECKS=0: no check (XLA clamps the index), no extra program output."""
    monkeypatch.setattr(value_checks, "ENABLED", False)
    x, i = to_xla((ar(3), L(5)))
    assert x[i].cpu().tolist() == [2.0]


def test_checks_in_a_training_step_add_no_execution():
    """embedding's and cross_entropy's checks join the step's program: one execution per
    step, one compilation in all, and a step with bad targets leaves the next one working."""
    torch.manual_seed(0)
    emb, head = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 5)
    cpu_model = torch.nn.Sequential(emb, head)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 5)).to(xm.xla_device())
    model.load_state_dict(cpu_model.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    tokens, targets = torch.randint(0, 10, (3, 6)), torch.randint(0, 5, (3, 6))
    tokens_d, targets_d = to_xla((tokens, targets))

    def step(model, opt, tokens, targets):
        opt.zero_grad()
        loss = F.cross_entropy(model(tokens).reshape(-1, 5), targets.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    per_step = []
    for n in range(3):
        before, compiled = _executions(), compiles()
        loss = step(model, opt, tokens_d, targets_d)
        xm.mark_step()
        per_step.append(_executions() - before)
        if n:
            assert compiles() == compiled
        assert_same(loss, step(cpu_model, cpu_opt, tokens, targets), rtol=1e-5, atol=1e-5)
    assert per_step == [1, 1, 1]

    with pytest.raises(IndexError) as cpu:
        step(cpu_model, cpu_opt, tokens, targets + 5)
    step(model, opt, tokens_d, targets_d + 5)
    xm.mark_step()
    with pytest.raises(IndexError) as dev:
        xm.mark_step()
    assert str(dev.value).startswith(str(cpu.value) + "\n")
    model.load_state_dict(cpu_model.state_dict())
    assert_same(step(model, opt, tokens_d, targets_d), step(cpu_model, cpu_opt, tokens, targets),
                rtol=1e-5, atol=1e-5)


def test_random_ops_of_good_values_pass():
    p, rates = to_xla((F32(0, 1, 0.5), F32(0, 2.5)))
    sample = torch.bernoulli(p)
    counts = torch.poisson(rates)
    xm.mark_step()
    assert sample.cpu().tolist()[:2] == [0.0, 1.0] and counts.cpu().tolist()[0] == 0.0


def test_a_check_is_one_reduction():
    """A check's lowering is one reduction of the indices, with no argmax or gather after
    it (XLA makes each of those a kernel of its own, compiled at a step's first run), and
    finds the first bad value of several index tensors broadcast together."""
    import jax
    import jax.numpy as jnp
    i, j = jnp.array([[0], [1]]), jnp.array([4, -7, 5])
    bounds = ((0, 2, None), (-3, 3, None))
    text = str(jax.make_jaxpr(lambda i, j: value_checks._IN_BOUNDS.fn(i, j, bounds=bounds))(i, j))
    assert text.count(" reduce[") + text.count(" reduce_") == 1, text
    assert not any(op in text for op in ("argmax", "argmin", "gather", "dynamic_slice")), text
    flag = value_checks._IN_BOUNDS.fn(i, j, bounds=bounds).tolist()
    # row-major over the (2, 3) broadcast: (0, 0) holds j = 4, the first bad value (k = 1)
    assert value_checks._decode(flag, 2) == (True, 4, 1)
    assert value_checks._decode(value_checks._IN_BOUNDS.fn(i, j % 3, bounds=bounds).tolist(), 2)[0] is False
