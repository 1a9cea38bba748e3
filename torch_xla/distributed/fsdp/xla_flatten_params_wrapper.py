"""The module FSDP holds its wrapped module in (`fsdp.module`), as in torch_xla.

`XlaFlattenParamsWrapper(module)` keeps `module` as `_fpw_module` (`.module`), forwards calls
and missing attributes to it, and leaves `_fpw_module.` out of state-dict keys (and adds it
back on load), so that keys, and the shard metadata FSDP writes, are those of torch_xla.
Parameters are not flattened here: FSDP shards each parameter on its own
(`flatten_parameters=True` is refused by FSDP).
"""
import torch.nn as nn

from ._wrapper import ForwardsToWrapped

_PREFIX = "_fpw_module."


def _strip_prefix(module, state_dict, prefix, local_metadata):
    for key in [k for k in state_dict if k.startswith(prefix + _PREFIX)]:
        state_dict[prefix + key[len(prefix + _PREFIX):]] = state_dict.pop(key)
    return state_dict


def _add_prefix(module, state_dict, prefix, *args):
    ours = [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + _PREFIX)]
    for key in ours:
        state_dict[prefix + _PREFIX + key[len(prefix):]] = state_dict.pop(key)


class XlaFlattenParamsWrapper(ForwardsToWrapped, nn.Module):
    wrapped_attribute = "_fpw_module"

    def __init__(self, module: nn.Module):
        super().__init__()
        self._fpw_module = module
        self._register_state_dict_hook(_strip_prefix)
        self._register_load_state_dict_pre_hook(_add_prefix, with_module=True)

    @property
    def module(self) -> nn.Module:
        return self._fpw_module

    def forward(self, *args, **kwargs):
        return self._fpw_module(*args, **kwargs)

