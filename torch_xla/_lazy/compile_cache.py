"""The persistent compilation cache: compiled programs kept on disk across processes.

It is jax's own cache (the compiler compiles through `jax.jit(...).lower().compile()`,
which consults it): a second process that builds the same program loads the executable
instead of compiling it. Its thresholds are set so that every program is written, however
small or quick to compile. Loads are counted in our metrics as `PersistentCacheHit`, and
programs compiled and written as `PersistentCacheMiss` (both from jax's monitoring events).
"""
import os

import jax
from jax import monitoring

from . import metrics

_EVENTS = {
    "/jax/compilation_cache/cache_hits": "PersistentCacheHit",
    "/jax/compilation_cache/cache_misses": "PersistentCacheMiss",
}
_state = {"path": None, "readonly": None}


def _on_event(event, **kwargs):
    name = _EVENTS.get(event)
    if name is not None:
        metrics.count(name)


def initialize(path: str, readonly: bool = False) -> None:
    """Uses the cache in directory `path` (created if missing) for every later compilation.

    With `readonly` programs are loaded from it but none are written (for a cache that
    several processes share). Call it once, before the first computation: jax sets its
    cache up at its first compilation.
    """
    path = os.path.abspath(os.fspath(path))
    if _state["path"] is not None:
        if (_state["path"], _state["readonly"]) != (path, readonly):
            raise RuntimeError(f"the persistent cache is already initialized at {_state['path']} "
                               f"(readonly={_state['readonly']})")
        return
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # readonly: no compilation is ever slow enough to be written.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float("inf") if readonly else 0.0)
    monitoring.register_event_listener(_on_event)
    _state.update(path=path, readonly=readonly)
