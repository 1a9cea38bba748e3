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


class ProcessGroupXla(dist.ProcessGroup):
    """A process group of all replicas, over XLA's collectives (inside the compiled graph)."""

    def __init__(self, rank, size):
        super().__init__(rank, size)

    def getBackendName(self):
        return "xla"

    def allreduce(self, tensors, opts=c10d.AllreduceOptions()):
        op, scale = _reduce(opts, self.size())
        xm.all_reduce(op, tensors, scale=scale)
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts=c10d.AllreduceCoalescedOptions()):
        return self.allreduce(tensors, opts)

    def allgather(self, output_tensors, input_tensors, opts=c10d.AllgatherOptions()):
        for outputs, t in zip(output_tensors, input_tensors):
            gathered = xm.all_gather(t.unsqueeze(0), dim=0)
            with torch.no_grad():
                for k, out in enumerate(outputs):
                    out.copy_(gathered[k])
        return _done(output_tensors)

    def _allgather_base(self, output, input, opts=c10d.AllgatherOptions()):
        with torch.no_grad():
            output.copy_(xm.all_gather(input, dim=0).view(output.shape))
        return _done([output])

    def broadcast(self, tensors, opts=c10d.BroadcastOptions()):
        # Every replica must run the same graph: the root's values, zeros elsewhere, summed.
        mine = torch.tensor(self.rank() == opts.rootRank)
        with torch.no_grad():
            sent = [torch.where(mine, t, torch.zeros((), dtype=t.dtype)) for t in tensors]
            xm.all_reduce("sum", sent)
            for t, s in zip(tensors, sent):
                t.copy_(s)
        return _done(tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=c10d.ReduceScatterOptions()):
        op, scale = _reduce(opts, self.size())
        for out, inputs in zip(output_tensors, input_tensors):
            stacked = torch.cat([t.unsqueeze(0) for t in inputs])
            with torch.no_grad():
                out.copy_(xm.reduce_scatter(op, stacked, scale, 0, self.size())[0])
        return _done(output_tensors)

    def _reduce_scatter_base(self, output, input, opts=c10d.ReduceScatterOptions()):
        op, scale = _reduce(opts, self.size())
        with torch.no_grad():
            output.copy_(xm.reduce_scatter(op, input, scale, 0, self.size()).view(output.shape))
        return _done([output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,
                      opts=c10d.AllToAllOptions()):
        if output_split_sizes or input_split_sizes:
            raise NotImplementedError("the xla backend's all_to_all takes equal splits only")
        with torch.no_grad():
            output.copy_(xm.all_to_all(input, 0, 0, self.size()))
        return _done([output])

    def barrier(self, opts=c10d.BarrierOptions()):
        xm.rendezvous("barrier")
        return _done([])


def _create(store, rank, size, timeout):
    return ProcessGroupXla(rank, size)


def _rendezvous(url, timeout=None, **kwargs):
    yield dist.HashStore(), xr.global_ordinal(), xr.world_size()


dist.Backend.register_backend("xla", _create, devices=["xla"])
dist.register_rendezvous_handler("xla", _rendezvous)
