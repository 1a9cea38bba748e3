"""torch_xla.debug.watchdog: the settings, and a wait under them (`peer_watch.wait`, which
the programs spanning processes use; the spawned runs in tests/distributed/
test_xla_multiprocessing.py drive it across processes)."""
import concurrent.futures
import time

import pytest

import torch_xla.debug.watchdog as watchdog
from torch_xla._lazy.runtime import peer_watch


@pytest.fixture(autouse=True)
def _reset():
    yield
    watchdog.set_watchdog(None)


def test_settings_come_from_the_variables_until_set(monkeypatch):
    monkeypatch.delenv("TORCH_XLA_WATCHDOG_TIMEOUT", raising=False)
    assert watchdog.get_watchdog() == (None, False)
    monkeypatch.setenv("TORCH_XLA_WATCHDOG_TIMEOUT", "30")
    monkeypatch.setenv("TORCH_XLA_WATCHDOG_RAISE", "1")
    assert watchdog.get_watchdog() == (30.0, True)
    watchdog.set_watchdog(5, raise_error=False)
    assert watchdog.get_watchdog() == (5.0, False)
    with pytest.raises(ValueError, match="positive number of seconds"):
        watchdog.set_watchdog(0)


def test_a_long_wait_is_reported_with_the_threads_stacks_then_raises(capfd):
    watchdog.set_watchdog(1, raise_error=True)
    never = concurrent.futures.Future()
    start = time.monotonic()
    with pytest.raises(watchdog.WatchdogTimeout, match=r"the test's wait has waited \d+ s, more than "
                                                       r"the watchdog's 1 s"):
        peer_watch.wait(never, "the test's wait")
    assert time.monotonic() - start < 10
    err = capfd.readouterr().err
    assert "torch_xla watchdog: process 0 of 1 has waited" in err and "in the test's wait" in err
    assert "test_a_long_wait_is_reported_with_the_threads_stacks_then_raises" in err


def test_a_reported_wait_goes_on_unless_told_to_raise(capfd):
    watchdog.set_watchdog(1)
    done = concurrent.futures.Future()
    concurrent.futures.ThreadPoolExecutor(1).submit(lambda: (time.sleep(2.5), done.set_result(7)))
    assert peer_watch.wait(done, "a slow program") == 7
    assert "has waited" in capfd.readouterr().err


def test_every_wait_is_bounded_by_the_collective_timeout(monkeypatch):
    monkeypatch.setenv("XLA_COLLECTIVE_TIMEOUT", "2")
    with pytest.raises(watchdog.CollectiveTimeout, match=r"did not finish within 2 s \(XLA_COLLECTIVE_TIMEOUT\)"):
        peer_watch.wait(concurrent.futures.Future(), "a stuck program")
