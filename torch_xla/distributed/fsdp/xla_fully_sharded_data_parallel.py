"""FSDP over the replicas (FSDPv1): `XlaFullyShardedDataParallel`.

Each replica (an `xmp.spawn` process or a DataParallel thread) keeps a 1/world_size shard of
every parameter of the wrapped module; those shards are the module's only parameters (the
optimizer sees them alone). A forward all_gathers the shards into full parameters and puts
them where the module looks for its parameters; the backward reduce_scatters the full
gradients into the shards' gradients (the mean over the replicas, as data parallelism on
the whole batch gives). Gather and scatter are one autograd function, so a module called
twice, checkpointed or sharing a parameter gets its gradient as autograd sums it. A step
stays one graph: the collectives are nodes of it, run by every replica in one program.

With `reshard_after_forward`, the full parameters autograd keeps for the backward are
gathered again there (behind an optimization barrier, so XLA does not merge the two
gathers) instead of being kept from the forward: XLA may free them between. The root
module keeps them (`disable_reshard_on_root`), since its backward comes first.
"""
import contextlib
import types
from enum import Enum, auto
from typing import Any, Callable, List, Optional

import torch
import torch.nn as nn

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from torch_xla.distributed.spmd.einsum_linear import xla_patched_nn_linear_forward
from torch_xla.utils.checkpoint import chkpt_status

from ._shards import Collectives, ShardLayout, grad_norm
from ._wrapper import ForwardsToWrapped, check_wrappable
from .wrap import recursive_wrap
from .xla_flatten_params_wrapper import XlaFlattenParamsWrapper

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class TrainingState(Enum):
    IDLE = auto()
    FORWARD = auto()
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


def collect_tensors(data) -> List[torch.Tensor]:
    """The XLA tensors in nested lists, tuples, dicts and dataclass-like outputs, once each.
    (A loop, not a recursive closure: that would be a reference cycle holding the tensors
    until the cyclic collector ran.)"""
    out, seen, stack = [], set(), [data]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            if x.device.type == "xla" and id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
    return out


def _cast_floats(dtype, data):
    if isinstance(data, torch.Tensor):
        return data.to(dtype) if torch.is_floating_point(data) and data.dtype != dtype else data
    if isinstance(data, dict):
        return type(data)((k, _cast_floats(dtype, v)) for k, v in data.items())
    if isinstance(data, (list, tuple)) and not hasattr(data, "_fields"):
        return type(data)(_cast_floats(dtype, v) for v in data)
    return data


def _patch_linears(module: nn.Module) -> nn.Module:
    """Every plain `nn.Linear` under `module` computes with `XLAPatchedLinear` (in place, the
    module and its parameters kept): its backward then keeps the weight itself rather than
    its transpose, which the resharding can gather again."""
    for m in module.modules():
        if type(m).forward is nn.Linear.forward and "forward" not in m.__dict__:
            m.forward = types.MethodType(xla_patched_nn_linear_forward, m)
    return module


def _materialize(module: nn.Module, param_init_fn, wrapper_cls) -> None:
    """A module built on the meta device gets its parameters: `param_init_fn(module)`, or
    storage on the CPU and each submodule's `reset_parameters()`."""
    if not any(t.is_meta for t in list(module.parameters()) + list(module.buffers())):
        return
    if param_init_fn is not None:
        param_init_fn(module)
        return
    module.to_empty(device="cpu")
    with torch.no_grad():
        for m in module.modules():
            if not isinstance(m, wrapper_cls) and callable(getattr(m, "reset_parameters", None)):
                m.reset_parameters()


class _GatherFull(torch.autograd.Function):
    """Shards in, full parameters out; full gradients in, shard gradients out."""

    @staticmethod
    def forward(ctx, fsdp, indices, *shards):
        ctx.fsdp, ctx.indices = fsdp, indices
        return tuple(fsdp._gather(indices, shards))

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(ctx.fsdp._reduce_grads(ctx.indices, grads))


