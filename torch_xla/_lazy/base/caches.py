"""The engine's bounded caches: each holds at most a number of entries set by an
environment variable, and counts what it evicts in the metrics (`<Name>CacheEvictions`).

Two kinds, for two costs of a look-up:
- `LRUCache` (compiled programs: costly to rebuild, looked up once per program run) keeps
  exactly the `limit` entries used most recently.
- `GenerationCache` (caches consulted by every traced op, cheap to refill: meta results,
  dispatch routes) makes a hit one dict look-up in `recent`, a dict that stays the same
  object, so hot paths bind `cache.recent.get` once and call `get` only on a miss.
  Entries live in two generations: `recent`, and `older` (what `recent` held before);
  an entry of `older` that is used moves back to `recent`. When `recent` holds half the
  limit, its entries become `older`, and those of the old `older` (none used since) are
  evicted together: the least recently used go first, and at most `limit` entries are
  held.
"""
import collections
import os

from . import counters


def _limit(variable, default, minimum=1) -> int:
    text = os.environ.get(variable)
    if text is None:
        return default
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < minimum:
        raise ValueError(f"{variable}={text!r}: expected a number of cache entries, at least {minimum}")
    return limit


class LRUCache:
    """At most `limit` entries (environment variable `variable`, else `default`); the least
    recently used is evicted first."""

    def __init__(self, name, variable, default):
        self.entries = collections.OrderedDict()
        self.limit = _limit(variable, default)
        self.counter = f"{name}CacheEvictions"

    def get(self, key):
        value = self.entries.get(key)
        if value is not None:
            self.entries.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self.entries[key] = value
        self.entries.move_to_end(key)
        self.evict_oldest(len(self.entries) - self.limit)

    def evict_oldest(self, n: int) -> None:
        """Evicts the `n` least recently used entries (all, if it holds fewer; none for n <= 0)."""
        for _ in range(min(n, len(self.entries))):
            self.entries.popitem(last=False)
            counters.count(self.counter)

    def values(self):
        """The entries' values, least recently used first."""
        return list(self.entries.values())

    def clear(self) -> None:
        self.entries.clear()

    def __len__(self):
        return len(self.entries)


class GenerationCache:
    """At most `limit` entries (environment variable `variable`, else `default`), evicted by
    generations (see the module's docstring); a hit in `recent` costs one dict look-up."""

    def __init__(self, name, variable, default):
        self.recent, self.older = {}, {}
        self.limit = _limit(variable, default, minimum=2)
        self.counter = f"{name}CacheEvictions"

    def get(self, key):
        value = self.recent.get(key)
        if value is None:
            value = self.older.pop(key, None)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key, value) -> None:
        if len(self.recent) >= self.limit // 2:
            if self.older:
                counters.count(self.counter, len(self.older))
            self.older = dict(self.recent)
            self.recent.clear()
        self.recent[key] = value

    def discard(self, key) -> None:
        self.recent.pop(key, None)
        self.older.pop(key, None)

    def clear(self) -> None:
        self.recent.clear()
        self.older.clear()

    def __len__(self):
        return len(self.recent) + len(self.older)
