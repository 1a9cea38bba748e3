"""The version: the torch_xla API this package implements (2.9.0), with this project's own
release as the local label (+jax.0.1.0), so that version-gated clients see the API they can use
and nobody mistakes it for upstream's build."""
__version__ = "2.9.0+jax.0.1.0"
