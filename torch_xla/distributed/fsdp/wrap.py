"""Auto-wrap policies and the recursive wrapper FSDP wrappers use to wrap submodules.

A policy is called as `policy(module=m, recurse=..., unwrapped_params=n)`: with
`recurse=True` it says whether to look inside `m`, with `recurse=False` whether to wrap `m`
(whose `n` parameters no child wrapper took).
"""
from typing import Any, Callable, Optional, Set, Tuple, Type

import torch.nn as nn


def always_wrap_policy(*args, **kwargs) -> bool:
    """Wraps every submodule."""
    return True


def lambda_auto_wrap_policy(module: nn.Module, recurse: bool, unwrapped_params: int,
                            lambda_fn: Callable) -> bool:
    """Wraps the submodules `lambda_fn` returns True for."""
    return True if recurse else lambda_fn(module)


def transformer_auto_wrap_policy(module: nn.Module, recurse: bool, unwrapped_params: int,
                                 transformer_layer_cls: Set[Type[nn.Module]]) -> bool:
    """Wraps each instance of `transformer_layer_cls` (the rest goes to the outer wrapper)."""
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(module: nn.Module, recurse: bool, unwrapped_params: int,
                                min_num_params: int = int(1e8),
                                force_leaf_modules: Optional[Set[Type[nn.Module]]] = None,
                                exclude_wrap_modules: Optional[Set[Type[nn.Module]]] = None) -> bool:
    """Wraps submodules holding at least `min_num_params` unwrapped parameters; never looks
    inside `force_leaf_modules`, never wraps `exclude_wrap_modules`."""
    if force_leaf_modules is None:
        force_leaf_modules = size_based_auto_wrap_policy.FORCE_LEAF_MODULES
    if exclude_wrap_modules is None:
        exclude_wrap_modules = size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES
    large = unwrapped_params >= min_num_params
    if recurse:
        return large and not isinstance(module, tuple(force_leaf_modules))
    return large and not isinstance(module, tuple(exclude_wrap_modules))


size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {nn.ModuleList, nn.ModuleDict}
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {nn.MultiheadAttention}


def _wrap(module, wrapper_cls, **kwargs):
    overrides = getattr(module, "_wrap_overrides", None)
    return wrapper_cls(module, **({**kwargs, **overrides} if overrides else kwargs))


def recursive_wrap(module: nn.Module, auto_wrap_policy: Callable, wrapper_cls: Callable,
                   ignored_modules: Set[nn.Module], ignored_params: Set[nn.Parameter],
                   only_wrap_children: bool = False, **kwargs: Any) -> Tuple[nn.Module, int]:
    """Wraps, depth first, the submodules of `module` the policy picks with
    `wrapper_cls(submodule, **kwargs)` (and `module` itself unless `only_wrap_children`).
    Returns the module and how many parameters ended up wrapped."""
    if auto_wrap_policy is None or wrapper_cls is None:
        raise AssertionError("Must specify auto_wrap_policy and wrapper_cls")
    if isinstance(wrapper_cls, type):
        for child in module.modules():
            if child not in ignored_modules and isinstance(child, wrapper_cls):
                raise AssertionError(f"{type(child).__name__} is already wrapped")
    count = sum(p.numel() for p in module.parameters() if p not in ignored_params)
    if not auto_wrap_policy(module=module, recurse=True, unwrapped_params=count):
        return module, 0
    wrapped = 0
    for name, child in module.named_children():
        if child in ignored_modules:
            continue
        new_child, n = recursive_wrap(child, auto_wrap_policy, wrapper_cls, ignored_modules,
                                      ignored_params, **kwargs)
        setattr(module, name, new_child)
        wrapped += n
    if not only_wrap_children and auto_wrap_policy(module=module, recurse=False,
                                                   unwrapped_params=count - wrapped):
        return _wrap(module, wrapper_cls, **kwargs), count
    return module, wrapped
