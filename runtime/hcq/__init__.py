"""runtime.hcq: a hardware command-queue GPU runtime.

```python
from runtime.hcq import open_device
dev = open_device()            # best present: "nv:0", "amd:0", else the mock "mock-amd:0"
buf = dev.alloc(4096); dev.copyin(buf, b"..."); dev.synchronize(); dev.close()
```

The core (this package) is vendor-neutral and never imports generated bindings; `AMDDevice` and
`NVDevice` are imported from their drivers on first use.
"""
from __future__ import annotations

from typing import Any

from runtime.hcq.device import Device, parse_device_name
from runtime.hcq.errors import (DeviceClosed, DeviceFault, DeviceNotFound, HCQError, HCQMemoryError,
                                IoctlError, ProgramError, QueueError, SignalTimeout)
from runtime.hcq.graph import Graph, Launch
from runtime.hcq.memory import Buffer, BufferSpec, MemKind
from runtime.hcq.program import ArgSlot, KernArgs, Program
from runtime.hcq.queue import HWQueue, Var, VarExpr
from runtime.hcq.seam import HostMapping, OSSeam, RealOS
from runtime.hcq.signal import Signal

__all__ = [
    "AMDDevice", "ArgSlot", "Buffer", "BufferSpec", "Device", "DeviceClosed", "DeviceFault",
    "DeviceNotFound", "Graph", "HCQError", "HCQMemoryError", "HWQueue", "HostMapping", "IoctlError",
    "KernArgs", "Launch", "MemKind", "NVDevice", "OSSeam", "Program", "ProgramError", "QueueError",
    "RealOS", "Signal", "SignalTimeout", "Var", "VarExpr", "open_device", "present_devices",
]

_DRIVERS = {
    "AMDDevice": ("runtime.drivers.amd.device", "AMDDevice"),
    "NVDevice": ("runtime.drivers.nv.device", "NVDevice"),
}


def __getattr__(name: str) -> Any:
    """Lazy driver classes: importing the core does not import vendor bindings."""
    if name in _DRIVERS:
        module, attr = _DRIVERS[name]
        import importlib
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and (module.startswith(e.name) or e.name.startswith(module)):
                raise DeviceNotFound(f"{name}: its driver ({module}) is not installed in this "
                                     "tree") from e
            raise
        return getattr(mod, attr)
    raise AttributeError(f"module 'runtime.hcq' has no attribute {name!r}")


def open_device(name: str | None = None, **kwargs: Any) -> Device:
    """Opens a device by name ("amd:0", "nv:0", "mock-amd:0"), or the best one present: an NVIDIA
    GPU, then an AMD GPU (KFD), else the mock AMD GPU. Keyword arguments go to the device
    constructor."""
    if name is None:
        present = present_devices()
        return open_device(present[0] if present else "mock-amd:0", **kwargs)
    if parse_device_name(name).vendor == "nv":
        return __getattr__("NVDevice")(name, **kwargs)
    return __getattr__("AMDDevice")(name, **kwargs)


def present_devices() -> list[str]:
    """Names of the real GPUs on this machine, NVIDIA first, found by cheap probes that open
    nothing: device nodes, the KFD topology, and an importable driver. The mocks ("mock-amd:N",
    "mock-nv:N") are always available and not listed."""
    import importlib.util
    import re
    seam = RealOS()
    names: list[str] = []
    if seam.exists("/dev/nvidiactl") and seam.exists("/dev/nvidia-uvm") and \
            importlib.util.find_spec("runtime.drivers.nv.device") is not None:
        try:
            minors = sorted(int(m.group(1)) for f in seam.listdir("/dev")
                            if (m := re.fullmatch(r"nvidia(\d+)", f)))
        except OSError:
            minors = []
        names += [f"nv:{i}" for i in range(len(minors))]
    if seam.exists("/dev/kfd"):
        topo = "/sys/devices/virtual/kfd/kfd/topology/nodes"
        try:
            gpus = sum(1 for node in seam.listdir(topo)
                       if int(seam.read_sysfs(f"{topo}/{node}/gpu_id").strip() or 0))
        except (OSError, ValueError):
            gpus = 0
        names += [f"amd:{i}" for i in range(gpus)]
    return names
