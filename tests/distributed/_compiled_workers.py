"""Run in each spawned process: collectives called inside `torch.compile(fullgraph=True)`
functions, and collectives writing into outputs of another shape, against the values the
lazy path's collectives must give (`_workers._expected`, computed on the CPU). Each check
is reported on its own: {name: None, or the error's text} per replica, in a JSON file."""
import json
import os
import traceback

import torch

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr
from tests.distributed._workers import _expected, _group, _groups, _input, _wide
from tests.compare import assert_same

c10d = torch.ops._c10d_functional


def _reductions(x, groups):
    out = {op: xm.all_reduce(op, x, scale=0.5, groups=groups) for op in ("sum", "mul", "max", "min")}
    ints = x.to(torch.int64)
    out.update({op: xm.all_reduce(op, ints, groups=groups) for op in ("and", "or")})
    return out


def _gathers(x, groups):
    return {"0": xm.all_gather(x, 0, groups=groups), "1": xm.all_gather(x, dim=1, groups=groups)}


def _scatters(x, groups, n):
    return {op: xm.reduce_scatter(op, _wide(x, n), 2.0, 1, n, groups=groups) for op in ("sum", "max")}


def _all_to_all(x, groups, n):
    return xm.all_to_all(_wide(x, n), 1, 0, n, groups=groups)


def _permutes(x, world):
    return (xm.collective_permute(x, [(k, (k + 1) % world) for k in range(world)]),
            xm.collective_permute(x, [(0, 1)]))


def _in_place(a, b, world):
    """The list form reduces its tensors in place (inputs the graph writes)."""
    xm.all_reduce("sum", [a], scale=1.0 / world)
    xm.all_reduce("sum", [b])


def _functional(x, world):
    """PyTorch's traceable collectives on XLA tensors."""
    summed = c10d.wait_tensor(c10d.all_reduce(x, "sum", ""))
    return (summed, c10d.all_gather_into_tensor(x, world, ""),
            c10d.reduce_scatter_tensor(torch.cat([x] * world), "max", world, ""),
            c10d.broadcast(x, 1, ""))


def _compiled(fn, *args):
    """fn(*args) compiled as one graph, called twice: the second call runs the same program
    (no compilation, no lazy fallback)."""
    compiled = torch.compile(fn, backend="openxla", fullgraph=True)
    compiled(*args)
    xm.mark_step()
    compiles, runs = met.counter_value("UncachedCompile"), met.counter_value("DynamoExecute")
    out = compiled(*args)
    assert met.counter_value("UncachedCompile") == compiles, "the second call compiled again"
    assert met.counter_value("DynamoExecute") == runs + 1
    assert met.counter_value("DynamoLazyGraph") is None, "a graph ran on the lazy path"
    return out


def _close(actual, expected, name):
    assert_same(actual, expected, path=name)


def _check_groups(device, world, r, expected, run):
    x = _input(r).to(device)
    for groups in (None, _groups(world)):
        tag = "grouped" if groups else "all"
        run(x, groups, len(_group(groups, world, r)), tag, expected)


def _reduce_check(x, groups, n, tag, expected):
    for op, t in _compiled(_reductions, x, groups).items():
        _close(t, expected[f"all_reduce_{op}_{tag}"], f"{op} {tag}")


def _gather_check(x, groups, n, tag, expected):
    for dim, t in _compiled(_gathers, x, groups).items():
        _close(t, expected[f"all_gather{dim}_{tag}"], f"dim {dim} {tag}")


def _scatter_check(x, groups, n, tag, expected):
    for op, t in _compiled(_scatters, x, groups, n).items():
        _close(t, expected[f"reduce_scatter_{op}_{tag}"], f"{op} {tag}")


def _all_to_all_check(x, groups, n, tag, expected):
    _close(_compiled(_all_to_all, x, groups, n), expected[f"all_to_all_{tag}"], tag)


def compiled_permute(device, world, r, expected):
    full, partial = _compiled(_permutes, _input(r).to(device), world)
    _close(full, expected["permute"], "permute")
    _close(partial, expected["permute_partial"], "permute_partial")


def compiled_list_in_place(device, world, r, expected):
    x = _input(r).to(device)
    pair = [x * 1.0, x.to(torch.int64)]
    _compiled(_in_place, *pair, world)  # twice: the second call reduces the first's result
    _close(pair[0], expected["list_in_place"][0], "float")
    _close(pair[1], expected["list_in_place"][1] * world, "int64")


def compiled_c10d_functional(device, world, r, expected):
    xs = [_input(k) for k in range(world)]
    summed, gathered, scattered, broadcast = _compiled(_functional, _input(r).to(device), world)
    _close(summed, sum(xs), "all_reduce")
    _close(gathered, torch.cat(xs), "all_gather_into_tensor")
    _close(scattered, torch.stack(xs).amax(0), "reduce_scatter_tensor")
    _close(broadcast, xs[1], "broadcast")


def lazy_c10d_functional(device, world, r, expected):
    xs = [_input(k) for k in range(world)]
    summed, gathered, scattered, broadcast = _functional(_input(r).to(device), world)
    _close(summed, sum(xs), "all_reduce")
    _close(gathered, torch.cat(xs), "all_gather_into_tensor")
    _close(scattered, torch.stack(xs).amax(0), "reduce_scatter_tensor")
    _close(broadcast, xs[1], "broadcast")


def outputs_of_another_shape(device, world, r, expected):
    """As in torch_xla, `output=` takes the result's shape and values, and is returned."""
    x = _input(r).to(device)
    out = torch.zeros(2, 8 * world, device=device)
    assert xm.reduce_scatter("sum", _wide(x, world), 2.0, 1, world, output=out) is out
    _close(out, expected["reduce_scatter_sum_all"], "reduce_scatter")
    outs = [torch.zeros(1, device=device), torch.zeros(3, 4, 5, device=device)]
    results = xm.reduce_scatter("sum", [_wide(x, world)] * 2, 2.0, 1, world, output=outs)
    assert all(a is b for a, b in zip(results, outs))
    for t in outs:
        _close(t, expected["reduce_scatter_sum_all"], "reduce_scatter of a list")
    out = torch.zeros(1, device=device)
    assert xm.all_gather(x, dim=1, output=out, pin_layout=False) is out
    _close(out, expected["all_gather1_all"], "all_gather")


CHECKS = {
    "compiled_all_reduce": lambda *a: _check_groups(*a, _reduce_check),
    "compiled_all_gather": lambda *a: _check_groups(*a, _gather_check),
    "compiled_reduce_scatter": lambda *a: _check_groups(*a, _scatter_check),
    "compiled_all_to_all": lambda *a: _check_groups(*a, _all_to_all_check),
    "compiled_permute": compiled_permute,
    "compiled_list_in_place": compiled_list_in_place,
    "compiled_c10d_functional": compiled_c10d_functional,
    "lazy_c10d_functional": lazy_c10d_functional,
    "outputs_of_another_shape": outputs_of_another_shape,
}


def replica(index, out_dir):
    """Every check in turn; the replicas run the same ones, so a check failing the same way
    everywhere leaves no replica waiting in a collective."""
    device = xm.xla_device()
    world, r = xr.world_size(), xr.global_ordinal()
    expected = _expected(world, r)
    results = {}
    for name, check in CHECKS.items():
        try:
            check(device, world, r, expected)
            results[name] = None
        except Exception:
            results[name] = traceback.format_exc()
        xm.mark_step()
    with open(os.path.join(out_dir, f"{r}.json"), "w") as f:
        json.dump(results, f)
