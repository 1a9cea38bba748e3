"""Batch norm: the empty saved statistics of evaluation, and the running statistics that
native_batch_norm updates in place in training written back."""
import torch

from ..dispatch import dispatch, engine_op, trace
from ...lowering import REGISTRY
from ..op_rules import BATCH_NORMS, is_eval_batch_norm

aten = torch.ops.aten


@engine_op(*BATCH_NORMS, with_op=True)
def _batch_norm(func, *args, **kwargs):
    """Batch norm in evaluation (`op_rules.is_eval_batch_norm`): empty saved statistics, in
    the statistics' dtypes. native_batch_norm updates the running statistics in place in
    training, though its schema does not say so (functionalization lets it through): the
    functional form runs, then the new statistics are written back."""
    if is_eval_batch_norm(func, args, kwargs):
        out = trace(func, REGISTRY[func], args, kwargs)
        empty = [dispatch(aten.new_zeros.default, (stat, [0]), {}) for stat in out[1:3]]
        return (out[0], *empty) + tuple(out[3:])
    running_mean, running_var = args[3], args[4]
    if func is not aten.native_batch_norm.default or running_mean is None or running_var is None:
        return trace(func, REGISTRY[func], args, kwargs)
    out, mean, invstd, new_mean, new_var = dispatch(
        aten._native_batch_norm_legit_functional.default, args, kwargs)
    running_mean._value, running_var._value = new_mean._value, new_var._value
    return out, mean, invstd
