"""torch.distributed backend 'xla' and init method 'xla://'.

`dist.init_process_group('xla', init_method='xla://')` in each replica (a process of
xmp.spawn) makes a process group whose collectives are the in-graph collectives of
xla_model, so `dist.all_reduce(t)` and DistributedDataParallel work on XLA tensors. Rank and
world size are the replica's ordinal and the world size. The store handed to torch is a
process-local HashStore: the backend itself never needs one.
"""
import torch
import torch.distributed as dist
import torch._C._distributed_c10d as c10d
from torch._C._distributed_c10d import _create_work_from_future
from torch.futures import Future

import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from torch_xla._lazy.runtime import pjrt as _pjrt

_REDUCE = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "mul", dist.ReduceOp.MIN: "min",
           dist.ReduceOp.MAX: "max", dist.ReduceOp.BAND: "and", dist.ReduceOp.BOR: "or"}


def _done(result):
    future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _reduce(opts, size):
    """(reduce type, scale) of a ReduceOp."""
    kind = opts.reduceOp.op  # the RedOpType
    if kind == dist.ReduceOp.AVG:
        return "sum", 1.0 / size
    op = _REDUCE.get(kind)
    if op is None:
        raise NotImplementedError(f"the xla backend does not support {opts.reduceOp}")
    return op, 1.0


# Groups made by torch.distributed.new_group, as rank tuples, in the order made (every rank
# makes every group, members or not), each with the index of its family: consecutive groups
# that are disjoint, which together may cover all ranks.
_made = []


def _record_group(ranks, world) -> None:
    ranks = tuple(sorted(int(r) for r in ranks))
    if _made:
        last, family = _made[-1]
        members = {r for g, f in _made if f == family for r in g}
        if len(members) < world and not members & set(ranks):
            _made.append((ranks, family))
            return
        _made.append((ranks, family + 1))
    else:
        _made.append((ranks, 0))


def _partition(ranks, world):
    """The groups of `ranks`' family if they cover every rank (a partition all replicas
    can run one program over), else None."""
    family = next((f for g, f in reversed(_made) if g == tuple(ranks)), None)
    groups = [list(g) for g, f in _made if f == family]
    covered = sorted(r for g in groups for r in g)
    return groups if covered == list(range(world)) else None


