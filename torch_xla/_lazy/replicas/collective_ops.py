"""Recording collectives: what `xm.all_reduce` and its kin call to put one in the graph.

A collective is a graph node whose lowering (`replicas/collective_lowering`) runs over the mesh of
every replica; the graph that holds it runs as one replicated program
(`_lazy/replicas/program`). This front checks replica groups and records the node.
"""
import torch

from .. import eager, user_code
from ..ir import In, Node, Value
from .collective_lowering import (  # noqa: F401  (the ops xm records)
    ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, COLLECTIVE_PERMUTE, REDUCE_SCATTER)
from ..tensor import to_functional, unwrap, wrap

REDUCE_TYPES = ("sum", "mul", "and", "or", "min", "max")


def normalize_groups(groups, world, equal_sizes=False):
    """`groups` as a tuple of tuples of ordinals, or None for one group of every replica."""
    if not groups:
        return None
    out = tuple(tuple(int(r) for r in g) for g in groups)
    flat = [r for g in out for r in g]
    if len(set(flat)) != len(flat) or any(not 0 <= r < world for r in flat):
        raise ValueError(f"replica groups {groups} must name distinct ordinals in [0, {world})")
    if equal_sizes and (len(flat) != world or len({len(g) for g in out}) != 1):
        raise ValueError(f"replica groups {groups} must cover all {world} replicas in groups of one size")
    return out


def apply(op, tensors, avals, **static):
    """Records `op` on `tensors` (user tensors on one XLA device); returns user tensors for its
    outputs with the given (shape, dtype) avals."""
    inner = [unwrap(t) for t in tensors]
    for t in inner:
        if t._value.data is None and t._value.node is None:
            raise t._value.failure()
    devices = {t._value.device for t in inner}
    if len(devices) != 1:
        raise RuntimeError(f"a collective takes tensors on one XLA device, got xla:{sorted(devices)}")
    template = (tuple(In(i) for i in range(len(inner))), tuple(sorted(static.items())))
    node = Node(op, template, tuple(t._value for t in inner), (), tuple(avals), user_code.user_line())
    device = devices.pop()
    outs = [wrap(Value(shape, dtype, device, node=node, index=i)) for i, (shape, dtype) in enumerate(avals)]
    if eager.enabled():
        eager.run_outputs(outs)
    # Users hold functional tensors; C++ code below functionalization (DDP's) the inner ones.
    return [to_functional(o) for o in outs] if torch._is_functional_tensor(tensors[0]) else outs


def aval(t: torch.Tensor, shape=None):
    return (tuple(t.shape) if shape is None else tuple(shape), t.dtype)
