"""torch_xla.experimental.assume_pure: a pure torch function traced once, then reused.

`assume_pure(fn)` traces `fn` lazily once per argument signature (tensors' shapes and
dtypes, other arguments' values) into one jax function (`_lazy/trace/traced`); later calls add
one node calling it to the graph, without running `fn`'s Python again. Gradients flow
through it (jax's vjp: the backward is one node too). Tensors `fn` closes over (a module's
parameters) are read afresh at each call and get gradients.

`fn` must be pure: its result depends on its arguments alone, it changes nothing outside.
Random ops in it draw the same numbers at every call (their seeds are fixed when traced),
unless `add_rng_seed_argument=True`: then each call takes `rng_seed=` (an int) and equal
seeds give equal draws.

`assume_pure_torch(fn, use_cache=False)` is torch_xla's other door to the same trace: each
call traces `fn` again, unless `use_cache=True`, which keeps the traces in
`_XLA_COMPUTATION_CACHE` under `fn`'s name (per argument signature here; torch_xla reuses
one computation for any shapes) and reuses them. torch_xla's is forward only; here
gradients flow through it as through `assume_pure`.
"""
import functools

import torch
import torch.nn as nn

from .._lazy.trace import traced


def assume_pure(fn, *, add_rng_seed_argument=False):
    """`fn`, traced once per argument signature (see the module's docstring)."""
    cache = {}

    @functools.wraps(fn)
    def pure(*args, **kwargs):
        seed = None
        if add_rng_seed_argument:
            assert "rng_seed" in kwargs, "Missing keyword argument rng_seed."
            seed = kwargs.pop("rng_seed")
            seed = int(seed.item() if isinstance(seed, torch.Tensor) else seed)
        return traced.call_pure(cache, fn, args, kwargs, seed)

    return pure


# fn.__name__ -> {argument signature: its trace}, for assume_pure_torch(use_cache=True)
_XLA_COMPUTATION_CACHE = {}


def assume_pure_torch(func, use_cache=False):
    """`func` as one traced jax function at each call; traced once per argument signature
    and kept under `func`'s name with `use_cache` (see the module's docstring)."""

    @functools.wraps(func)
    def inner(*args, **kwargs):
        cache = _XLA_COMPUTATION_CACHE.setdefault(func.__name__, {}) if use_cache else {}
        return traced.call_pure(cache, func, args, kwargs)

    return inner


def _pure_forward(module, params, buffers, args, kwargs):
    return torch.func.functional_call(module, (params, buffers), args, kwargs)


class PureModule(nn.Module):
    """`module`, whose forward is pure, run through `assume_pure` (traced once per input
    signature; its parameters and buffers are arguments)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self._module = module
        self._pure_forward = assume_pure(functools.partial(_pure_forward, self._module))

    def forward(self, *args, **kwargs):
        params = dict(self._module.named_parameters())
        buffers = dict(self._module.named_buffers())
        return self._pure_forward(params, buffers, args, kwargs)
