"""The core's registry of drivers: for each vendor, where its device class lives, the presence
probe it provides, and the mock machine that stands in for its hardware.

The real drivers never import the mocks: a "mock-nv:N" or "mock-amd:N" device asks this registry for
its OS seam (`mock_seam`, a lease on the vendor's mock machine), and `present_devices` asks each driver's own probe module (which imports
no bindings and opens nothing). Entries are "module:attribute" strings so that importing the core
imports no driver.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from runtime.hcq.errors import DeviceNotFound
from runtime.hcq.seam import OSSeam, RealOS

if TYPE_CHECKING:
    from runtime.hcq.device import Device


@dataclass(frozen=True)
class Backend:
    """One vendor's driver, probe and mock."""

    vendor: str          # the device-name prefix: "nv" for "nv:0" and "mock-nv:0"
    device: str          # "module:Class", the Device subclass
    probe: str           # "module:function", (seam) -> number of GPUs present
    mock: str            # "module:function", (vendor) -> (mock machine's OS seam, release)


#: preference order: open_device() without a name takes the first vendor with a GPU present
BACKENDS: tuple[Backend, ...] = (
    Backend("nv", "runtime.drivers.nv.device:NVDevice", "runtime.drivers.nv.probe:count_gpus",
            "runtime.drivers.mock.machine:lease"),
    Backend("amd", "runtime.drivers.amd.device:AMDDevice", "runtime.drivers.amd.probe:count_gpus",
            "runtime.drivers.mock.machine:lease"),
)


def backend(vendor: str) -> Backend:
    """The registry entry of `vendor` ("nv", "amd")."""
    for b in BACKENDS:
        if b.vendor == vendor:
            return b
    raise DeviceNotFound(f"no driver registered for {vendor!r} (registered: "
                         f"{', '.join(b.vendor for b in BACKENDS)})")


def _resolve(ref: str, what: str) -> Any:
    module, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module.startswith(e.name) or e.name.startswith(module)):
            raise DeviceNotFound(f"{what}: {module} is not installed in this tree") from e
        raise
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def device_class(vendor: str) -> "type[Device]":
    """The Device subclass of `vendor` (imported on first use)."""
    b = backend(vendor)
    cls: type[Device] = _resolve(b.device, f"the {vendor} driver")
    return cls


def mock_seam(vendor: str) -> tuple[OSSeam, Callable[[], None]]:
    """The mock machine of `vendor`'s GPUs, as its OS seam, and the function that gives the lease
    on it back (runtime/drivers/mock/machine.py: one machine per vendor while devices use it)."""
    lease: Callable[[str], tuple[OSSeam, Callable[[], None]]] = _resolve(
        backend(vendor).mock, f"the {vendor} mock")
    return lease(vendor)


def present_devices(seam: OSSeam | None = None) -> list[str]:
    """Names of the real GPUs on this machine in preference order, from each driver's probe (cheap:
    device nodes and sysfs, nothing opened). The mocks are always available and not listed."""
    seam = seam or RealOS()
    names: list[str] = []
    for b in BACKENDS:
        try:
            probe: Callable[[OSSeam], int] = _resolve(b.probe, f"the {b.vendor} probe")
        except DeviceNotFound:
            continue  # a driver this tree does not have
        names += [f"{b.vendor}:{i}" for i in range(probe(seam))]
    return names
