"""torch_xla.experimental.custom_kernel: Pallas kernels and flash attention on XLA tensors.

`make_kernel_from_pallas(kernel, output_shape_dtype_fn)` turns `kernel`, a jax function
that calls `jax.experimental.pallas.pallas_call`, into a function of XLA tensors: one op of
the lazy graph (`xla_builder.call_jax`) that runs the compiled Pallas kernel where the
backend compiles Pallas (TPU, GPU) and Pallas's interpreter (`interpret=True`: the kernel
as plain XLA ops) on the CPU. `trace_pallas` gives what such a call is made of.

`flash_attention(q, k, v, causal, q_segment_ids, kv_segment_ids, sm_scale, ab=...)` is
softmax(q kᵀ · sm_scale + ab, masked) v over (batch, heads, seq, dim) tensors, with its
gradient: on TPU jax's Pallas flash-attention kernel (forward and backward kernels), on
other backends the same computation in plain XLA ops (XLA fuses it; memory grows with
q_seq × kv_seq). Queries attend only to keys of their own segment, and with `causal`
only to earlier positions. Under SPMD both are partitioned by XLA's partitioner over the
layouts the tensors have (`partition_spec`/`mesh`, when given, are laid on q, k and v).
"""
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import torch

import torch_xla.runtime as xr
from torch_xla._lazy.base import jax_compat
from torch_xla.core import xla_builder as xb


def _interpreted(kernel):
    """`kernel` with its Pallas calls run by Pallas's interpreter (the CPU has no Pallas
    compiler); as it is on backends that have one."""
    if xr.device_type() not in ("CPU",):
        return kernel

    @functools.wraps(kernel)
    def interpreted(*args, **kwargs):
        previous = jax_compat.swap_pallas_interpret_mode(True)
        try:
            return kernel(*args, **kwargs)
        finally:
            jax_compat.set_pallas_interpret_mode(previous)
    return interpreted


_runnable = {}  # kernel -> its runnable form (one per kernel: call_jax caches by identity)


def _runnable_kernel(kernel):
    found = _runnable.get(kernel)
    if found is None:
        found = _runnable[kernel] = _interpreted(kernel)
    return found


def trace_pallas(kernel: Callable, *args, static_argnums=None, static_argnames=None,
                 use_cache=False, **kwargs):
    """(the jax function that runs `kernel` on this backend with `args`' non-tensor
    arguments and `kwargs` bound, the tensor arguments): what `make_kernel_from_pallas`
    calls, as one op, with `call_jax`."""
    tensors = [a for a in args if torch.is_tensor(a)]
    slots = [None if torch.is_tensor(a) else a for a in args]
    run = _runnable_kernel(kernel)

    def payload(*arrays):
        it = iter(arrays)
        return run(*[next(it) if s is None and torch.is_tensor(a) else a
                     for s, a in zip(slots, args)], **kwargs)
    return payload, tensors


def make_kernel_from_pallas(kernel: Callable, output_shape_dtype_fn: Callable):
    """A function of XLA tensors running Pallas kernel `kernel` (see the module);
    `output_shape_dtype_fn(*args)` gives its outputs' [(shape, torch dtype)], checked."""
    run = _runnable_kernel(kernel)

    def wrapped(*args, static_argnums=None, static_argnames=None, **kwargs):
        expected = output_shape_dtype_fn(*args)
        assert isinstance(expected, list), "The output_shape_dtype_fn should return a list."
        out = xb.call_jax(run, args, kwargs, override_hash=id(run))
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        got = [(tuple(o.shape), o.dtype) for o in outs]
        if got != [(tuple(s), d) for s, d in expected]:
            raise ValueError(f"the Pallas kernel gave outputs {got}, output_shape_dtype_fn "
                             f"says {expected}")
        return outs[0] if len(outs) == 1 else tuple(outs)
    return wrapped


# ---- flash attention ------------------------------------------------------------------

def _attention_xla(q, k, v, q_seg, kv_seg, ab, causal, sm_scale):
    """Attention in plain XLA ops, in float32 (as the kernel accumulates), masked rows of
    which every key is masked give zeros."""
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) * sm_scale
    if ab is not None:
        s = s + ab.astype(jnp.float32)
    mask = None
    if q_seg is not None:
        mask = q_seg[:, None, :, None] == kv_seg[:, None, None, :]
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        lower = jnp.arange(nq)[:, None] >= jnp.arange(nk)[None, :]
        mask = lower if mask is None else mask & lower
    if mask is not None:
        s = jnp.where(mask, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    p = jnp.exp(s - m)
    denom = jnp.sum(p, axis=-1, keepdims=True)
    o = jnp.einsum("bhqk,bhkd->bhqd", p / jnp.where(denom == 0, 1.0, denom),
                   v.astype(jnp.float32))
    return o.astype(q.dtype)


def _attention_tpu(q, k, v, q_seg, kv_seg, ab, causal, sm_scale):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    segment_ids = None if q_seg is None else fa.SegmentIds(q=q_seg, kv=kv_seg)
    return fa.flash_attention(q, k, v, ab=ab, segment_ids=segment_ids, causal=causal,
                              sm_scale=sm_scale)


def _attention(q, k, v, q_seg, kv_seg, ab, *, causal, sm_scale):
    fn = _attention_tpu if xr.device_type() == "TPU" else _attention_xla
    return fn(q, k, v, q_seg, kv_seg, ab, causal, sm_scale)


def flash_attention(q, k, v, causal=False, q_segment_ids=None, kv_segment_ids=None,
                    sm_scale=1.0, *, ab=None, partition_spec=None, mesh=None):
    """Attention of q [batch, heads, q_seq, dim] over k, v [batch, heads, kv_seq, dim]
    (see the module), differentiable in q, k, v and ab."""
    if (q_segment_ids is None) != (kv_segment_ids is None):
        raise ValueError("flash_attention: give both q_segment_ids and kv_segment_ids, or "
                         "neither")
    if partition_spec is not None:
        import torch_xla.distributed.spmd as xs
        for t in (q, k, v):
            xs.mark_sharding(t, mesh or xs.get_global_mesh(), partition_spec)
    return xb.call_jax_with_grad(
        _attention, (q, k, v, q_segment_ids, kv_segment_ids, ab),
        {"causal": bool(causal), "sm_scale": float(sm_scale)})


def repeat_with_fixed_output_size(input: torch.Tensor, repeats: torch.Tensor,
                                  total_repeat_length: int) -> torch.Tensor:
    """`torch.repeat_interleave(input, repeats)` with a static output length,
    `total_repeat_length`: cut there, or continued with `input`'s last value (1-D `input`
    and `repeats`). No data-dependent shape, so the graph is not broken by a host read."""
    if input.dim() != 1 or repeats.dim() != 1:
        raise ValueError("repeat_with_fixed_output_size takes 1-D input and repeats, got "
                         f"{input.dim()}-D and {repeats.dim()}-D")
    ends = torch.cumsum(repeats, dim=0)
    positions = torch.arange(total_repeat_length, device=input.device, dtype=ends.dtype)
    source = torch.searchsorted(ends, positions, right=True).clamp(max=input.shape[0] - 1)
    return input[source]
