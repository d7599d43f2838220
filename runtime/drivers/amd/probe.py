"""Is an AMD GPU present? A probe that opens nothing and imports no bindings (the core's registry,
runtime/hcq/registry.py, asks it): the KFD topology's nodes with a GPU id."""
from __future__ import annotations

from runtime.hcq.seam import OSSeam

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"


def count_gpus(seam: OSSeam) -> int:
    """How many KFD topology nodes are GPUs (gpu_id != 0), when /dev/kfd exists."""
    if not seam.exists("/dev/kfd"):
        return 0
    try:
        return sum(1 for node in seam.listdir(TOPOLOGY)
                   if int(seam.read_sysfs(f"{TOPOLOGY}/{node}/gpu_id").strip() or 0))
    except (OSError, ValueError):
        return 0
