"""The bottom: counters and metrics (`counters`), bounded caches (`caches`), keeping dynamo out
of the engine's frames (`frames`), the user's source line (`user_code`), profiler scopes
(`scopes`), and what the engine needs of torch and jax beyond their public APIs
(`torch_compat`, `jax_compat`).

Called by every folder above; imports no other folder.
"""

# What the public package may import from this folder (tests/test_layering checks it).
__all__ = ("counters", "frames", "jax_compat", "scopes", "torch_compat")
