"""Runs the multi-host scenarios on two hosts simulated as network namespaces (`hosts`),
each scenario printing one PASS or FAIL line; exits 1 if any failed, 0 if all passed.
`python -m tests.multihost.run [NAME ...]` runs the named scenarios only."""
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from tests.multihost import hosts as hosts_module
from tests.multihost.hosts import Hosts, reap
from tests.multihost.report import tagged

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "multihost")
TIMEOUT = float(os.environ.get("MULTIHOST_TIMEOUT", "420"))  # seconds for one run


class Failed(Exception):
    pass


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_XLA_", "XLA_", "MASTER_"))}
    env.update(PYTHONPATH=ROOT, PJRT_DEVICE="CPU", GLOO_SOCKET_IFNAME="txlink",
               PYTHONUNBUFFERED="1", **{k: str(v) for k, v in extra.items()})
    return env


def _wait(procs, timeout=TIMEOUT):
    """Every process's output once all have ended; a run past `timeout` is killed, failing."""
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=max(deadline - time.monotonic(), 1))[0])
        except Exception:  # noqa: BLE001  (timeout: every process of the run is killed)
            for q in procs:
                q.kill()
                reap(q)
            raise Failed(f"a run did not end within {timeout:g} s")
    for p, out in zip(procs, outs):
        if p.returncode != 0:
            raise Failed(f"exit code {p.returncode}:\n{out[-3000:]}")
    return outs


def torchrun(hosts, nodes, nproc, script, *args, devices=1, **extra):
    """`torchrun --nnodes N --node-rank R --master-addr A --master-port P --nproc-per-node n`
    on the first `nodes` hosts; returns the agents' processes."""
    port = hosts.free_port(0)
    procs = []
    for rank in range(nodes):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes),
                "--node-rank", str(rank), "--master-addr", hosts.address[0], "--master-port", str(port),
                "--nproc-per-node", str(nproc), os.path.join(HERE, script), *args]
        procs.append(hosts.start(rank, argv, _env(CPU_NUM_DEVICES=devices, **extra)))
    return procs


def close(a, b, tol=1e-5):
    """Whether two lists of losses agree (same length, each within relative `tol`)."""
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=tol, abs_tol=1e-7) for x, y in zip(a, b))


def data_parallel(hosts, state):
    two = _wait(torchrun(hosts, 2, 4, "data_parallel.py"))
    layouts = [layout for out in two for layout in tagged(out, "LAYOUT")]
    if len(layouts) != 8 or any(l["seen"] != l["wanted"] for l in layouts):
        raise Failed(f"layouts: {layouts}")
    one = _wait(torchrun(hosts, 1, 8, "data_parallel.py"))
    a, b = _result(two[0]), _result(one[0])
    for kind in ("xm", "ddp"):
        if not close(a[kind], b[kind]):
            raise Failed(f"{kind} losses differ: 2x4 {a[kind]} vs 1x8 {b[kind]}")
    return f"8 processes report their layout; xm and DDP losses of 2x4 = 1x8: {a['ddp']}"


def _result(out):
    """The one RESULT object of a run's output."""
    found = tagged(out, "RESULT")
    if len(found) != 1:
        raise Failed(f"{len(found)} RESULT lines, not one:\n{out[-3000:]}")
    return found[0]


def _reference(hosts, state):
    """The 1 host x 8 SPMD run never interrupted (6 steps), made once."""
    if "reference" not in state:
        out = _wait(torchrun(hosts, 1, 1, "spmd.py", "--steps", "6", "--hybrid", devices=8))
        state["reference"] = _result(out[0])
    return state["reference"]


def _agree(name, got, wanted):
    if not close(got, wanted):
        raise Failed(f"{name}: {got} vs {wanted}")