class ProcessGroupXla(dist.ProcessGroup):
    """A process group over XLA's collectives (inside the compiled graph): of all replicas,
    or (from `torch.distributed.new_group(ranks)`) of some.

    A collective is one program of every replica. A group smaller than the world therefore
    runs its collectives over the partition made of it and the groups created with it
    (`new_group([0, 1])`, `new_group([2, 3])`, or `new_subgroups`): each rank calls its own
    group's collective at the same time, and each group reduces among its members only. A
    group whose family covers not every rank raises at its first collective; a group of
    one rank needs no other replica (its collectives are local).
    """

    def __init__(self, rank, size):
        super().__init__(rank, size)
        self._ranks = None  # global ordinals of the members, for a group made by new_group
        # The replica groups of this group's collectives, where new_group knew them (the
        # whole world, a partition given or inferred, one group per rank): torch_xla's `_mesh`.
        self._mesh = None

    def getBackendName(self):
        return "xla"

    def _local(self) -> bool:
        return self._ranks is not None and len(self._ranks) == 1

    def _groups(self):
        """The replica groups of this group's collectives (None: all replicas)."""
        world = xr.world_size()
        if self._ranks is None or list(self._ranks) == list(range(world)):
            return None
        groups = self._mesh if self._mesh and len(self._mesh) > 1 else _partition(self._ranks, world)
        if groups is None:
            raise NotImplementedError(
                f"a collective on the process group of ranks {list(self._ranks)}: every collective "
                f"is one XLA program of all {world} replicas, so the groups created together with "
                f"this one must cover every rank (e.g. new_group([0, 1]) and new_group([2, 3]), or "
                f"torch.distributed.new_subgroups), each rank calling its own group's collective")
        return groups

    def allreduce(self, tensors, opts=c10d.AllreduceOptions()):
        op, scale = _reduce(opts, self.size())
        if not self._local():
            xm.all_reduce(op, tensors, scale=scale, groups=self._groups())
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=c10d.AllreduceCoalescedOptions()):
        return self.allreduce(tensors, opts)

    def _gather(self, t, dim=0):
        return t if self._local() else xm.all_gather(t, dim=dim, groups=self._groups())

    def allgather(self, output_tensors, input_tensors, opts=c10d.AllgatherOptions()):
        if len(output_tensors) != len(input_tensors):
            raise RuntimeError("ProcessGroupXla::allgather: requires input/output tensor lists "
                               "to have the same length")
        for i, outputs in enumerate(output_tensors):
            if len(outputs) != self.size():
                raise RuntimeError(f"ProcessGroupXla::allgather: invalid output tensor list at index "
                                   f"{i} (expected length {self.size()}, got {len(outputs)})")
        for outputs, t in zip(output_tensors, input_tensors):
            gathered = self._gather(t.unsqueeze(0))
            with torch.no_grad():
                for out, block in zip(outputs, gathered.unbind(0)):
                    out.copy_(block)
        return _done(output_tensors)

    def allgather_coalesced(self, output_lists, input_tensors, opts=c10d.AllgatherOptions()):
        """allgather of each input into its list of outputs, in one graph."""
        return self.allgather(output_lists, input_tensors, opts)

    def _allgather_base(self, output, input, opts=c10d.AllgatherOptions()):
        with torch.no_grad():
            output.copy_(self._gather(input).view(output.shape))
        return _done([output])

    def broadcast(self, tensors, opts=c10d.BroadcastOptions()):
        if self._local():
            return _done(tensors)
        # Every replica must run the same graph: the root's values, zeros elsewhere, summed.
        mine = torch.tensor(self.rank() == opts.rootRank)
        with torch.no_grad():
            sent = [torch.where(mine, t, torch.zeros((), dtype=t.dtype)) for t in tensors]
            xm.all_reduce("sum", sent, groups=self._groups())
            for t, s in zip(tensors, sent):
                t.copy_(s)
        return _done(tensors)

    def _scatter(self, op, scale, input):
        if self._local():
            return input * scale if scale != 1.0 else input
        return xm.reduce_scatter(op, input, scale, 0, self.size(), groups=self._groups())

    def reduce_scatter(self, output_tensors, input_tensors, opts=c10d.ReduceScatterOptions()):
        """Each output is its rank's shard of the reduced inputs joined along dim 0, as
        torch_xla's backend joins them: a list of one tensor per rank, or one tensor holding
        them all."""
        op, scale = _reduce(opts, self.size())
        for out, inputs in zip(output_tensors, input_tensors):
            for i, t in enumerate(inputs[1:], 1):
                if t.shape != inputs[0].shape:
                    raise ValueError(f"Input tensor at index {i} has shape {list(t.shape)}, but "
                                     f"expected {list(inputs[0].shape)}")
            joined = torch.cat(inputs) if inputs[0].dim() else torch.stack(inputs)
            with torch.no_grad():
                out.copy_(self._scatter(op, scale, joined).view(out.shape))
        return _done(output_tensors)

    def _reduce_scatter_base(self, output, input, opts=c10d.ReduceScatterOptions()):
        op, scale = _reduce(opts, self.size())
        with torch.no_grad():
            output.copy_(self._scatter(op, scale, input).view(output.shape))
        return _done([output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,
                      opts=c10d.AllToAllOptions()):
        if output_split_sizes or input_split_sizes:
            raise NotImplementedError("the xla backend's all_to_all takes equal splits only")
        with torch.no_grad():
            output.copy_(input if self._local() else
                         xm.all_to_all(input, 0, 0, self.size(), groups=self._groups()))
        return _done([output])

    def recv_anysource(self, *args):
        raise NotImplementedError("the xla backend has no point-to-point receive from any "
                                  "source: XLA programs send and receive between fixed pairs")

    def monitored_barrier(self, *args):
        raise NotImplementedError("the xla backend has no monitored_barrier: use barrier(), "
                                  "every replica's program waits for the others")

    def barrier(self, opts=c10d.BarrierOptions()):
        if self._ranks is None:
            xm.rendezvous("barrier")
        elif not self._local():  # the members' collective: it returns when they all reached it
            xm.all_reduce("sum", torch.zeros(1, device=xm.xla_device()), groups=self._groups()).cpu()
        return _done([])


def _create(prefix_store, rank, size, timeout):
    if _pjrt.is_spmd():  # torch_xla's check, and its error type
        raise AssertionError("the xla torch.distributed backend is not supported under SPMD: "
                             "XLA's partitioner inserts the collectives a sharded program needs")
    return ProcessGroupXla(rank, size)


def _inferred_mesh(ranks, world):
    """The partition of all ranks into groups shaped as `ranks`: consecutive blocks
    ([4, 5, 6, 7] of 12: [[0..3], [4..7], [8..11]]) or strided ones ([1, 5, 9] of 12:
    [[0, 4, 8], [1, 5, 9], ...]). ValueError if `ranks` is neither."""
    k = len(ranks)
    if world % k == 0:
        if ranks == list(range(ranks[0], ranks[0] + k)) and ranks[0] % k == 0:
            return [list(range(j, j + k)) for j in range(0, world, k)]
        stride = world // k
        if ranks[0] < stride and ranks == list(range(ranks[0], world, stride)):
            return [list(range(j, world, stride)) for j in range(stride)]
    raise ValueError(f"ranks {ranks} are neither a block nor a stride of the {world} ranks: "
                     f"no partition of the world into groups like them")


def _mesh(ranks, world, options):
    """torch_xla's `_mesh` of a group of `ranks` (sorted): `pg_options={'xla_pg_options':
    {'mesh': ...}}` as given, `{'spmd': True}` inferred (`_inferred_mesh`), else the group
    alone (its collectives then take the family of groups made with it)."""
    xla = (options or {}).get("xla_pg_options", {}) if isinstance(options, dict) else {}
    if ranks == list(range(world)):
        return [ranks]
    if len(ranks) == 1:
        if not 0 <= ranks[0] < world:
            raise ValueError(f"rank {ranks[0]} is out of range for a world of {world}")
        return [[r] for r in range(world)]
    if xla.get("mesh"):
        return [list(g) for g in xla["mesh"]]
    if xla.get("spmd"):
        return _inferred_mesh(ranks, world)
    return [ranks]


_original_new_group = dist.new_group


def new_group(ranks=None, *args, **kwargs):
    """torch.distributed.new_group, telling an 'xla' group which replicas it holds."""
    options = kwargs.get("pg_options", args[2] if len(args) > 2 else None)
    if ranks is not None and dist.get_backend() == "xla":
        members = sorted(int(r) for r in ranks)
        mesh = _mesh(members, dist.get_world_size(), options)  # a ValueError before any group
    group = _original_new_group(ranks, *args, **kwargs)
    if ranks is not None and dist.get_backend() == "xla":
        _record_group(members, dist.get_world_size())
        if isinstance(group, ProcessGroupXla):
            group._ranks, group._mesh = tuple(members), mesh
    return group


def _rendezvous(url, timeout=None, **kwargs):
    yield dist.HashStore(), xr.global_ordinal(), xr.world_size()


dist.Backend.register_backend("xla", _create, devices=["xla"])
dist.register_rendezvous_handler("xla", _rendezvous)
new_group.__wrapped__ = _original_new_group
dist.new_group = dist.distributed_c10d.new_group = new_group
