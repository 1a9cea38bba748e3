"""The TPU host this process runs on: its chips, counted without starting the runtime (clients
such as Lightning call `num_available_devices()` to decide whether XLA is usable), and its
slice's topology, from the Cloud TPU metadata server (`tpu-env`, `worker-network-endpoints`)
or, with TPU_SKIP_MDS_QUERY set, from the environment.

`configure_topology(local_rank, local_world_size)` sets libtpu's variables for one of several
processes on a host, one chip each (TPU_VISIBLE_CHIPS, TPU_PROCESS_BOUNDS,
TPU_PROCESS_ADDRESSES, ...): jax's TPU client reads them as libtpu does. Variables already set
are kept.
"""
import functools
import glob
import operator
import os
import re
import urllib.request
from typing import List, NamedTuple, Optional

import torch_xla.core.xla_env_vars as xenv

_GCE_METADATA_ROOT_URL = "http://metadata.google.internal/computeMetadata/v1"
_GOOGLE_PCI_VENDOR_ID = "0x1ae0"
# PCI device ids of TPU chips (v2/v3, v4, v5e, v6e, two test parts, 7x), and the generation of
# the released ones.
_TPU_PCI_DEVICE_IDS = ["0x0027", "0x005e", "0x0063", "0x006f", "0x0056", "0x0062", "0x0076"]
_PCI_GENERATIONS = {"0x0027": 3, "0x005e": 4, "0x0063": 5, "0x006f": 6, "0x0076": 7}
# Hosts of the slices of TPU v2 and v3, whose metadata has no process bounds.
_ACCELERATOR_TYPE_TO_HOST_BOUNDS = {
    "v2-8": "1,1,1", "v2-32": "2,2,1", "v2-128": "4,4,1", "v2-256": "4,8,1", "v2-512": "8,8,1",
    "v3-8": "1,1,1", "v3-32": "2,2,1", "v3-64": "2,4,1", "v3-128": "4,4,1", "v3-256": "4,8,1",
    "v3-512": "8,8,1", "v3-1024": "8,16,1", "v3-2048": "16,16,1",
}


class MeshShape(NamedTuple):
    """A TPU mesh's shape ('2,2,1')."""
    x: int
    y: int
    z: int

    @classmethod
    def from_string(cls, mesh: str) -> "MeshShape":
        dims = tuple(int(d) for d in mesh.split(","))
        if len(dims) != 3:
            raise ValueError(f"Mesh shape '{mesh}' should be length 3")
        return cls(*dims)

    @property
    def size(self) -> int:
        return functools.reduce(operator.mul, self)

    def __mul__(self, other):
        return MeshShape(*(a * b for a, b in zip(self, other)))


