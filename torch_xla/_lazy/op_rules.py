"""What some ops mean to the engine beyond their lowering, written once for both entries:
the lazy path (`engine_ops`) and the FX path (`graph_capture.fx_lowering`).

- `ALIASES`: ops whose result is their input's value (no op is recorded; a new tensor
  shares the value).
- Batch norm in evaluation (`is_eval_batch_norm`): the normalised input only, and empty
  saved statistics, as PyTorch's CPU kernels give them (its meta kernels say (C,)).
"""
import torch

aten = torch.ops.aten

ALIASES = frozenset({aten.detach.default, aten.alias.default, aten.detach_copy.default,
                     aten.alias_copy.default, aten.lift_fresh_copy.default,
                     aten.lift_fresh.default, aten.clone.default})

# batch norms that never train, and those whose argument 5 (`training`) says whether they do
_EVAL_ONLY_BATCH_NORMS = frozenset({aten._native_batch_norm_legit_no_training.default,
                                    aten._batch_norm_no_update.default})
_TRAINABLE_BATCH_NORMS = frozenset({aten.native_batch_norm.default,
                                    aten._native_batch_norm_legit_functional.default})
BATCH_NORMS = _EVAL_ONLY_BATCH_NORMS | _TRAINABLE_BATCH_NORMS


def is_eval_batch_norm(op, args, kwargs) -> bool:
    """Whether the call `op(*args, **kwargs)` is a batch norm in evaluation."""
    if op in _EVAL_ONLY_BATCH_NORMS:
        return True
    if op in _TRAINABLE_BATCH_NORMS:
        return not (args[5] if len(args) > 5 else kwargs.get("training"))
    return False
