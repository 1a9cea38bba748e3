"""SPMD over several processes (hosts on loopback): 2 processes x 4 devices run the same
8-device program as 1 process x 8 and give the same losses."""
import math
import re
import socket

from tests.fresh_process import TIMEOUT, python, start


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(devices, **layout):
    return start("-m", "tests.distributed._spmd_hosts_main", env=dict(layout, CPU_NUM_DEVICES=devices))


def _lines(proc, key):
    """What follows `key` on each line printing it: another library's line, written in pieces
    by a thread of its own (gloo's), may stand unfinished before it on a loaded machine."""
    pattern = re.compile(rf"(?:^|\s){key} (.*)$")
    return [m.group(1) for m in map(pattern.search, proc.stdout_text.splitlines()) if m]


def test_two_processes_of_four_devices_equal_one_of_eight():
    coordinator = f"127.0.0.1:{_free_port()}"
    hosts = [_start(4, TORCH_XLA_COORDINATOR=coordinator, TORCH_XLA_NUM_PROCESSES="2",
                    TORCH_XLA_PROCESS_ID=str(i)) for i in range(2)]
    single = _start(8)
    for proc in hosts + [single]:
        proc.stdout_text, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stdout_text[-2000:] + err[-4000:]
    one = [float(x) for x in _lines(single, "loss")]
    assert len(one) == 4
    for proc in hosts:
        losses = [float(x) for x in _lines(proc, "loss")]
        assert len(losses) == 4 and all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(losses, one)), \
            (losses, one)
        assert math.isclose(float(_lines(proc, "weight")[0]), float(_lines(single, "weight")[0]),
                            rel_tol=1e-6)
    # a manual region's per-shard sums, and padded shards, over the processes as in one
    expected_sums = " ".join(repr(float(sum(range(16 * i, 16 * i + 16)))) for i in range(4))
    assert _lines(single, "manual")[0] == expected_sums
    assert all(_lines(p, "manual")[0] == expected_sums for p in hosts)
    assert _lines(single, "uneven")[0] == "72.0 " + repr([[0.0, 1.0, 2.0]] * 2 + [[3.0, 4.0, 5.0]] * 2
                                                         + [[6.0, 7.0, 8.0]] * 2 + [[]] * 2)
    assert [_lines(p, "uneven")[0] for p in hosts] == [
        "72.0 " + repr([[0.0, 1.0, 2.0]] * 2 + [[3.0, 4.0, 5.0]] * 2),
        "72.0 " + repr([[6.0, 7.0, 8.0]] * 2 + [[]] * 2)]
    # each process holds the shards of its own devices
    assert [_lines(p, "devices")[0] for p in hosts] == ["CPU:0 CPU:1 CPU:2 CPU:3", "CPU:4 CPU:5 CPU:6 CPU:7"]
    assert _lines(single, "devices")[0] == " ".join(f"CPU:{i}" for i in range(8))


def test_importing_torch_xla_starts_no_jax_backend():
    """jax.distributed must join the processes before jax's backend starts: importing
    torch_xla (every lowering module, SPMD) must not start it (no jax array at import)."""
    code = ("import jax._src.xla_bridge as xb, torch_xla, torch_xla.core.xla_model, "
            "torch_xla.distributed.spmd; print(bool(xb._backends))")
    out = python("-c", code)
    assert out.stdout.split() == ["False"], out.stdout + out.stderr[-3000:]
