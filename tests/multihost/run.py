"""Runs the multi-host scenarios on two hosts simulated as network namespaces (`hosts`),
each scenario printing one PASS or FAIL line; exits 1 if any failed, 0 if all passed.
`python -m tests.multihost.run [NAME ...]` runs the named scenarios only."""
import json
import math
import os
import sys
import tempfile
import time

from tests.multihost import hosts as hosts_module
from tests.multihost.hosts import Hosts, reap

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


def results(out):
    """The RESULT lines' JSON objects of a run's output."""
    return [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("RESULT ")]


def close(a, b, tol=1e-5):
    """Whether two lists of losses agree (same length, each within relative `tol`)."""
    return len(a) == len(b) and all(math.isclose(x, y, rel_tol=tol, abs_tol=1e-7) for x, y in zip(a, b))


def data_parallel(hosts):
    two = _wait(torchrun(hosts, 2, 4, "data_parallel.py"))
    layouts = [json.loads(line.split(" ", 1)[1]) for out in two for line in out.splitlines()
               if line.startswith("LAYOUT ")]
    if len(layouts) != 8 or any(l["seen"] != l["wanted"] for l in layouts):
        raise Failed(f"layouts: {layouts}")
    one = _wait(torchrun(hosts, 1, 8, "data_parallel.py"))
    (a,), (b,) = results(two[0]), results(one[0])
    for kind in ("xm", "ddp"):
        if not close(a[kind], b[kind]):
            raise Failed(f"{kind} losses differ: 2x4 {a[kind]} vs 1x8 {b[kind]}")
    return f"8 processes report their layout; xm and DDP losses of 2x4 = 1x8: {a['ddp']}"


SCENARIOS = {"data_parallel": data_parallel}


def main(names):
    reason = hosts_module.unavailable()
    if reason:
        print(f"SKIP multihost: {reason}")
        return 0
    failed = 0
    with Hosts() as hosts:
        for name in names or SCENARIOS:
            start = time.monotonic()
            try:
                detail = SCENARIOS[name](hosts)
                print(f"PASS {name} ({time.monotonic() - start:.0f} s): {detail}", flush=True)
            except Failed as e:
                failed += 1
                print(f"FAIL {name} ({time.monotonic() - start:.0f} s): {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