def spmd(hosts, state):
    ck = os.path.join(state["tmp"], "spmd")
    two = _result(_wait(torchrun(hosts, 2, 1, "spmd.py", "--steps", "3", "--hybrid", "--ckpt", ck,
                                 devices=4))[0])
    ref = _reference(hosts, state)
    _agree("FSDPv2 2x4 vs 1x8", two["fsdp"], ref["fsdp"][:3])
    _agree("HSDP on a HybridMesh 2x4 vs 1x8", two["hsdp"], ref["hsdp"][:3])
    if two["dcn_rows"] != [[0], [1]]:
        raise Failed(f"the HybridMesh's dcn rows lie on processes {two['dcn_rows']}, not one host each")
    one = _result(_wait(torchrun(hosts, 1, 1, "spmd.py", "--steps", "5", "--ckpt", ck, devices=8))[0])
    if one["restored"] != 2:
        raise Failed(f"1x8 restored step {one['restored']}, not 2")
    _agree("1x8 resumed from the 2x4 checkpoint", one["fsdp"], ref["fsdp"][3:5])
    back = _result(_wait(torchrun(hosts, 2, 1, "spmd.py", "--steps", "6", "--ckpt", ck, devices=4))[0])
    if back["restored"] != 4:
        raise Failed(f"2x4 restored step {back['restored']}, not 4")
    _agree("2x4 resumed from the 1x8 checkpoint", back["fsdp"], ref["fsdp"][5:6])
    return ("FSDPv2 and HSDP (dcn axis across the hosts) losses of 2x4 = 1x8; each host loaded and "
            "held only its rows; checkpoint 2x4 -> 1x8 -> 2x4 restored exactly and training went on "
            f"as the uninterrupted run: {ref['fsdp']}")


def slow_link(hosts, state):
    ref = _reference(hosts, state)
    how = hosts.slow()
    try:
        two = _result(_wait(torchrun(hosts, 2, 1, "spmd.py", "--steps", "2", devices=4))[0])
    finally:
        hosts.slow(False)
    _agree(f"2x4 over a link slowed by {how}", two["fsdp"], ref["fsdp"][:2])
    return f"losses over a link slowed by {how} = 1x8's: {two['fsdp']}"


def _lines(proc, sink):
    """Reads proc's output into sink (a queue), line by line, in a thread; None at its end."""
    def pump():
        for line in proc.stdout:
            sink.put(line)
        sink.put(None)
    threading.Thread(target=pump, daemon=True).start()


def _get(lines, deadline, what):
    try:
        return lines.get(timeout=max(deadline - time.monotonic(), 1))
    except queue.Empty:
        raise Failed(f"no end of {what} in time") from None


def _rest(hosts, host, lines, wait=20):
    """The last 50 lines host printed until it ended (killed if still running after `wait` s)."""
    out, killed = [], False
    deadline = time.monotonic() + wait
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
        except queue.Empty:
            if killed:
                return "".join(out[-50:]) + "(its output did not end)\n"
            hosts.kill(host)
            killed, deadline = True, time.monotonic() + wait
            continue
        if line is None:
            return "".join(out[-50:])
        out.append(line)


def _kill_at_step(hosts, ck, victim, step=3, unplug=False, **extra):
    """Trains on 2 x 4, checkpointing every step, and kills every process of host `victim`
    when it announces `step` (`unplug`: takes its link down instead, so that no connection
    is closed). The other host must then fail within 60 s, naming the lost host (address
    or task); returns (seconds it took, the line naming the lost host)."""
    procs = torchrun(hosts, 2, 1, "spmd.py", "--steps", "6", "--ckpt", ck, "--announce", devices=4,
                     **extra)
    survivor, lost = 1 - victim, hosts.address[victim]
    lines = [queue.Queue(), queue.Queue()]
    for p, sink in zip(procs, lines):
        _lines(p, sink)
    deadline = time.monotonic() + TIMEOUT
    seen = []
    while True:
        line = _get(lines[victim], deadline, f"host {victim}'s steps")
        if line is None:
            raise Failed(f"host {victim} ended before step {step}:\n" + "".join(seen[-50:]) +
                         f"\nhost {survivor} meanwhile:\n" + _rest(hosts, survivor, lines[survivor]))
        if {"step": step} in tagged(line, "STEP"):
            break
        seen.append(line)
    hosts.unplug(victim) if unplug else hosts.kill(victim)
    killed = time.monotonic()
    try:
        procs[survivor].wait(timeout=90)
    except subprocess.TimeoutExpired:
        raise Failed(f"host {survivor} still runs 90 s after host {victim} was killed") from None
    took = time.monotonic() - killed
    if unplug:  # the unplugged host's processes are ended, its link comes back
        hosts.kill(victim)
        hosts.unplug(victim, False)
    out = []
    while (line := _get(lines[survivor], time.monotonic() + 30, f"host {survivor}'s output")) is not None:
        out.append(line)
    out = "".join(out)
    if procs[survivor].returncode == 0 or took > 60:
        raise Failed(f"host {survivor} exited {procs[survivor].returncode} {took:.0f} s after host "
                     f"{victim} was killed:\n{out[-3000:]}")
    # gloo names the address; the coordination service the task; a survivor that learns of
    # the coordinator's (host 0's) loss from its own poll of the coordination service first
    # names that service (which of the three comes first depends on the machine's load)
    rows = out.splitlines()
    named = [row for row, after in zip(rows, rows[1:] + [""]) if lost in row or
             ("stopped sending heartbeats" in row and after.strip() == str(victim)) or
             (victim == 0 and "remote target coordination_service" in row)]
    if not named:
        raise Failed(f"host {survivor}'s error names no lost peer ({lost}):\n{out[-3000:]}")
    return took, named[0].strip()[:200]