class XlaFullyShardedDataParallel(ForwardsToWrapped, nn.Module):
    """Shards `module`'s parameters over the replicas (torch_xla's FSDPv1 signature).

    Make the optimizer after wrapping, from the wrapper's `parameters()`, and call
    `optimizer.step()` (not `xm.optimizer_step`, which would average the shards' gradients
    again). Save `model.state_dict()` and `model.get_shard_metadata()` from every replica;
    `consolidate_sharded_model_checkpoints` builds the unwrapped module's state dict.
    `flatten_parameters=True` is not supported (each parameter is sharded on its own).
    """
    wrapped_attribute = "_fsdp_wrapped_module"

    def __init__(self, module: nn.Module, reshard_after_forward: bool = True,
                 flatten_parameters: bool = False, execute_sharding_on_init: bool = True,
                 optimization_barrier_in_forward: bool = True, optimization_barrier_in_backward: bool = True,
                 sync_on_finalization: bool = False, disable_reshard_on_root: bool = True,
                 compute_dtype: Optional[torch.dtype] = None, buffer_dtype: Optional[torch.dtype] = None,
                 fp32_reduce_scatter: bool = False, sharding_groups: Optional[List[List[int]]] = None,
                 sharding_rank: Optional[int] = None, sharding_world_size: Optional[int] = None,
                 shard_param_on_dim_0: bool = False, pin_layout_in_collective_ops: bool = True,
                 reduce_scatter_bucket_size_mb: Optional[int] = 0, coalesce_all_gather_ops: bool = False,
                 auto_wrap_policy: Optional[Callable] = None, auto_wrapper_callable: Optional[Callable] = None,
                 param_init_fn: Optional[Callable[[nn.Module], None]] = None, _shard_size_multiple: int = 128,
                 _use_xla_patched_linear: bool = True, **_debug_options: Any):
        check_wrappable(module, XlaFullyShardedDataParallel,
                        "The module wrapped by FSDP *must define a `forward` method and call it during "
                        "the module's forward pass for FSDP to work correctly.* Hence, do not wrap "
                        "`nn.ModuleList` or `nn.ModuleDict` with FSDP.")
        if flatten_parameters:
            raise NotImplementedError("XlaFullyShardedDataParallel(flatten_parameters=True) is not supported "
                                      "here: each parameter is sharded on its own (flatten_parameters=False)")
        unknown = set(_debug_options) - {"_debug_dummy_forward_pass", "_debug_msg", "_debug_print",
                                         "_debug_dummy_all_gather_op", "_debug_dummy_all_reduce_op",
                                         "_debug_dummy_reduce_scatter_op", "_debug_dummy_optimization_barrier_op"}
        if unknown:
            raise TypeError(f"XlaFullyShardedDataParallel got unexpected keyword arguments {sorted(unknown)}")
        for name, dtype in (("compute_dtype", compute_dtype), ("buffer_dtype", buffer_dtype)):
            if dtype is not None and dtype not in FLOAT_DTYPES:
                raise ValueError(f"{name} must be one of {FLOAT_DTYPES}, not {dtype}")
        if sharding_groups is not None and (sharding_rank is None or sharding_world_size is None):
            raise ValueError("sharding_rank and sharding_world_size must be provided when sharding_groups is "
                             "specified")
        super().__init__()
        wrapper_cls = auto_wrapper_callable or XlaFullyShardedDataParallel
        if auto_wrap_policy is not None:
            for name, m in module.named_modules():
                if isinstance(m, XlaFullyShardedDataParallel):
                    raise ValueError(f"Expected {name} to NOT be FullyShardedDataParallel if using an "
                                     "`auto_wrap_policy`")
            inner = dict(reshard_after_forward=reshard_after_forward,
                         execute_sharding_on_init=execute_sharding_on_init,
                         optimization_barrier_in_forward=optimization_barrier_in_forward,
                         optimization_barrier_in_backward=optimization_barrier_in_backward,
                         sync_on_finalization=sync_on_finalization, disable_reshard_on_root=disable_reshard_on_root,
                         compute_dtype=compute_dtype, buffer_dtype=buffer_dtype,
                         fp32_reduce_scatter=fp32_reduce_scatter, sharding_groups=sharding_groups,
                         sharding_rank=sharding_rank, sharding_world_size=sharding_world_size,
                         shard_param_on_dim_0=shard_param_on_dim_0,
                         pin_layout_in_collective_ops=pin_layout_in_collective_ops,
                         reduce_scatter_bucket_size_mb=reduce_scatter_bucket_size_mb,
                         param_init_fn=param_init_fn, _shard_size_multiple=_shard_size_multiple,
                         _use_xla_patched_linear=_use_xla_patched_linear)
            recursive_wrap(module, auto_wrap_policy, wrapper_cls, ignored_modules=set(), ignored_params=set(),
                           only_wrap_children=True, **inner)

        self.reshard_after_forward = self._orig_reshard_after_forward = reshard_after_forward
        self.disable_reshard_on_root = disable_reshard_on_root
        self.flatten_parameters = False
        self.optimization_barrier_in_forward = optimization_barrier_in_forward
        self.optimization_barrier_in_backward = optimization_barrier_in_backward
        self.sync_on_finalization = sync_on_finalization
        self.compute_dtype = compute_dtype or torch.float32
        self.buffer_dtype = buffer_dtype or self.compute_dtype
        self.fp32_reduce_scatter = fp32_reduce_scatter
        self.sharding_groups = sharding_groups
        if sharding_groups is None:
            self.rank, self.world_size = xr.global_ordinal(), xr.world_size()
        else:
            self.rank, self.world_size = sharding_rank, sharding_world_size
        self._shard_param_on_dim_0 = shard_param_on_dim_0
        self._shard_size_multiple = 1 if shard_param_on_dim_0 else _shard_size_multiple
        self.pin_layout_in_collective_ops = pin_layout_in_collective_ops
        self._collectives = Collectives(self.world_size, sharding_groups, pin_layout_in_collective_ops,
                                        reduce_scatter_bucket_size_mb or 0)
        self.gradient_predivide_factor = self._get_gradient_predivide_factor(self.world_size)
        self.gradient_postdivide_factor = self.world_size / self.gradient_predivide_factor
        self.xla_device = torch_xla.device()

        _materialize(module, param_init_fn, wrapper_cls)
        if _use_xla_patched_linear:
            _patch_linears(module)
        self._fsdp_wrapped_module = XlaFlattenParamsWrapper(module)
        self._shard_parameters_()
        self._cast_buffers()

        self._is_root: Optional[bool] = None
        object.__setattr__(self, "_root", None)  # the root instance, once known
        self._require_backward_grad_sync = True
        self._unsynced_grads = {}  # shard index -> full gradient accumulated under no_sync()
        self._finalize_queued = False
        self.training_state = TrainingState.IDLE
        self.has_full_params = False
        if execute_sharding_on_init:
            torch_xla.sync()

    # ---- the shards ------------------------------------------------------------------

    @torch.no_grad()
    def _shard_parameters_(self) -> None:
        """Replaces each parameter of the wrapped module that no inner FSDP holds by this
        replica's shard of it, registered on this wrapper; the module keeps a placeholder
        where the parameter was (the full parameter during forward and backward)."""
        seen = {}  # parameter -> index into self.sharded_params
        self._destinations = []  # per shard: the (module, name) places of the full parameter
        self._layouts = []
        self.sharded_params = []
        for module_name, m in self.named_modules():
            if m is not self and isinstance(m, XlaFullyShardedDataParallel):
                continue
            for n, p in list(m.named_parameters(recurse=False)):
                if getattr(p, "_is_sharded", False):
                    continue
                if p in seen:
                    self._destinations[seen[p]].append((m, n))
                    continue
                if p.dtype != torch.float32:
                    raise TypeError(f"only fp32 parameters are supported, got {p.dtype} for {module_name}.{n}")
                layout = ShardLayout(p.shape, self.world_size, self._shard_size_multiple,
                                     self._shard_param_on_dim_0)
                shard = nn.Parameter(layout.shard(p.detach().to(self.xla_device), self.rank),
                                     requires_grad=p.requires_grad)
                shard._is_sharded = True
                shard._orig_size = p.size()
                shard._orig_name = f"{module_name}.{n}"
                shard._name = f"_fsdp_shard.{shard._orig_name}".replace(".", "_FSDP_SHARD_SEPARATOR_")
                seen[p] = len(self.sharded_params)
                self.sharded_params.append(shard)
                self._layouts.append(layout)
                self._destinations.append([(m, n)])
        for shard in self.sharded_params:
            self.register_parameter(shard._name, shard)
        for places in self._destinations:
            for m, n in places:
                del m._parameters[n]
        self._placeholder = torch.zeros(1, dtype=self.compute_dtype, device=self.xla_device)
        # Computed now: the slices depend on the rank, the replicas' common step must not.
        xm.unlazy(self.sharded_params + [self._placeholder])
        self._install(None)

    def _install(self, fulls) -> None:
        """Puts the full parameters (or, with None, the placeholder) where the module reads
        its parameters."""
        for i, places in enumerate(self._destinations):
            for m, n in places:
                object.__setattr__(m, n, self._placeholder if fulls is None else fulls[i])
        self.has_full_params = fulls is not None

    @torch.no_grad()
    def _cast_buffers(self) -> None:
        """Floating buffers to `buffer_dtype` (the original dtype noted for the checkpoint),
        every buffer onto the device; inner FSDP instances cast their own."""
        for m in self._fsdp_wrapped_module.modules():
            if isinstance(m, XlaFullyShardedDataParallel):
                continue
            for name, buf in list(m._buffers.items()):
                if buf is None:
                    continue
                orig = buf.dtype
                if torch.is_floating_point(buf) and orig != self.buffer_dtype:
                    buf = buf.to(self.buffer_dtype)
                    buf._orig_dtype = orig
                if buf.device != self.xla_device:
                    moved = buf.to(self.xla_device)
                    if hasattr(buf, "_orig_dtype"):
                        moved._orig_dtype = buf._orig_dtype
                    buf = moved
                m._buffers[name] = buf

    def _gather(self, indices, shards) -> List[torch.Tensor]:
        parts = [s.detach().to(self.compute_dtype) for s in shards]
        gathered = self._collectives.gather(parts)
        return [self._layouts[i].unpadded(g) for i, g in zip(indices, gathered)]

    def _rebuild_full_params(self, dependencies: List[torch.Tensor]) -> List[torch.Tensor]:
        fulls = [None] * len(self.sharded_params)
        trainable = tuple(i for i, s in enumerate(self.sharded_params) if s.requires_grad)
        frozen = tuple(i for i, s in enumerate(self.sharded_params) if not s.requires_grad)
        if trainable and torch.is_grad_enabled():
            outs = _GatherFull.apply(self, trainable, *[self.sharded_params[i] for i in trainable])
        else:
            frozen, outs = trainable + frozen, ()
        for i, out in zip(trainable, outs):
            fulls[i] = out
        with torch.no_grad():
            for i, out in zip(frozen, self._gather(frozen, [self.sharded_params[i] for i in frozen])):
                fulls[i] = out
        if self.optimization_barrier_in_forward and fulls:
            xm.optimization_barrier_(fulls + dependencies)
        return fulls

    def _reduce_grads(self, indices, grads) -> List[Optional[torch.Tensor]]:
        """The shard gradients of the full gradients `grads` (of shards `indices`)."""
        self.training_state = TrainingState.BACKWARD_POST
        if not self._require_backward_grad_sync:
            for i, g in zip(indices, grads):
                if g is not None:
                    previous = self._unsynced_grads.get(i)
                    self._unsynced_grads[i] = g if previous is None else previous + g
            return [None] * len(indices)
        todo = []
        for k, (i, g) in enumerate(zip(indices, grads)):
            if g is None and i in self._unsynced_grads:
                g = torch.zeros_like(self._unsynced_grads[i])
            if g is None:
                continue
            if i in self._unsynced_grads:
                g = g + self._unsynced_grads.pop(i)
            if self.fp32_reduce_scatter:
                g = g.float()
            if self.gradient_predivide_factor > 1:
                g = g / self.gradient_predivide_factor
            todo.append((k, self._layouts[i].padded(g)))
        padded = [p for _, p in todo]
        if self.optimization_barrier_in_backward and padded:
            xm.optimization_barrier_(padded)
        out = [None] * len(indices)
        for (k, _), reduced in zip(todo, self._reduce_scatter(padded)):
            if self.gradient_postdivide_factor > 1:
                reduced = reduced / self.gradient_postdivide_factor
            out[k] = reduced.to(self.sharded_params[indices[k]].dtype)
        (self._root or self)._queue_finalize()
        return out

    def _reduce_scatter(self, padded):
        if not padded:
            return []
        split = self.gradient_predivide_factor > 1 or self.gradient_postdivide_factor > 1
        scale = self._collectives.scale
        self._collectives.scale = 1.0 if split else 1.0 / self.world_size
        try:
            return self._collectives.reduce_scatter(padded)
        finally:
            self._collectives.scale = scale

    # ---- forward and backward --------------------------------------------------------

    def _lazy_init(self) -> None:
        if self._is_root is None:
            self._is_root = True
            for m in self.modules():
                if m is not self and isinstance(m, XlaFullyShardedDataParallel):
                    m._is_root = False
                    object.__setattr__(m, "_root", self)  # a reference, not a submodule
        if self._is_root and self.disable_reshard_on_root:
            self.reshard_after_forward = False

    def forward(self, *args: Any, **kwargs: Any):
        self._lazy_init()
        self.training_state = TrainingState.FORWARD
        if self.compute_dtype != torch.float32:
            args, kwargs = _cast_floats(self.compute_dtype, args), _cast_floats(self.compute_dtype, kwargs)
        inputs = collect_tensors((args, kwargs)) if self.optimization_barrier_in_forward else []
        fulls = self._rebuild_full_params(inputs)
        self._install(fulls)
        reshard = (self.reshard_after_forward and torch.is_grad_enabled() and not chkpt_status.in_chkpt_bwd)
        with self._resharding(fulls) if reshard else contextlib.nullcontext():
            outputs = self.module(*args, **kwargs)
        if not (torch.is_grad_enabled() and any(s.requires_grad for s in self.sharded_params)):
            self._install(None)  # no backward will read them
        self.training_state = TrainingState.IDLE
        return outputs

    def _resharding(self, fulls):
        """Saved-tensor hooks: a full parameter autograd saves is kept as its index and
        gathered again when the backward reads it."""
        ids = {id(f): i for i, f in enumerate(fulls)}

        def pack(t):
            i = ids.get(id(t))
            return t if i is None or t is not fulls[i] else _Regather(i)

        def unpack(saved):
            return self._regather(saved.index) if isinstance(saved, _Regather) else saved
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    @torch.no_grad()
    def _regather(self, i) -> torch.Tensor:
        shard = self.sharded_params[i].detach().clone()
        xm.optimization_barrier_([shard])
        return self._gather((i,), (shard,))[0]

    def _queue_finalize(self) -> None:
        """At the end of the outermost backward (not a checkpoint's recomputation), every
        instance drops its full parameters; with `sync_on_finalization` the step ends."""
        if self._finalize_queued or chkpt_status.in_chkpt_bwd:
            return
        self._finalize_queued = True
        torch.autograd.Variable._execution_engine.queue_callback(self._finalize)

    def _finalize(self) -> None:
        self._finalize_queued = False
        for m in self.modules():
            if isinstance(m, XlaFullyShardedDataParallel):
                m._install(None)
                m.training_state = TrainingState.IDLE
        if self.sync_on_finalization:
            torch_xla.sync()

    # ---- the API of torch_xla's FSDP ---------------------------------------------------

    @staticmethod
    def _get_gradient_predivide_factor(world_size: int) -> float:
        factor = 1
        while world_size % factor == 0 and world_size / factor > factor:
            factor *= 2
        return float(factor)

    def set_gradient_divide_factors(self, pre: float, post: float, recursive: bool) -> None:
        """Gradients are divided by `pre` before the reduction and by `post` after it
        (default: two factors whose product is the world size)."""
        if recursive:
            for m in self.modules():
                if isinstance(m, XlaFullyShardedDataParallel) and m is not self:
                    m.set_gradient_divide_factors(pre, post, False)
        self.gradient_predivide_factor, self.gradient_postdivide_factor = float(pre), float(post)

    @property
    def module(self) -> XlaFlattenParamsWrapper:
        return self._fsdp_wrapped_module

    @property
    def params_with_grad(self) -> List[nn.Parameter]:
        return [p for p in self.parameters() if p.grad is not None]

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm, norm_type=2.0, groups=None) -> torch.Tensor:
        """Clips the gradients of every shard (of this instance and those inside it) by their
        norm over all replicas, as if they were one vector; returns that norm."""
        self._lazy_init()
        if not self._is_root:
            raise AssertionError("clip_grad_norm should only be called on the root (parent) instance")
        max_norm, norm_type = float(max_norm), float(norm_type)
        grads = [p.grad for p in self.params_with_grad]
        if not grads:
            return torch.tensor(0.0, device=self.xla_device)
        local = grad_norm(grads, norm_type)
        if norm_type == float("inf"):
            total = xm.all_reduce(xm.REDUCE_MAX, local, groups=groups) if self.world_size > 1 else local
        else:
            total = xm.all_reduce(xm.REDUCE_SUM, local, groups=groups) if self.world_size > 1 else local
            total = total ** (1.0 / norm_type)
        coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef)
        return total

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside keep the full gradients on each replica, unreduced; the
        first backward after it reduces them with its own."""
        self._lazy_init()
        if not self._is_root:
            raise AssertionError("no_sync on inner FSDP is not supported")
        instances = [m for m in self.modules() if isinstance(m, XlaFullyShardedDataParallel)]
        old = [m._require_backward_grad_sync for m in instances]
        for m in instances:
            m._require_backward_grad_sync = False
        try:
            yield
        finally:
            for m, flag in zip(instances, old):
                m._require_backward_grad_sync = flag

    def get_original_names_and_sharded_parameters(self):
        """(name in the unwrapped module, shard) for every shard, as `named_parameters`."""
        out = []
        for module_name, m in self.named_modules():
            if isinstance(m, XlaFullyShardedDataParallel):
                prefix = "" if module_name == "" else module_name + "."
                for p in m.sharded_params:
                    name = (prefix + p._orig_name).replace("_fsdp_wrapped_module.", "").replace("_fpw_module.", "")
                    out.append((name, p))
        return out

    def get_shard_metadata(self) -> dict:
        """What `consolidate_sharded_model_checkpoints` needs besides the state dicts."""
        shard_info, buffer_info = {}, {}
        for module_name, m in self.named_modules(remove_duplicate=False):
            if isinstance(m, XlaFullyShardedDataParallel):
                shard_info[module_name.replace("_fpw_module.", "")] = {
                    p._name: {"_orig_size": p._orig_size, "_orig_name": p._orig_name} for p in m.sharded_params}
        for name, buf in self.named_buffers():
            if hasattr(buf, "_orig_dtype"):
                buffer_info[name.replace("_fpw_module.", "")] = {"_orig_dtype": buf._orig_dtype}
        return {"shard_info": shard_info, "flatten_info": {}, "buffer_info": buffer_info,
                "world_size": self.world_size, "rank": self.rank}

    def extra_repr(self) -> str:
        return (f"world_size={self.world_size}, rank={self.rank}, compute_dtype={self.compute_dtype}, "
                f"buffer_dtype={self.buffer_dtype}, flatten_parameters={self.flatten_parameters}, "
                f"reshard_after_forward={self.reshard_after_forward}, sharding_groups={self.sharding_groups}")



class _Regather:
    """What a saved full parameter is packed into: the index of its shard."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

