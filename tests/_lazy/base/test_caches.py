"""The bounded caches: what each keeps, what it evicts, and the count of evictions."""
import pytest

import torch_xla.debug.metrics as met
from torch_xla._lazy.base.caches import GenerationCache, LRUCache


def test_lru_cache_evicts_the_least_recently_used(monkeypatch):
    monkeypatch.setenv("XLA_TEST_CACHE_SIZE", "2")
    met.clear_counters()
    cache = LRUCache("Test", "XLA_TEST_CACHE_SIZE", 100)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now b is the least recently used
    cache.put("c", 3)
    assert (cache.get("b"), cache.get("a"), cache.get("c"), len(cache)) == (None, 1, 3, 2)
    assert met.counter_value("TestCacheEvictions") == 1


def test_generation_cache_keeps_what_is_used_and_stays_within_its_limit(monkeypatch):
    monkeypatch.setenv("XLA_TEST_CACHE_SIZE", "4")
    met.clear_counters()
    cache = GenerationCache("Test", "XLA_TEST_CACHE_SIZE", 100)
    for key in range(100):
        cache.put(key, key)
        assert cache.get(0) == 0  # used all along: never evicted
        assert len(cache) <= 4
    assert cache.get(98) == 98 and cache.get(50) is None
    assert met.counter_value("TestCacheEvictions") == 100 - len(cache)


@pytest.mark.parametrize("text", ["0", "many"])
def test_a_bad_cache_size_raises_naming_the_variable(monkeypatch, text):
    monkeypatch.setenv("XLA_TEST_CACHE_SIZE", text)
    with pytest.raises(ValueError, match="XLA_TEST_CACHE_SIZE"):
        LRUCache("Test", "XLA_TEST_CACHE_SIZE", 100)


def test_collective_programs_are_bounded_and_evictions_counted(dev, monkeypatch):
    """A program with a collective (one replica here) is cached per (graph, mesh) in the
    runner's bounded cache: more shapes than it holds evict the oldest, counted."""
    import torch
    import torch_xla.core.xla_model as xm
    from torch_xla._lazy.runtime import runner
    monkeypatch.setenv("XLA_TEST_CACHE_SIZE", "3")
    monkeypatch.setattr(runner, "_cache", LRUCache("Program", "XLA_TEST_CACHE_SIZE", 100))
    met.clear_counters()
    for n in range(1, 7):
        x = torch.full((n, 5), 2.0, device=dev)
        out = xm.all_reduce("sum", x) + 1
        assert out.cpu().tolist() == [[3.0] * 5] * n
        assert runner.cache_size() <= 3
    assert met.counter_value("ProgramCacheEvictions") == 3
