"""torch_xla._internal.jax_workarounds: what torch_xla's jax-using code and tests import.

jax is this package's runtime, always imported, so the guards torch_xla needs before
importing jax beside its own client have nothing to do here."""

def jax_import_guard():
    """Nothing to do: the runtime is jax's own."""


def requires_jax(func):
    """`func` unchanged (jax is always there)."""
    return func


def maybe_get_jax(log=True):
    import jax
    return jax


def maybe_get_torchax():
    """None: torchax is not used (torch functions are traced lazily, `_lazy/trace/traced`)."""
    return None
