"""The 'xla' torch.distributed backend's process group, in this process: how new_group's
groups become replica groups (`_mesh`), torch_xla's creator arguments, the ops it refuses.
Collectives across replicas are checked on 4 processes in test_replicas_api.py."""
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from torch_xla.distributed import xla_backend

SPMD = {"xla_pg_options": {"spmd": True}}


def test_the_creator_takes_torch_xla_keywords():
    pg = dist.Backend._plugins["XLA"].creator_fn(prefix_store=None, rank=0, size=1,
                                                 timeout=timedelta(minutes=1))
    assert isinstance(pg, xla_backend.ProcessGroupXla)
    assert (pg.rank(), pg.size(), pg.getBackendName()) == (0, 1, "xla")


@pytest.mark.parametrize("ranks,mesh", [
    ([4, 5, 6, 7], [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]),
    ([1, 5, 9], [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]),
    ([5], [[r] for r in range(12)]),
    (list(range(12)), [list(range(12))]),
])
def test_a_group_made_with_spmd_infers_its_partition(ranks, mesh):
    assert xla_backend._mesh(ranks, 12, SPMD) == mesh


@pytest.mark.parametrize("ranks", [[4, 5, 6], [7, 8, 9, 10], [1, 5], [4, 7, 10], [1, 5, 10]])
def test_ranks_that_are_no_block_or_stride_are_refused(ranks):
    with pytest.raises(ValueError, match="neither a block nor a stride"):
        xla_backend._mesh(ranks, 12, SPMD)


def test_a_mesh_given_is_taken_and_without_options_the_group_is_alone():
    given = {"xla_pg_options": {"mesh": [[0, 2], [1, 3]]}}
    assert xla_backend._mesh([0, 2], 4, given) == [[0, 2], [1, 3]]
    assert xla_backend._mesh([0, 2], 4, None) == [[0, 2]]


@pytest.mark.parametrize("op", ["recv_anysource", "monitored_barrier"])
def test_ops_xla_programs_cannot_do_raise_not_implemented(op):
    with pytest.raises(NotImplementedError):
        getattr(xla_backend.ProcessGroupXla(0, 1), op)()


def test_allgather_takes_one_output_per_rank_of_the_group(dev):
    pg = xla_backend.ProcessGroupXla(0, 1)
    t = torch.arange(3, device=dev)
    outs = [torch.zeros(3, dtype=torch.int64, device=dev)]
    pg.allgather([outs], [t]).wait()
    assert outs[0].tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match=r"invalid output tensor list at index 0 \(expected length 1, got 2\)"):
        pg.allgather([[torch.zeros_like(t), torch.zeros_like(t)]], [t])
    with pytest.raises(RuntimeError, match="same length"):
        pg.allgather([outs, outs], [t])
