"""FSDPv2 over two hosts x 4 devices against one host x 8, in the same run: the llama-style
model of spmd_fsdp.py wrapped in SpmdFullyShardedDataParallel over a global 'fsdp' mesh of
8 devices, launched with torchrun on each host. The hosts are network namespaces on this
machine (tests/multihost/hosts.py: needs root and iproute2), one process each with 4 CPU
devices, gloo between them; the single host is one process with 8.

Besides the step time it reads the compiled step's collectives (the partitioned HLO) and
counts the bytes they move across the host boundary per step, two ways:
  sent_MB      each device exchanges with each other member of a collective's group, as
               a flat collective (gloo's) does: what crosses the boundary;
  required_MB  each host receives each remote piece once (sums pre-reduced on the host):
               what the mesh requires of those collectives at least;
  fsdp_MB      the floor of FSDP itself: each host gathers the other host's part of every
               parameter once and reduce-scatters its gradient once.
Run as root: `python benchmarks/multihost_fsdp.py`."""
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
_OP = re.compile(r"= (.*?) (all-gather|reduce-scatter|all-reduce|all-to-all|collective-permute)"
                 r"(-start)?\(")
_SHAPE = re.compile(r"(\w+)\[([\d,]*)\]")
_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "pred": 1, "s8": 1, "u8": 1}


def _iota(shape, dims, perm):
    ids = np.arange(int(np.prod(dims))).reshape(dims)
    return (ids.transpose(perm) if perm else ids).reshape(shape)


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def _groups(line, n):
    """The device groups of a collective's HLO line, as lists of partition ids (pairs for
    collective-permute), in each of the forms XLA prints them."""
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\](?:<=\[([\d,]+)\](?:T\(([\d,]+)\))?)? \{([^}]*)\}", line)
    if mesh:
        axes = re.findall(r"'(\w+)'=(\d+)", mesh.group(1))
        sizes = [int(k) for _, k in axes]
        ids = _iota(sizes, _ints(mesh.group(2)) if mesh.group(2) else sizes,
                    _ints(mesh.group(3)) if mesh.group(3) else None)
        grouped = [i for i, (name, _) in enumerate(axes) if f"'{name}'" in mesh.group(4)]
        rest = [i for i in range(len(axes)) if i not in grouped]
        size = int(np.prod([sizes[i] for i in grouped]))
        return ids.transpose(rest + grouped).reshape(-1, size).tolist()
    iota = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", line)
    if iota:
        return _iota(_ints(iota.group(1)), _ints(iota.group(2)),
                     _ints(iota.group(3)) if iota.group(3) else None).tolist()
    listed = re.search(r"(?:replica_groups|source_target_pairs)=\{(\{[\d,{}]*\})\}", line)
    if listed:
        return [_ints(g) for g in re.findall(r"\{([\d,]*)\}", listed.group(1))]
    if "replica_groups={}" in line:
        return [list(range(n))]
    raise ValueError(f"no device groups read from: {line[:300]}")


def boundary_bytes(hlo, host_of):
    """(sent, required, required by collective kind) bytes across the host boundary of the
    collectives in `hlo`, where partition i is on host host_of[i]; every collective found
    must be understood."""
    sent = required = 0
    kinds = {}
    n = len(host_of)
    for line in hlo.splitlines():
        m = _OP.search(line)
        if not m:
            continue
        out_bytes = sum(_BYTES[t] * int(np.prod(_ints(d) or [1])) for t, d in _SHAPE.findall(m.group(1)))
        if m.group(3):  # an async start's tuple holds its operands and results: half of it
            out_bytes //= 2
        kind = m.group(2)
        for group in _groups(line, n):
            if kind == "collective-permute":
                src, dst = group
                crossing = out_bytes if host_of[src] != host_of[dst] else 0
                sent, required = sent + crossing, required + crossing
                kinds[kind] = kinds.get(kind, 0) + crossing
                continue
            size = len(group)
            # the piece one member owes another: its shard (all-gather), the other's chunk of
            # its partial sums (reduce-scatter), a chunk of its data (all-to-all), a chunk
            # reduced and then gathered (all-reduce)
            piece = {"all-gather": out_bytes / size, "reduce-scatter": out_bytes,
                     "all-to-all": out_bytes / size, "all-reduce": 2 * out_bytes / size}[kind]
            for host in {host_of[d] for d in group}:
                remote = sum(1 for d in group if host_of[d] != host)
                local = size - remote
                sent += local * remote * piece      # every local member from every remote one
                required += remote * piece          # the host once from every remote member
                kinds[kind] = kinds.get(kind, 0) + remote * piece
    return sent, required, kinds


def worker():
    """One host's process (or the single host's): times the FSDPv2 step, reads its HLO."""
    sys.path.insert(0, HERE)
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch_xla._lazy.runtime import pjrt, runner
    from common import steady_time
    import spmd_fsdp
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n,), ("fsdp",))
    step = spmd_fsdp.ours(mesh)
    seconds = steady_time(step, xm.wait_device_ops, warmup=2, blocks=3, steps_per_block=3)
    hlo = max((e.compiled.as_text() for e in runner.cached_programs()), key=len)
    devices = pjrt.global_devices()
    host_of = [devices[i].process_index for i in mesh.device_ids.flatten()]
    sent, required, kinds = boundary_bytes(hlo, host_of)
    params = sum(p.numel() * p.element_size() for p in spmd_fsdp.Llama().parameters())
    if xr.process_index() == 0:
        print("RESULT", json.dumps({"ms": seconds * 1e3, "sent": sent, "required": required,
                                    "kinds": kinds, "param_bytes": params, "hosts": xr.process_count()}), flush=True)


def main():
    sys.path.insert(0, ROOT)
    from tests.multihost import hosts as hosts_module
    from tests.multihost.run import _result, _wait, torchrun
    from common import report
    reason = hosts_module.unavailable()
    if reason:
        print(f"multihost_fsdp: skipped ({reason})")
        return
    with hosts_module.Hosts() as hosts:
        script = os.path.abspath(__file__)
        two = _result(_wait(torchrun(hosts, 2, 1, script, "--worker", devices=4))[0])
        one = _result(_wait(torchrun(hosts, 1, 1, script, "--worker", devices=8))[0])
    floor = 2 * two["param_bytes"] * (two["hosts"] - 1)  # gather + reduce-scatter, per host pair
    report("multihost_fsdp (2 hosts x 4 vs 1 x 8)", {
        "two_hosts_ms": two["ms"], "one_host_ms": one["ms"], "two/one": two["ms"] / one["ms"],
        "sent_MB": two["sent"] / 1e6, "required_MB": two["required"] / 1e6,
        "fsdp_MB": floor / 1e6, "sent/required": two["sent"] / max(two["required"], 1),
        **{f"required_{k}_MB": v / 1e6 for k, v in sorted(two["kinds"].items())}})


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main()