def _get_metadata(key: str) -> str:
    """Attribute `key` of this TPU VM from the metadata server (urllib's errors if none)."""
    request = urllib.request.Request(f"{_GCE_METADATA_ROOT_URL}/instance/attributes/{key}",
                                     headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def _parse_tpu_env(text: str) -> dict:
    """`tpu-env`'s lines, `KEY: 'value'`, as a dict of strings."""
    env = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            env[key.strip()] = value.strip().strip("'\"")
    return env


def _using_env_vars() -> bool:
    return bool(os.environ.get(xenv.TPU_SKIP_MDS_QUERY))


def build_tpu_env_from_vars() -> dict:
    """`tpu-env` as the environment gives it (TPU_SKIP_MDS_QUERY): the host bounds and chips
    per host stand for the process bounds and chips per process where those are not set."""
    env = os.environ
    return {
        xenv.ACCELERATOR_TYPE: env.get(xenv.TPU_ACCELERATOR_TYPE),
        xenv.TPU_PROCESS_BOUNDS: env.get(xenv.TPU_PROCESS_BOUNDS, env.get(xenv.TPU_HOST_BOUNDS)),
        xenv.TPU_CHIPS_PER_PROCESS_BOUNDS: env.get(xenv.TPU_CHIPS_PER_PROCESS_BOUNDS,
                                                   env.get(xenv.TPU_CHIPS_PER_HOST_BOUNDS)),
        xenv.WORKER_ID: env.get(xenv.CLOUD_TPU_TASK_ID, env.get(xenv.TPU_WORKER_ID)),
    }


def get_tpu_env() -> dict:
    """This TPU VM's `tpu-env` (ACCELERATOR_TYPE, TPU_PROCESS_BOUNDS, WORKER_ID, ...)."""
    if _using_env_vars():
        return build_tpu_env_from_vars()
    return _parse_tpu_env(_get_metadata("tpu-env"))


def process_bounds_size() -> Optional[int]:
    """The processes over every host of the slice (TPU_PROCESS_BOUNDS), or None if unknown."""
    bounds = os.environ.get(xenv.TPU_PROCESS_BOUNDS)
    return MeshShape.from_string(bounds).size if bounds else None


def _pci_tpu_device_ids() -> List[str]:
    found = []
    for vendor_path in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            with open(vendor_path) as f:
                if f.read().strip() != _GOOGLE_PCI_VENDOR_ID:
                    continue
            with open(os.path.join(os.path.dirname(vendor_path), "device")) as f:
                device_id = f.read().strip()
        except OSError:
            continue
        if device_id in _TPU_PCI_DEVICE_IDS:
            found.append(device_id)
    return found


def num_available_chips() -> int:
    """TPU chips attached to this host through PCI."""
    return len(_pci_tpu_device_ids())


def _accelerator_type() -> str:
    """The slice's accelerator type ('v4-8'): TPU_ACCELERATOR_TYPE or ACCELERATOR_TYPE where
    set, else the metadata's; '' where neither says."""
    named = os.environ.get(xenv.TPU_ACCELERATOR_TYPE) or os.environ.get(xenv.ACCELERATOR_TYPE)
    if named:
        return named
    try:
        return get_tpu_env().get(xenv.ACCELERATOR_TYPE) or ""
    except OSError:  # no metadata server: not a Cloud TPU VM
        return ""


def version() -> int:
    """The TPU generation of this host: from its accelerator type ('v4-8', 'v5litepod-16'),
    else from the PCI ids of its chips. Raises EnvironmentError on a host without TPUs."""
    accelerator = _accelerator_type()
    if accelerator:
        match = re.match(r"^(?:v|tpu)(\d)[A-Za-z]{0,7}-(\d+)$", accelerator)
        if not match:
            raise EnvironmentError(f"Failed to parse the TPU version from '{accelerator}'")
        return int(match.group(1))
    generations = [_PCI_GENERATIONS[d] for d in _pci_tpu_device_ids() if d in _PCI_GENERATIONS]
    if not generations:
        raise EnvironmentError("no TPU on this host: no accelerator type and no TPU chip on PCI")
    return max(generations)


def get_tpu_type() -> str:
    """The TPU type of the accelerator type ('v6e' of 'v6e-8')."""
    accelerator = get_tpu_env()[xenv.ACCELERATOR_TYPE]
    return accelerator.split("-", 1)[0] if "-" in accelerator else accelerator


def num_logical_cores_per_chip() -> int:
    """XLA devices per chip: 2 for TPU v2/v3, 1 after."""
    return 2 if version() <= 3 else 1


def num_available_devices() -> int:
    """XLA TPU devices of this host (0 without TPU chips); starts no runtime."""
    chips = num_available_chips()
    return chips * num_logical_cores_per_chip() if chips else 0


def num_local_processes() -> int:
    """Processes to start on this host: one per chip, no more than the slice's processes."""
    chips, total = num_available_chips(), process_bounds_size()
    return min(chips, total) if total else chips


def task_id() -> Optional[int]:
    """This process's index among every TPU worker process (CLOUD_TPU_TASK_ID), if set."""
    value = os.environ.get(xenv.CLOUD_TPU_TASK_ID)
    return None if value is None else int(value)


def worker_id() -> int:
    """This TPU host's index in its slice."""
    return int(get_tpu_env()[xenv.WORKER_ID])


def get_worker_ips() -> List[str]:
    """The slice's hosts in worker order (['localhost'] for one host): TPU_WORKER_HOSTNAMES
    with TPU_SKIP_MDS_QUERY, else the metadata's `worker-network-endpoints`
    ('hostname:uid:ip,...')."""
    if _using_env_vars():
        hosts = os.environ.get(xenv.TPU_WORKER_HOSTNAMES, "").split(",")
    else:
        hosts = [w.split(":")[2] for w in _get_metadata("worker-network-endpoints").split(",")]
    return hosts if len(hosts) > 1 else ["localhost"]


def num_tpu_workers() -> int:
    return len(get_worker_ips())


def num_expected_global_devices() -> int:
    """The devices of the slice, if every host has this one's."""
    return num_available_devices() * num_tpu_workers()


def configure_one_chip_topology() -> None:
    """libtpu's variables for one process using one chip (those not set already)."""
    os.environ.setdefault(xenv.TPU_VISIBLE_CHIPS, "0")
    os.environ.setdefault(xenv.TPU_CHIPS_PER_PROCESS_BOUNDS, "1,1,1")
    os.environ.setdefault(xenv.TPU_PROCESS_BOUNDS, "1,1,1")


def configure_topology(local_rank: int, local_world_size: int, base_port: int = 8476) -> None:
    """libtpu's variables for process `local_rank` of `local_world_size` on this host, one
    chip each, before any XLA device is used: every host runs as many processes on ports
    `base_port`, `base_port + 1`, ... (those not set already)."""
    env = get_tpu_env()
    generation = version()
    if generation >= 4:
        host_bounds = MeshShape.from_string(env[xenv.TPU_PROCESS_BOUNDS])
        chips_per_host = MeshShape.from_string(env[xenv.TPU_CHIPS_PER_PROCESS_BOUNDS])
    else:  # v2/v3 metadata has no bounds: 2x2 chips per host
        host_bounds = MeshShape.from_string(
            _ACCELERATOR_TYPE_TO_HOST_BOUNDS[env[xenv.ACCELERATOR_TYPE]])
        chips_per_host = MeshShape(2, 2, 1)
    bounds = ",".join(str(d) for d in host_bounds * chips_per_host)  # one chip per process
    if generation == 7:
        bounds += ",2"  # 7x: two cores of a chip are a dimension of their own
    os.environ.setdefault(xenv.TPU_CHIPS_PER_PROCESS_BOUNDS, "1,1,1")
    os.environ.setdefault(xenv.TPU_PROCESS_BOUNDS, bounds)
    os.environ.setdefault(xenv.CLOUD_TPU_TASK_ID,
                          str(int(env[xenv.WORKER_ID]) * local_world_size + local_rank))
    ports = range(base_port, base_port + local_world_size)
    os.environ.setdefault(xenv.TPU_PROCESS_ADDRESSES,
                          ",".join(f"{ip}:{port}" for ip in get_worker_ips() for port in ports))
    os.environ.setdefault(xenv.TPU_VISIBLE_CHIPS, str(local_rank))
    os.environ.setdefault(xenv.TPU_PROCESS_PORT, str(ports[local_rank]))
