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

import os
from typing import TYPE_CHECKING, Any

from runtime.hcq import registry
from runtime.hcq.compiler import CompileCache, Compiler
from runtime.hcq.device import (Device, DeviceName, DeviceProperties, MemInfo,
                                parse_device_name)
from runtime.hcq.errors import (ArgumentError, DeviceClosed, DeviceFault, DeviceForked,
                                DeviceNotFound, HCQError,
                                HCQMemoryError, IoctlError, ProgramError, QueueError,
                                SignalTimeout)
from runtime.hcq.device import PendingCopy
from runtime.hcq.graph import Graph, GraphCopy, GraphWait, Launch
from runtime.hcq.group import TransferPath, TransferReport, open_devices, transfer, wait_all
from runtime.hcq.memory import Buffer, BufferSpec, MemKind
from runtime.hcq.profiler import KernelStats, Profile, TraceEvent, profile
from runtime.hcq.program import ArgSlot, KernArgs, Program
from runtime.hcq.queue import HWQueue, Var, VarExpr
from runtime.hcq.registry import present_devices
from runtime.hcq.seam import HostMapping, OSSeam, RealOS
from runtime.hcq.signal import Signal
from runtime.hcq.stream import Event, Stream

if TYPE_CHECKING:  # what the lazy __getattr__ below returns, for type checkers and IDEs
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.nv.device import NVDevice

__all__ = [
    "AMDDevice", "ArgSlot", "ArgumentError", "Buffer", "BufferSpec", "CompileCache", "Compiler",
    "Device", "DeviceClosed", "DeviceFault", "DeviceForked", "DeviceNotFound",
    "DeviceProperties", "Event", "Graph", "GraphCopy", "GraphWait", "HCQError", "HCQMemoryError",
    "HWQueue", "HostMapping", "IoctlError", "KernArgs", "KernelStats", "Launch", "MemInfo",
    "MemKind", "NVDevice", "OSSeam", "PendingCopy", "Profile", "Program", "ProgramError",
    "QueueError", "RealOS", "Signal", "SignalTimeout", "Stream", "TraceEvent", "TransferPath",
    "TransferReport", "Var", "VarExpr", "open_device", "open_devices", "present_devices",
    "profile", "transfer", "wait_all",
]

_DRIVERS = {"AMDDevice": "amd", "NVDevice": "nv"}


def __getattr__(name: str) -> Any:
    """Lazy driver classes: importing the core does not import vendor bindings."""
    if name in _DRIVERS:
        return registry.device_class(_DRIVERS[name])
    raise AttributeError(f"module 'runtime.hcq' has no attribute {name!r}")


#: environment variable naming the device `open_device()` opens when called without a name
DEVICE_ENV = "HCQ_DEVICE"


def open_device(name: str | None = None, **kwargs: Any) -> Device:
    """Opens a device by name ("amd:0", "nv:0", "mock-amd:0", "mock-nv"), else the one
    $HCQ_DEVICE names, else the best one present: an NVIDIA GPU, then an AMD GPU (KFD), else the
    mock AMD GPU. Keyword arguments go to the device constructor. A name that matches no device
    raises `DeviceNotFound` listing the devices that exist."""
    if name is None:
        env = os.environ.get(DEVICE_ENV, "").strip()
        if env:
            return registry.device_class(_check_env_device(env).vendor)(env, **kwargs)
        present = present_devices()
        return open_device(present[0] if present else "mock-amd:0", **kwargs)
    return registry.device_class(parse_device_name(name).vendor)(name, **kwargs)


def _check_env_device(name: str) -> DeviceName:
    """$HCQ_DEVICE parsed and checked against the GPUs present (the mocks always exist)."""
    present = present_devices()
    existing = ", ".join(present + ["mock-amd:N", "mock-nv:N"])
    try:
        parsed = parse_device_name(name)
    except DeviceNotFound as e:
        raise DeviceNotFound(f"{DEVICE_ENV}={name!r}: {e}; devices here: {existing}") from None
    if not parsed.mock and f"{parsed.vendor}:{parsed.index}" not in present:
        raise DeviceNotFound(f"{DEVICE_ENV}={name!r} matches no device on this machine; devices "
                             f"here: {existing} (unset {DEVICE_ENV} to open the best present)")
    return parsed
