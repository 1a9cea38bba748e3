"""Run in each of 4 spawned processes (replicas): the replica-facing API against values
worked out by hand: differentiable collectives, rendezvous of a replica list, broadcasts,
bucketized collectives, torch.distributed subgroups, saving on the master alone."""
import os

import pytest
import torch
import torch.distributed as dist

import torch_xla
import torch_xla.core.functions as xf
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from tests.compare import assert_same

WORLD = 4


def _leaf(values, device):
    return torch.tensor(values, dtype=torch.float32).to(device).requires_grad_()


def _close(t, expected):
    assert_same(t.detach(), torch.tensor(expected, dtype=torch.float32))


def differentiable_collectives(r, device):
    """Each replica's loss is (its weight) x (its result): the gradient reaching replica r
    sums what every replica's loss sends back to r's input."""
    x = _leaf([r + 1.0, 2.0], device)
    (xf.all_reduce(xm.REDUCE_SUM, x) * (r + 1)).sum().backward()
    _close(x.grad, [10.0, 10.0])  # 1 + 2 + 3 + 4

    x = _leaf([r, -r], device)
    xf.all_reduce(xm.REDUCE_MAX, x).sum().backward()
    _close(x.grad, [4.0 * (r == 3), 4.0 * (r == 0)])  # every replica's loss reads the maximum

    x = _leaf([r, r], device)
    gathered = xf.all_gather(x, dim=0)
    _close(gathered, [0, 0, 1, 1, 2, 2, 3, 3])
    (gathered * torch.arange(8.0, device=device) * (r + 1)).sum().backward()
    _close(x.grad, [20.0 * r, 20.0 * r + 10.0])

    x = _leaf(list(range(8)), device)
    shard = xf.reduce_scatter(xm.REDUCE_SUM, x, 0.5, 0, WORLD)
    _close(shard, [4.0 * r, 4.0 * r + 2.0])  # half the sum over 4 replicas of rows 2r, 2r + 1
    (shard * (r + 1)).sum().backward()
    _close(x.grad, [0.5 * (j // 2 + 1) for j in range(8)])


def rendezvous_and_broadcasts(r, device):
    assert xm.rendezvous("some", f"p{r}".encode(), replicas=[3, 1]) == [b"p3", b"p1"]
    assert xm.rendezvous("all", f"p{r}".encode()) == [b"p0", b"p1", b"p2", b"p3"]
    assert xm.rendezvous("barrier") == [b""] * 4  # empty payloads: the sizes alone exchanged
    assert xm.rendezvous("one", b"x" if r == 2 else b"") == [b"", b"", b"x", b""]
    t = torch.full((3,), float(r), device=device)
    xm.collective_broadcast([t], root_ordinal=2)
    _close(t, [2.0] * 3)
    t = torch.tensor([5.0 if r == 0 else float("nan"), r], device=device)  # NaN off the root
    xm.collective_broadcast([t], root_ordinal=0)
    _close(t, [5.0, 0.0])
    torch.manual_seed(r)
    model = torch.nn.Linear(2, 2).to(device)
    xm.broadcast_master_param(model)
    torch.manual_seed(0)
    _close(model.weight, torch.nn.Linear(2, 2).weight.tolist())


def bucketized(r, device):
    ts = [torch.full((4,), float(r * 10 + i), device=device) for i in range(3)]
    for gathered, i in zip(xm.all_gather_bucketized(ts, bucket_cap_mb=0), range(3)):
        _close(gathered, [float(k * 10 + i) for k in range(WORLD) for _ in range(4)])
    for shard, i in zip(xm.reduce_scatter_bucketized(xm.REDUCE_SUM, ts, 1.0, 0, WORLD), range(3)):
        _close(shard, [float(60 + 4 * i)])


def subgroups(r, device):
    dist.init_process_group("xla", init_method="xla://")
    first, second = dist.new_group([0, 1]), dist.new_group([2, 3])
    mine = first if r < 2 else second
    t = torch.tensor([r + 1.0], device=device)
    dist.all_reduce(t, group=mine)
    _close(t, [3.0] if r < 2 else [7.0])
    out = [torch.zeros(1, device=device) for _ in range(2)]
    dist.all_gather(out, torch.tensor([float(r)], device=device), group=mine)
    assert [o.item() for o in out] == ([0.0, 1.0] if r < 2 else [2.0, 3.0])
    t = torch.tensor([float(r)], device=device)
    dist.broadcast(t, src=1 if r < 2 else 3, group=mine)
    assert t.item() == (1.0 if r < 2 else 3.0)
    dist.barrier(group=mine)
    t = torch.tensor([1.0], device=device)
    dist.all_reduce(t)  # the world group still spans every replica
    assert t.item() == 4.0
    # reduce_scatter joins its input list along dim 0: one tensor per rank, or one for all
    out = torch.zeros(2, device=device)
    dist.reduce_scatter(out, [torch.full((2,), float(k + r), device=device) for k in range(WORLD)])
    assert out.tolist() == [4.0 * r + 6] * 2  # the sum over ranks q of r + q
    dist.reduce_scatter(out, [torch.arange(2.0 * WORLD, device=device) + r])
    assert out.tolist() == [4.0 * j + 6 for j in (2 * r, 2 * r + 1)]
    scalars = [torch.tensor(float(k), device=device) for k in range(WORLD)]
    one = torch.zeros((), device=device)
    dist.reduce_scatter(one, scalars)
    assert one.item() == 4.0 * r
    outs = [[torch.zeros(n, device=device) for _ in range(WORLD)] for n in (1, 2)]
    dist.group.WORLD.allgather_coalesced(outs, [torch.full((n,), float(r), device=device)
                                                for n in (1, 2)]).wait()
    assert [o.tolist() for o in outs[1]] == [[float(k)] * 2 for k in range(WORLD)]
    strided = dist.new_group([r % 2, r % 2 + 2], pg_options={"xla_pg_options": {"spmd": True}})
    assert strided._mesh == [[0, 2], [1, 3]]
    t = torch.tensor([float(r)], device=device)
    dist.all_reduce(t, group=strided)  # one group made alone: its inferred partition runs
    assert t.item() == (2.0 if r % 2 == 0 else 4.0)
    alone = [dist.new_group([k]) for k in range(WORLD)][r]
    t = torch.tensor([5.0], device=device)
    dist.all_reduce(t, group=alone)
    assert t.item() == 5.0
    uneven = dist.new_group([0, 1, 2])
    if r < 3:
        with pytest.raises(NotImplementedError, match="must cover every rank"):
            dist.all_reduce(torch.ones(1, device=device), group=uneven)


def save_on_the_master(r, device, path):
    w = torch.full((2,), 7.0, device=device)
    if xm.is_master_ordinal():
        xm.save({"w": w}, path)
    xm.rendezvous("saved")
    assert torch.load(path)["w"].tolist() == [7.0, 7.0]


def replica(index, path):
    device = torch_xla.device()
    r = xr.global_ordinal()
    assert (r, xr.world_size()) == (index, WORLD)
    differentiable_collectives(r, device)
    rendezvous_and_broadcasts(r, device)
    bucketized(r, device)
    subgroups(r, device)
    save_on_the_master(r, device, os.path.join(path, "saved.pt"))
