"""Code the multi-device tests run in each replica (a DataParallel thread or a spawned
process), with the values every collective must give, computed on the CPU."""
import sys

import torch

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from tests.compare import assert_same


def _input(r):
    """Replica r's tensor: distinct, negative and zero entries, 2 x 4."""
    return torch.tensor([[r + 1.0, -(r + 2.0), 3.0 * r, 0.5], [2.0, r * r, -1.0, r - 1.5]])


def _wide(x, n):
    """n distinct 2 x 4 chunks side by side."""
    return torch.cat([x + 10.0 * j for j in range(n)], 1)


def _groups(world):
    """Two groups: even and odd ordinals ([[0], [1]] for 2 replicas, [[0, 2], [1, 3]] for 4)."""
    return [[i for i in range(world) if i % 2 == j] for j in range(2)]


def _group(groups, world, r):
    return next(g for g in groups if r in g) if groups else list(range(world))


_REDUCE = {"sum": lambda s: torch.stack(s).sum(0), "mul": lambda s: torch.stack(s).prod(0),
           "max": lambda s: torch.stack(s).amax(0), "min": lambda s: torch.stack(s).amin(0)}


def _expected(world, r):
    xs = [_input(k) for k in range(world)]
    out = {}
    for groups in (None, _groups(world)):
        tag = "grouped" if groups else "all"
        g = _group(groups, world, r)
        for op, fn in _REDUCE.items():
            out[f"all_reduce_{op}_{tag}"] = fn([xs[k] for k in g]) * 0.5
        ints = [xs[k].to(torch.int64) for k in g]
        out[f"all_reduce_and_{tag}"] = ints[0].clone()
        out[f"all_reduce_or_{tag}"] = ints[0].clone()
        for t in ints[1:]:
            out[f"all_reduce_and_{tag}"] &= t
            out[f"all_reduce_or_{tag}"] |= t
        out[f"all_gather0_{tag}"] = torch.cat([xs[k] for k in g], 0)
        out[f"all_gather1_{tag}"] = torch.cat([xs[k] for k in g], 1)
        n, pos = len(g), g.index(r)
        wide = [_wide(xs[k], n) for k in range(world)]
        for op in ("sum", "max"):
            out[f"reduce_scatter_{op}_{tag}"] = (_REDUCE[op]([wide[k] for k in g]) * 2.0).chunk(n, 1)[pos]
        out[f"all_to_all_{tag}"] = torch.cat([wide[k].chunk(n, 1)[pos] for k in g], 0)
    out["permute"] = xs[(r - 1) % world]
    out["permute_partial"] = xs[0] if r == 1 else torch.zeros(2, 4)
    out["list_in_place"] = [sum(xs) / world, sum(x.to(torch.int64) for x in xs)]
    out["scalar"] = torch.tensor(float(sum(range(1, world + 1))))
    return out


def collectives(device):
    """Runs every collective on this replica's input; returns {name: (actual, expected)}."""
    world, r = xr.world_size(), xr.global_ordinal()
    assert xm.xrt_world_size() == world and xm.get_ordinal() == r
    x = _input(r).to(device)
    out = {}
    for groups in (None, _groups(world)):
        tag = "grouped" if groups else "all"
        n = len(_group(groups, world, r))
        for op in ("sum", "mul", "max", "min"):
            out[f"all_reduce_{op}_{tag}"] = xm.all_reduce(op, x, scale=0.5, groups=groups)
        for op in ("and", "or"):
            out[f"all_reduce_{op}_{tag}"] = xm.all_reduce(op, x.to(torch.int64), groups=groups)
        out[f"all_gather0_{tag}"] = xm.all_gather(x, 0, groups=groups)
        out[f"all_gather1_{tag}"] = xm.all_gather(x, dim=1, groups=groups)
        for op in ("sum", "max"):
            out[f"reduce_scatter_{op}_{tag}"] = xm.reduce_scatter(op, _wide(x, n), 2.0, 1, n, groups=groups)
        out[f"all_to_all_{tag}"] = xm.all_to_all(_wide(x, n), 1, 0, n, groups=groups)
    out["permute"] = xm.collective_permute(x, [(k, (k + 1) % world) for k in range(world)])
    out["permute_partial"] = xm.collective_permute(x, [(0, 1)])
    pair = [x * 1.0, x.to(torch.int64)]
    xm.all_reduce("sum", pair[:1], scale=1.0 / world)
    xm.all_reduce("sum", pair[1:])
    out["list_in_place"] = pair
    scalar = torch.tensor(0.0).to(device) + (r + 1)  # a Python scalar that differs per replica
    out["scalar"] = xm.all_reduce("sum", scalar)
    xm.mark_step()
    expected = _expected(world, r)
    results = {k: (v.cpu() if isinstance(v, torch.Tensor) else [t.cpu() for t in v], expected[k])
               for k, v in out.items()}
    payloads = xm.rendezvous("check", f"replica {r}".encode())
    results["rendezvous"] = (payloads, [f"replica {k}".encode() for k in range(world)])
    results["mesh_reduce"] = (xm.mesh_reduce("check", r + 1, sum), sum(range(1, world + 1)))
    return results


def assert_results(results):
    for name, (actual, expected) in results.items():
        if isinstance(expected, torch.Tensor) or (isinstance(expected, list) and expected
                                                   and isinstance(expected[0], torch.Tensor)):
            assert_same(actual, expected, path=name, device="cpu")
        else:
            assert actual == expected, (name, actual, expected)