def faults(hosts, state):
    ref = _reference(hosts, state)
    ck = os.path.join(state["tmp"], "faults")
    took, named = _kill_at_step(hosts, ck, victim=1)
    again = _result(_wait(torchrun(hosts, 2, 1, "spmd.py", "--steps", "6", "--ckpt", ck, devices=4))[0])
    # the kill races with step 3 (announced before it runs): on a loaded machine the victim
    # may finish the step and its checkpoint first; either last checkpoint is a right one
    if again["restored"] not in (2, 3):
        raise Failed(f"the restarted job resumed from step {again['restored']}, not 2 (or 3)")
    _agree("restarted from the last checkpoint vs never interrupted", again["fsdp"],
           ref["fsdp"][again["restored"] + 1:])
    return (f"host 1 killed at step 3: host 0 failed after {took:.0f} s with '{named}'; "
            f"restarted from step {again['restored']}, losses = the uninterrupted run's")


def coordinator_lost(hosts, state):
    took, named = _kill_at_step(hosts, os.path.join(state["tmp"], "coordinator_lost"), victim=0)
    return f"host 0 (the coordinator's) killed at step 3: host 1 failed after {took:.0f} s with '{named}'"


def host_vanishes(hosts, state):
    took, named = _kill_at_step(hosts, os.path.join(state["tmp"], "host_vanishes"), victim=1,
                                unplug=True, DIST_SERVICE_HEARTBEAT_INTERVAL_IN_SEC=20)
    return f"host 1's link taken down at step 3: host 0 failed after {took:.0f} s with '{named}'"


def early_return(hosts, state):
    """Rank 1's program ends while rank 0 waits for it in a collective: rank 0 fails within
    30 s of it, naming process 1; neither host hangs."""
    procs = torchrun(hosts, 2, 1, "early_return.py")
    outs, ended = [], []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=TIMEOUT)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
                reap(q)
            raise Failed(f"a host still ran {TIMEOUT:g} s after rank 1 returned") from None
        ended.append(time.time())
    returned = tagged(outs[1], "RETURNED")
    if len(returned) != 1:
        raise Failed(f"rank 1 did not return:\n{outs[1][-3000:]}")
    took = ended[0] - returned[0]["at"]
    named = [row for row in outs[0].splitlines() if "PeerLeft" in row and "process 1 ended" in row]
    if procs[0].returncode == 0 or not named or took > 30:
        raise Failed(f"host 0 exited {procs[0].returncode} {took:.0f} s after rank 1 returned:\n"
                     f"{outs[0][-3000:]}")
    return f"rank 0 failed {took:.0f} s after rank 1 returned, with '{named[0].strip()[:200]}'"


SCENARIOS = {"data_parallel": data_parallel, "spmd": spmd, "slow_link": slow_link, "faults": faults,
             "coordinator_lost": coordinator_lost, "host_vanishes": host_vanishes,
             "early_return": early_return}


def main(names):
    reason = hosts_module.unavailable()
    if reason:
        print(f"SKIP multihost: {reason}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: clean up, then leave
    failed = 0
    with tempfile.TemporaryDirectory(prefix="multihost-") as tmp:
        state = {"tmp": tmp}  # what scenarios share (the uninterrupted run's losses)
        for name in names or SCENARIOS:
            start = time.monotonic()
            try:
                # hosts made anew for each scenario: no process, port or connection state
                # (a killed host's connections in TIME_WAIT) carries over to the next
                with Hosts() as hosts:
                    detail = SCENARIOS[name](hosts, state)
                print(f"PASS {name} ({time.monotonic() - start:.0f} s): {detail}", flush=True)
            except Exception as e:  # noqa: BLE001  (any error fails the scenario, not the rest)
                failed += 1
                why = e if isinstance(e, Failed) else "".join(traceback.format_exception(e))
                print(f"FAIL {name} ({time.monotonic() - start:.0f} s): {why}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
