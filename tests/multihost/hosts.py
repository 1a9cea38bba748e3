"""Hosts simulated on this machine: one network namespace each, joined by a private link
(a veth pair) with an address of their own, the first host's being the coordinator's.
Needs root and iproute2 (`ip`); `tc` for slowing the link."""
import os
import shutil
import signal
import subprocess
import sys

SUBNET = "10.231.7"  # the link's addresses exist only inside the namespaces made here


def unavailable():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` (iproute2) is missing"
    probe = f"txprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


class Hosts:
    """Two hosts, `ns[i]` at `address[i]`, interface `link` in each; a context manager that
    removes them (and every process started in them) on leaving, failure or not."""

    def __init__(self, count=2):
        assert count == 2, "a veth pair joins two hosts"
        tag = os.getpid()
        self.ns = [f"txh{tag}-{i}" for i in range(count)]
        self.address = [f"{SUBNET}.{i + 1}" for i in range(count)]
        self.link = "txlink"
        self._procs = []

    def __enter__(self):
        try:
            for ns in self.ns:
                _ip("netns", "add", ns)
            _ip("link", "add", "txa", "netns", self.ns[0], "type", "veth", "peer", "name", "txb",
                "netns", self.ns[1])
            for ns, end, address in zip(self.ns, ("txa", "txb"), self.address):
                _ip("-n", ns, "link", "set", end, "name", self.link)
                _ip("-n", ns, "addr", "add", f"{address}/24", "dev", self.link)
                _ip("-n", ns, "link", "set", self.link, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for host in range(len(self.ns)):
            self.kill(host)
        for p in self._procs:
            reap(p)
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

    def start(self, host, argv, env):
        """Runs argv in host's namespace; stdout and stderr together, as text."""
        p = subprocess.Popen(["ip", "netns", "exec", self.ns[host], *argv], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._procs.append(p)
        return p

    def free_port(self, host):
        """A port free at host's address now, asked of the namespace's own kernel."""
        code = ("import socket; s = socket.socket(); s.bind(('%s', 0)); print(s.getsockname()[1])"
                % self.address[host])
        out = subprocess.run(["ip", "netns", "exec", self.ns[host], sys.executable, "-c", code],
                             capture_output=True, text=True, check=True, timeout=60)
        return int(out.stdout)

    def slow(self, on=True):
        """Slows the link on both sides: netem's delay of 20 ms per packet or, where the
        kernel has no netem (gVisor's netstack has none), a token bucket of 4 Mbit/s.
        Returns what it did; `on=False` takes it away."""
        for ns in self.ns:
            base = ["tc", "-n", ns, "qdisc"]
            if not on:
                subprocess.run([*base, "del", "dev", self.link, "root"], check=True,
                               capture_output=True, text=True, timeout=30)
                continue
            for how in (["netem", "delay", "20ms"], ["tbf", "rate", "4mbit", "burst", "16kbit", "latency", "200ms"]):
                done = subprocess.run([*base, "add", "dev", self.link, "root", *how],
                                      capture_output=True, text=True, timeout=30)
                if done.returncode == 0:
                    break
                failure = done.stderr.strip()
            else:
                raise RuntimeError(f"tc could not slow the link: {failure}")
        return None if not on else " ".join(how) + ("" if how[0] == "netem" else
                                                     f" (netem refused: {failure})")

    def unplug(self, host, down=True):
        """Takes host's link down (`down=False`: up again): its peers' packets go nowhere,
        no connection is closed."""
        _ip("-n", self.ns[host], "link", "set", self.link, "down" if down else "up")

    def kill(self, host):
        """SIGKILL to every process of host (all that live in its namespace: a launcher's
        workers run in sessions of their own)."""
        pids = subprocess.run(["ip", "netns", "pids", self.ns[host]], capture_output=True,
                              text=True, timeout=30).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def reap(p):
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