# ---- training: N replicas on shards of each global batch == one device on the batch -------

STEPS, BATCH = 3, 8


def _model():
    torch.manual_seed(1)
    return torch.nn.Linear(4, 2)


def global_batches():
    g = torch.Generator().manual_seed(2)
    return [(torch.randn(BATCH, 4, generator=g), torch.randn(BATCH, 2, generator=g)) for _ in range(STEPS)]


def reference_weights():
    """Plain SGD on the CPU over the whole global batches."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for data, target in global_batches():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data), target).backward()
        opt.step()
    return [p.detach() for p in model.parameters()]


def shard(batch, world, r):
    return tuple(t.chunk(world)[r] for t in batch)


def train_loop(model, loader, device, step=None, read_loss=False):
    """The seed's loop: SGD, xm.optimizer_step; `read_loss`: the loss read on the host each
    step, as a loop that logs it does (a sync in the middle of the step)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for data, target in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        if read_loss:
            assert loss.item() >= 0
        (step or xm.optimizer_step)(opt)
    xm.mark_step()
    return [p.detach().cpu() for p in model.parameters()]


def _ddp_step(opt):
    opt.step()
    xm.mark_step()


def spawn_replica(index):
    """A spawned process: every collective, then training with xm.optimizer_step and with
    DistributedDataParallel, each on this replica's shard of the global batches."""
    import torch.distributed as dist
    import torch_xla.distributed.parallel_loader as pl
    import torch_xla.distributed.xla_backend  # noqa: F401  (registers 'xla')

    device = xm.xla_device()
    world, r = xr.world_size(), xr.global_ordinal()
    assert index == r == xr.local_ordinal() and world == xr.global_runtime_device_count()
    if r == 0:
        coordinator_listens_on_loopback_only()
    assert_results(collectives(device))
    expected = reference_weights()
    shards = [shard(b, world, r) for b in global_batches()]
    got = train_loop(_model().to(device), pl.MpDeviceLoader(shards, device), device)
    assert_same(got, expected, path="xm.optimizer_step", device="cpu")
    dist.init_process_group("xla", init_method="xla://")
    assert dist.get_rank() == r and dist.get_world_size() == world
    ddp = torch.nn.parallel.DistributedDataParallel(_model().to(device), gradient_as_bucket_view=True)
    got = train_loop(ddp, pl.MpDeviceLoader(shards, device), device, step=_ddp_step)
    assert_same(got, expected, path="DistributedDataParallel", device="cpu")
    t = torch.tensor([r + 1.0]).to(device)
    dist.all_reduce(t)
    assert t.cpu().item() == sum(range(1, world + 1))
    dist.destroy_process_group()
    sys.exit(0)  # a success, as torch_xla's own test scripts end their replicas


def spawn_failing(index):
    """Process 1 raises; process 0 would wait a long time in a collective."""
    if index == 1:
        raise ValueError("replica 1 fails on purpose")
    xm.all_reduce("sum", torch.ones(2).to(xm.xla_device())).cpu()


def spawn_killed(index, stamp):
    """Process 1 is killed (SIGKILL) after a first collective, writing the time to `stamp`
    first; process 0 waits in the next collective."""
    import os
    import signal
    import time
    x = torch.ones(2).to(xm.xla_device())
    xm.all_reduce("sum", x).cpu()
    if index == 1:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    xm.all_reduce("sum", x).cpu()


def spawn_stalled(index):
    """Process 1 stays alive but never joins the collective process 0 runs."""
    import time
    if index == 1:
        time.sleep(300)
    xm.all_reduce("sum", torch.ones(2).to(xm.xla_device())).cpu()


def _wait_in(op):
    """Process 0's wait on the others in `op`: all_reduce, all_gather, reduce_scatter or
    rendezvous."""
    device = xm.xla_device()
    x = torch.ones(4, device=device)
    if op == "all_reduce":
        xm.all_reduce("sum", x).cpu()
    elif op == "all_gather":
        xm.all_gather(x).cpu()
    elif op == "reduce_scatter":
        xm.reduce_scatter("sum", torch.ones(4 * xr.world_size(), device=device), 1.0, 0,
                          xr.world_size()).cpu()
    else:
        xm.rendezvous("after the early return")


def spawn_returns_early(index, op, stamp):
    """After a first collective together, the last process returns from its function (writing
    the time to `stamp` first) while the others wait for it in `op`."""
    import time
    xm.all_reduce("sum", torch.ones(2).to(xm.xla_device())).cpu()
    if index == xr.world_size() - 1:
        with open(stamp, "w") as f:
            f.write(repr(time.time()))
        return
    _wait_in(op)


def spawn_stalled_under_the_watchdog(index):
    """Process 1 stays in user code; process 0 waits for it in a collective, past the
    watchdog (set by the test's environment)."""
    import time
    xm.all_reduce("sum", torch.ones(2).to(xm.xla_device())).cpu()
    if index == 1:
        time.sleep(120)
    xm.all_reduce("sum", torch.ones(2).to(xm.xla_device())).cpu()


def coordinator_listens_on_loopback_only():
    """The coordination service's listening sockets (process 0) are all on loopback."""
    import os
    port = int(os.environ["TORCH_XLA_COORDINATOR"].rsplit(":", 1)[1])
    # 127.0.0.1, ::1, and 127.0.0.1 mapped into IPv6 (::ffff:127.0.0.1)
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    listening.append(address)
    assert listening and all(a in loopback for a in listening), (port, listening)
