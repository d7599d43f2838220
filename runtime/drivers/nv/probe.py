"""Is an NVIDIA GPU present? A probe that opens nothing and imports no bindings (the core's
registry, runtime/hcq/registry.py, asks it)."""
from __future__ import annotations

import re

from runtime.hcq.seam import OSSeam


def count_gpus(seam: OSSeam) -> int:
    """How many /dev/nvidiaN nodes there are, when the control and UVM nodes exist too."""
    if not (seam.exists("/dev/nvidiactl") and seam.exists("/dev/nvidia-uvm")):
        return 0
    try:
        return sum(1 for f in seam.listdir("/dev") if re.fullmatch(r"nvidia\d+", f))
    except OSError:
        return 0
