"""The watchdog of waits on the other processes (this package's addition; torch_xla has none):
a program with collectives spanning the processes, a rendezvous or a barrier that has waited
longer than the watchdog's timeout prints what it waits on (the program, its collectives,
the replicas) and the Python stack of every thread of the process, once; set to raise, it
then raises `WatchdogTimeout` instead of waiting on. Off by default; the variables
TORCH_XLA_WATCHDOG_TIMEOUT (seconds) and TORCH_XLA_WATCHDOG_RAISE=1 set it too.

A peer that leaves the runtime (returns from its function, raises, exits) while others wait
for it makes them raise `PeerLeft` within seconds, watchdog or not; XLA_COLLECTIVE_TIMEOUT
(default 600 s) bounds every such wait (`CollectiveTimeout`).
"""
from torch_xla._lazy.runtime import peer_watch as _peer_watch

CollectiveTimeout, PeerLeft, WatchdogTimeout = (_peer_watch.CollectiveTimeout, _peer_watch.PeerLeft,
                                               _peer_watch.WatchdogTimeout)
set_watchdog, get_watchdog = _peer_watch.set_watchdog, _peer_watch.watchdog
