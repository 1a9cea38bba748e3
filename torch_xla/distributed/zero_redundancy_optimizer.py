"""ZeRO-1: an optimizer whose state is sharded over the replicas (`ZeroRedundancyOptimizer`).

Each replica keeps, for every parameter, its slice of dim 0 (padded to a multiple of the
group size) as a "shard" the wrapped optimizer steps; so each holds 1/world of the
optimizer's state. A step reduce_scatters the full gradients into the shards' gradients
(their mean over the replicas, as data parallelism gives), optionally clips them by their
norm over all replicas, steps the wrapped optimizer on the shards, and all_gathers the
updated shards back into the full parameters, which the model keeps. Everything is lazy:
the step is part of the training step's one program.
"""
import copy
import logging
from typing import Any, Dict, List, Optional, Type

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Optimizer

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr


def _rows(t: torch.Tensor) -> torch.Tensor:
    """`t` with a dim 0 to cut (a scalar as one row)."""
    return t.reshape(1) if t.dim() == 0 else t


class ZeroRedundancyOptimizer(Optimizer):
    """Wraps `optimizer_class(shards, **defaults)` (torch_xla's signature and state dict).

    Args: `optimizer_dtype` (of the shards and the state, default float32), `grad_clipping`
    and `max_norm` (default 1.0: the gradients' 2-norm over all replicas is clipped to it),
    `pin_layout`, `sharding_groups` (replica groups the shards are cut over; default all
    replicas), `grad_norm_groups` (groups of a second all_reduce of the norm, e.g. model
    parallel ones), `lazy_init` (shard at `init_zero()`), `bucket_cap_mb_all_gather` /
    `bucket_cap_mb_reduce_scatter` (collectives in buckets), `use_grad_acc_hook` (gradients
    accumulated in `optimizer_dtype` as they come), `save_master_weights` (the shards in the
    state dict), `higher_cc_precision` (reduce in `optimizer_dtype`).
    """

    def __init__(self, params, optimizer_class: Type[Optimizer], optimizer_dtype: Optional[Any] = None,
                 grad_clipping: bool = True, max_norm: Optional[float] = None, pin_layout: bool = True,
                 sharding_groups: Optional[Any] = None, grad_norm_groups: Optional[Any] = None,
                 lazy_init: bool = False, bucket_cap_mb_all_gather: int = 0, bucket_cap_mb_reduce_scatter: int = 0,
                 use_grad_acc_hook: bool = False, save_master_weights: bool = False,
                 higher_cc_precision: bool = False, **defaults: Any):
        if not save_master_weights:
            logging.warning("Not saving master weights may have accuracy issues when resuming training!")
        super().__init__(params, defaults)
        self.global_world_size = xr.world_size()
        self.global_rank = xr.global_ordinal()
        self._sharding_groups = ([list(range(self.global_world_size))] if sharding_groups is None
                                 else [list(g) for g in sharding_groups])
        self._grad_norm_groups = grad_norm_groups
        self.optimizer_class = optimizer_class
        self.defaults = defaults
        self.optimizer_dtype = optimizer_dtype if optimizer_dtype is not None else torch.float32
        self.grad_clipping = grad_clipping
        self.max_norm = max_norm if max_norm is not None else 1.0
        self.pin_layout = pin_layout
        self.bucket_cap_mb_all_gather = bucket_cap_mb_all_gather
        self.bucket_cap_mb_reduce_scatter = bucket_cap_mb_reduce_scatter
        self.save_master_weights = save_master_weights
        self.higher_cc_precision = higher_cc_precision
        self.use_grad_acc_hook = use_grad_acc_hook
        self.grad_acc_hooks = []
        self._grad_norm = None
        self.inited = False
        if not lazy_init:
            self.init_zero()

    # ---- sharding --------------------------------------------------------------------

    @property
    def sharding_groups(self):
        return self._sharding_groups

    @sharding_groups.setter
    def sharding_groups(self, groups):
        if self.inited:
            raise AssertionError("already inited, cannot change sharding_groups")
        self._sharding_groups = [list(g) for g in groups]

    @property
    def grad_norm(self):
        """The gradients' norm the last clipping step measured."""
        return self._grad_norm

    def init_zero(self) -> None:
        """Cuts the parameters into this replica's shards and builds the wrapped optimizer
        on them."""
        self.remove_hooks()
        self.local_world_size = len(self._sharding_groups[0])
        self.local_rank = next((g.index(self.global_rank) for g in self._sharding_groups
                                if self.global_rank in g), None)
        if self.local_rank is None:
            raise ValueError(f"Current rank {self.global_rank} is missing from the sharding_groups "
                             f"{self._sharding_groups}")
        params = [p for g in self.param_groups for p in g["params"]]
        devices = {p.device for p in params}
        if len(devices) != 1 or next(iter(devices)).type != "xla":
            raise ValueError(f"ZeroRedundancyOptimizer needs parameters on one XLA device, got {sorted(map(str, devices))}")
        self.device = devices.pop()
        groups = []
        for group in self.param_groups:
            shards = []
            for p in group["params"]:
                shard = nn.Parameter(self._shard(p.detach()).to(self.optimizer_dtype).clone(),
                                     requires_grad=p.requires_grad)
                if self.use_grad_acc_hook:
                    self.grad_acc_hooks.append(p.register_post_accumulate_grad_hook(self._accumulator(shard)))
                shards.append(shard)
            groups.append({**group, "params": shards})
        # Computed now: the slices depend on the rank, the replicas' common step must not.
        xm.unlazy([s for g in groups for s in g["params"]])
        self.base_optimizer = self.optimizer_class(groups, **self.defaults)
        self._sync_param_groups(self.param_groups, self.base_optimizer.param_groups)
        self.inited = True

    def _pad(self, t: torch.Tensor) -> torch.Tensor:
        t = _rows(t)
        extra = -t.size(0) % self.local_world_size
        return F.pad(t, [0, 0] * (t.dim() - 1) + [0, extra]) if extra else t

    def _shard(self, t: torch.Tensor) -> torch.Tensor:
        return self._pad(t).chunk(self.local_world_size)[self.local_rank]

    def _accumulator(self, shard):
        """A hook that moves each gradient into `shard.main_grad` (full size, optimizer
        dtype), freeing the parameter's."""
        def hook(param):
            if param.grad is None:
                return
            grad = param.grad.detach().to(self.optimizer_dtype)
            if hasattr(shard, "main_grad"):
                shard.main_grad.add_(grad)
            else:
                shard.main_grad = param.main_grad = grad.clone()
            param.grad = None
        return hook

    def remove_hooks(self) -> None:
        for hook in self.grad_acc_hooks:
            hook.remove()
        self.grad_acc_hooks = []

    @staticmethod
    def _sync_param_groups(src: List[Dict], dst: List[Dict]) -> None:
        """Copies every setting but the parameters (a scheduler's lr) from `src` to `dst`."""
        if len(src) != len(dst):
            raise AssertionError("Mismatch between number of source and destination parameter groups")
        for s, d in zip(src, dst):
            d.update((k, v) for k, v in s.items() if k != "params")

    def _pairs(self):
        """(parameter, shard) of every parameter that has a gradient to apply."""
        for group, sharded in zip(self.param_groups, self.base_optimizer.param_groups):
            for p, shard in zip(group["params"], sharded["params"]):
                if p.grad is not None or (self.use_grad_acc_hook and hasattr(shard, "main_grad")):
                    yield p, shard

    def _scheme(self, kwargs):
        return kwargs.get("sharding_scheme") or [
            {"scale_factor": 1.0, "sharding_group": self._sharding_groups, "group_size": self.local_world_size}]

    # ---- the step ----------------------------------------------------------------------

    def _reduce_gradients(self, scheme) -> None:
        pairs = list(self._pairs())
        grads = []
        for p, shard in pairs:
            g = self._pad(shard.main_grad if self.use_grad_acc_hook else p.grad)
            grads.append(g.to(self.optimizer_dtype) if self.higher_cc_precision else g)
        for step in scheme:
            args = (xm.REDUCE_SUM, grads, step["scale_factor"] / step["group_size"], 0, step["group_size"])
            if self.bucket_cap_mb_reduce_scatter:
                grads = xm.reduce_scatter_bucketized(*args, groups=step["sharding_group"], pin_layout=self.pin_layout,
                                                     bucket_cap_mb=self.bucket_cap_mb_reduce_scatter)
            elif step["group_size"] == 1:
                grads = [g * args[2] for g in grads]
            else:
                grads = [xm.reduce_scatter(xm.REDUCE_SUM, g, args[2], 0, step["group_size"],
                                           groups=step["sharding_group"], pin_layout=self.pin_layout) for g in grads]
        for (_, shard), g in zip(pairs, grads):
            shard.grad = g.to(self.optimizer_dtype)

    @torch.no_grad()
    def _clip_grad_norm(self, max_norm, norm_type=2.0) -> None:
        if float(norm_type) != 2.0:
            raise RuntimeError(f"only norm type 2 is supported, getting {norm_type}")
        grads = [s.grad for g in self.base_optimizer.param_groups for s in g["params"] if s.grad is not None]
        # (No factory on self.device: the device's index would make each replica's graph its own.)
        total = sum((g * g).sum() for g in grads) if grads else torch.zeros((), device=self.device)
        for groups in (self._sharding_groups, self._grad_norm_groups):
            if groups is not None and self.global_world_size > 1:
                total = xm.all_reduce(xm.REDUCE_SUM, total, groups=groups, pin_layout=self.pin_layout)
        self._grad_norm = total.sqrt()
        coef = torch.clamp(float(max_norm) / (self._grad_norm + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef)

    @torch.no_grad()
    def allgather_weights_and_update_full_parameter(self, sharding_scheme=None) -> None:
        """Each parameter (that had a gradient) becomes the gather of its updated shards."""
        scheme = sharding_scheme or self._scheme({})
        pairs = list(self._pairs())
        data = [shard.detach().to(p.dtype) for p, shard in pairs]
        for step in reversed(scheme):
            if step["group_size"] == 1:
                continue
            if self.bucket_cap_mb_all_gather:
                data = xm.all_gather_bucketized(data, dim=0, groups=step["sharding_group"], pin_layout=False,
                                                bucket_cap_mb=self.bucket_cap_mb_all_gather)
            else:
                data = [xm.all_gather(d, dim=0, groups=step["sharding_group"], pin_layout=self.pin_layout)
                        for d in data]
        for (p, _), full in zip(pairs, data):
            p.copy_(full[:_rows(p).size(0)].view(p.shape))

    @torch.no_grad()
    def step(self, closure=None, **kwargs):
        """One step of the wrapped optimizer on the shards; the parameters then hold its result."""
        if not self.inited:
            raise AssertionError("must call init_zero() first")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        scheme = self._scheme(kwargs)
        kwargs.pop("sharding_scheme", None)
        self._sync_param_groups(self.param_groups, self.base_optimizer.param_groups)
        self._reduce_gradients(scheme)
        if self.grad_clipping:
            self._clip_grad_norm(self.max_norm)
        self.base_optimizer.step(closure=None, **kwargs)
        self.base_optimizer.zero_grad(set_to_none=True)
        self.allgather_weights_and_update_full_parameter(scheme)
        self._sync_param_groups(self.base_optimizer.param_groups, self.param_groups)
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none=set_to_none)
        if self.use_grad_acc_hook:
            for group in self.base_optimizer.param_groups:
                for shard in group["params"]:
                    if hasattr(shard, "main_grad"):
                        shard.main_grad.zero_()

    # ---- state -------------------------------------------------------------------------

    def get_shape_info(self) -> Dict[int, torch.Size]:
        params = [p for g in self.param_groups for p in g["params"]]
        return {i: p.shape for i, p in enumerate(params)}

    def state_dict(self):
        """The wrapper's state dict, with the wrapped optimizer's sharded state as
        `base_state`, the parameters' shapes, and with `save_master_weights` the shards."""
        state = super().state_dict()
        state["base_state"] = self.base_optimizer.state_dict()["state"]
        state["shape_info"] = self.get_shape_info()
        if self.save_master_weights:
            shards = [s for g in self.base_optimizer.param_groups for s in g["params"]]
            state["sharded_master_weights"] = {i: s.data for i, s in enumerate(shards)}
        return state

    def load_state_dict(self, state_dict) -> None:
        """Loads a state dict of this replica's rank (shards again, then the sharded state;
        saved master weights become the shards and, gathered, the parameters)."""
        state_dict = copy.deepcopy(state_dict)
        base_state = state_dict.pop("base_state")
        master = state_dict.pop("sharded_master_weights", None)
        state_dict.pop("shape_info", None)
        super().load_state_dict(state_dict)
        self.init_zero()
        inner = self.base_optimizer.state_dict()
        inner["state"], inner["param_groups"] = base_state, state_dict["param_groups"]
        self.base_optimizer.load_state_dict(inner)
        if master is None:
            return
        with torch.no_grad():
            for group, sharded, loaded in zip(self.param_groups, self.base_optimizer.param_groups,
                                              state_dict["param_groups"]):
                for p, shard, index in zip(group["params"], sharded["params"], loaded["params"]):
                    shard.copy_(master[index])
                    if self.use_grad_acc_hook:
                        shard.main_grad = p.main_grad = torch.zeros_like(p, dtype=self.optimizer_dtype)
                    else:
                        p.grad = torch.zeros_like(p)  # so that every parameter is gathered
        torch_xla.sync()
        self.allgather_weights_and_update_full_parameter()
        torch_xla.sync()
