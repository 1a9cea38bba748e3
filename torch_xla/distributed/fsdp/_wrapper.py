"""What the FSDP wrappers (FSDPv1, its flattening wrapper, FSDPv2) share: the checks of the
module they are given, and the forwarding of what the wrapper lacks to the module inside."""
import torch.nn as nn


def check_wrappable(module: nn.Module, wrapper: type, no_forward: str) -> None:
    """Raises unless `module` may be wrapped by `wrapper`: not one already, and with a
    `forward` of its own (`no_forward`: the wrapper's message for a module without one)."""
    if isinstance(module, wrapper):
        raise RuntimeError("Cannot wrap a module that is already wrapped with FSDP. For nested FSDP, "
                           "first wrap the inner child modules before wrapping the outer parent module.")
    forward = getattr(type(module), "forward", None)
    if forward is None or forward is nn.Module.forward:
        raise RuntimeError(no_forward)


class ForwardsToWrapped:
    """A wrapper module's attributes and items that it lacks are those of the module it wraps,
    held as the submodule named `wrapped_attribute`."""
    wrapped_attribute = ""

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == self.wrapped_attribute:  # not set yet (or a copy being rebuilt): nothing to forward to
                raise
            return getattr(getattr(self, self.wrapped_attribute), name)

    def __getitem__(self, key):
        return getattr(self, self.wrapped_attribute).__getitem__(key)
