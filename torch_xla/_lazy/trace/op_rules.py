"""What some ops mean to the engine beyond their lowering, written once for both entries:
the lazy path (`engine_ops`) and the FX path (`graph_capture.fx_lowering`).

- `ALIASES`: ops whose result is their input's value (no op is recorded; a new tensor
  shares the value).
- Batch norm in evaluation (`is_eval_batch_norm`): the normalised input only, and empty
  saved statistics, as PyTorch's CPU kernels give them (its meta kernels say (C,)).
- Ops of other libraries with a kernel for XLA tensors (`has_own_kernel`): that kernel runs
  (`run_own_kernel`) instead of the CPU fallback; the FX path traces it (`trace_own_kernel`)
  with the tracer of torch functions the engine's top gives (`set_kernel_tracer`:
  `traced.trace`, which runs through the dispatch entry, a stage above the FX path).
- `SET_BUFFER_DONOR` (`torch.ops.xla.dynamo_set_buffer_donor_(t, should_donate)`, torch_xla's
  op for code `torch.compile` captures): marks `t`'s buffer for donation
  (`_XLAC._set_buffer_donation`) and returns `t`; a no-op on tensors of other devices. On
  the lazy path it marks the buffer at once (`engine_ops.aliases`); in a compiled graph,
  the graph's input at every call (`graph_capture.compiled`).
"""
import torch

aten = torch.ops.aten

_lib = torch.library.Library("xla", "FRAGMENT")
_lib.define("dynamo_set_buffer_donor_(Tensor t, bool should_donoate) -> Tensor")
_lib.impl("dynamo_set_buffer_donor_", lambda t, should_donate: t, "CompositeExplicitAutograd")
SET_BUFFER_DONOR = torch.ops.xla.dynamo_set_buffer_donor_.default

# Ops that give their first argument a sharding (mark_sharding as torch.compile captures it):
# op -> the jax sharding its other arguments name (the public SPMD module registers them).
SHARDING_ANNOTATIONS = {}

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


_TORCH_NAMESPACES = frozenset({"aten", "prims", "quantized", "_quantized", "rngprims"})


def has_own_kernel(op) -> bool:
    """Whether `op`, an operator of a library outside PyTorch's own, brings a kernel for XLA
    tensors: one registered for the XLA key, or a CompositeExplicitAutograd one (a
    `torch.library.custom_op`'s implementation), which then runs on the XLA tensors."""
    if op.namespace in _TORCH_NAMESPACES:
        return False
    return any(op.has_kernel_for_dispatch_key(key) for key in (
        torch._C.DispatchKey.XLA, torch._C.DispatchKey.CompositeExplicitAutograd))


def run_own_kernel(op, args, kwargs):
    """`op`'s own kernel for XLA tensors, below the engine's dispatch: its ops are traced
    as any others."""
    return op.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.XLA), *args, **kwargs)


_kernel_tracer = [None]


def set_kernel_tracer(trace) -> None:
    _kernel_tracer[0] = trace


def trace_own_kernel(fn, examples, name):
    """`fn` (calling an op with its own kernel) traced on XLA tensors `examples`."""
    return _kernel_tracer[0](fn, examples, name=name)
