"""The TPU chips of this host, counted without starting the runtime (clients such as
Lightning call `num_available_devices()` to decide whether XLA is usable)."""
import glob
import os
import re

_GOOGLE_PCI_VENDOR_ID = "0x1ae0"
# PCI device ids of TPU chips and their generation.
_TPU_PCI_DEVICE_IDS = {"0x0027": 3, "0x005e": 4, "0x0063": 5, "0x006f": 6, "0x0076": 7}


def _pci_tpu_generations():
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
            found.append(_TPU_PCI_DEVICE_IDS[device_id])
    return found


def num_available_chips() -> int:
    """TPU chips attached to this host through PCI."""
    return len(_pci_tpu_generations())


def version() -> int:
    """The TPU generation of this host (from TPU_ACCELERATOR_TYPE, e.g. 'v4-8', else from the
    PCI ids of its chips). Raises EnvironmentError on a host without TPUs."""
    accelerator = os.environ.get("TPU_ACCELERATOR_TYPE") or os.environ.get("ACCELERATOR_TYPE", "")
    match = re.match(r"v(\d+)", accelerator)
    if match:
        return int(match.group(1))
    generations = _pci_tpu_generations()
    if not generations:
        raise EnvironmentError("no TPU on this host: no TPU_ACCELERATOR_TYPE and no TPU chip on PCI")
    return max(generations)


def num_logical_cores_per_chip() -> int:
    """XLA devices per chip: 2 for TPU v2/v3, 1 after."""
    return 2 if version() <= 3 else 1


def num_available_devices() -> int:
    """XLA TPU devices of this host (0 without TPU chips)."""
    chips = num_available_chips()
    return chips * num_logical_cores_per_chip() if chips else 0
