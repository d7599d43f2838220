"""PCI devices through VFIO: container, group, device fd, regions, BAR mmap, DMA, interrupts, reset.

The kernel's model (Documentation/driver-api/vfio.rst): a *container* (/dev/vfio/vfio) holds an
IOMMU context; an IOMMU *group* (/dev/vfio/N) is the unit of isolation and joins a container; once a
group is in, the container's IOMMU type is set, and only then does the group hand out *device*
descriptors. A device fd exposes regions (BARs, config space, ...) at offsets reported by
VFIO_DEVICE_GET_REGION_INFO, to be read with pread/pwrite or mapped with mmap, and interrupts that
signal eventfds. Host memory becomes visible to the device by mapping it into the IOMMU.

    container = VfioContainer(seam)
    group = container.group_for(address)           # VFIO_GROUP_SET_CONTAINER (viability checked)
    container.set_iommu()                          # VFIO_SET_IOMMU, type1v2 by default
    dev = group.open_device(address)               # VFIO_GROUP_GET_DEVICE_FD
    ...
    container.close()                              # devices, DMA mappings, groups, then itself

`open_vfio_device(seam, address)` does those steps and returns a device whose `close` releases the
whole chain. Every ioctl goes through the generated bindings' typed requests and the OS seam;
failures raise `IoctlError` naming the request and errno, with advice.
"""
from __future__ import annotations

import ctypes
import errno as E
import os
import time
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from hcq_bindings.linux import pci_regs as R
from hcq_bindings.linux import vfio as V

from runtime.drivers.pci import (PCI_NUM_BARS, SYSFS_IOMMU_GROUPS, SYSFS_PCI_DEVICES, BarInfo,
                                 PCIAddress, PCIDevice, PCIError, iommu_group_devices,
                                 iommu_group_of, sysfs_driver)
from runtime.hcq.errors import DeviceNotFound, HCQError, IoctlError
from runtime.hcq.seam import MAP_SHARED, PROT_READ, PROT_WRITE, HostMapping, OSSeam

CONTAINER_PATH = "/dev/vfio/vfio"
# Drivers under which a group stays viable: they leave DMA ownership to the user
# (driver_managed_dma; drivers/iommu/iommu.c: iommu_group_claim_dma_owner).
DMA_NEUTRAL_DRIVERS = frozenset({"vfio-pci", "pci-stub", "pcieport"})
_INFO_CAP_TTL = 64  # capability chains are short; a longer one is a loop


class InterruptTimeout(HCQError, TimeoutError):
    """No interrupt arrived on an eventfd within the wait's timeout."""


# ---------------------------------------------------------------------------------------- ioctls
_HINTS: Mapping[tuple[str, int], str] = types.MappingProxyType({
    ("VFIO_SET_IOMMU", E.EINVAL):
        "attach a group (VFIO_GROUP_SET_CONTAINER) before setting the IOMMU, and set it only once",
    ("VFIO_SET_IOMMU", E.ENODEV):
        "no IOMMU driver offers this type: load vfio_iommu_type1 and ask VFIO_CHECK_EXTENSION",
    ("VFIO_SET_IOMMU", E.EPERM):
        "the platform has no interrupt remapping: enable it in firmware, or load vfio_iommu_type1 "
        "with allow_unsafe_interrupts=1",
    ("VFIO_GROUP_SET_CONTAINER", E.EBUSY):
        "the group is not viable: every device in it must be bound to vfio-pci (or unbound)",
    ("VFIO_GROUP_SET_CONTAINER", E.EINVAL): "the group already belongs to a container",
    ("VFIO_GROUP_SET_CONTAINER", E.EBADFD): "the descriptor is not a VFIO container",
    ("VFIO_GROUP_GET_DEVICE_FD", E.EINVAL):
        "the group needs a container with an IOMMU first: VFIO_GROUP_SET_CONTAINER, then "
        "VFIO_SET_IOMMU",
    ("VFIO_GROUP_GET_DEVICE_FD", E.ENODEV):
        "the device is not in this group, or is not bound to vfio-pci",
    ("VFIO_GROUP_UNSET_CONTAINER", E.EBUSY): "close the group's device descriptors first",
    ("VFIO_IOMMU_MAP_DMA", E.EEXIST):
        "the IOVA range overlaps an existing mapping: unmap it or choose another IOVA",
    ("VFIO_IOMMU_MAP_DMA", E.EINVAL):
        "vaddr, iova and size must be non-zero multiples of the IOMMU page size, the range must "
        "lie in the IOMMU's IOVA ranges (VFIO_IOMMU_GET_INFO) and READ and/or WRITE must be set",
    ("VFIO_IOMMU_MAP_DMA", E.ENOMEM):
        "pinning the pages failed: raise the locked-memory limit (ulimit -l, RLIMIT_MEMLOCK)",
    ("VFIO_IOMMU_MAP_DMA", E.EFAULT): "vaddr does not point at mapped host memory",
    ("VFIO_IOMMU_MAP_DMA", E.ENOSPC):
        "too many DMA mappings (vfio_iommu_type1's dma_entry_limit): map fewer, larger ranges",
    ("VFIO_IOMMU_UNMAP_DMA", E.EINVAL):
        "with type1v2 an unmap must cover whole mappings and be page aligned",
    ("VFIO_DEVICE_RESET", E.EINVAL): "the device has no reset method (no VFIO_DEVICE_FLAGS_RESET)",
    ("VFIO_DEVICE_SET_IRQS", E.EINVAL):
        "index, start or count outside VFIO_DEVICE_GET_IRQ_INFO's range, a descriptor that is not "
        "an eventfd, or another interrupt mode (INTx, MSI, MSI-X) still enabled: disable it first",
    ("VFIO_DEVICE_SET_IRQS", E.ENOTTY): "only INTx interrupts can be masked and unmasked",
    ("VFIO_DEVICE_GET_REGION_INFO", E.EINVAL): "the device has no such region",
})


def _hint(name: str, err: int) -> str:
    hint = _HINTS.get((name, err))
    if hint:
        return hint
    if err in (E.EACCES, E.EPERM):
        return "permission denied: run as root or give this user the /dev/vfio nodes"
    if err == E.ENOTTY:
        return "this kernel's VFIO does not answer this request on this descriptor"
    return ""


def _ioctl(seam: OSSeam, req: Any, fd: int, arg: Any = None, hint: str = "") -> tuple[int, Any]:
    """Issues generated request `req` through the seam; returns (ioctl result, argument).

    The generated request performs the call (its `ioctl=` hook is the seam); its OSError becomes
    an `IoctlError` with advice. VFIO requests are _IO numbers: the argument is a struct sized by
    its own argsz, an integer passed by value, or nothing."""
    result = 0

    def sys_ioctl(fileno: int, request: int, a: Any) -> int:
        nonlocal result
        result = seam.ioctl(fileno, request, a)
        return result

    try:
        out = req(fd, arg, ioctl=sys_ioctl)
    except OSError as e:
        err = e.errno or E.EIO
        raise IoctlError(req.name, err, hint or _hint(req.name, err)) from None
    return result, out


def _query(seam: OSSeam, req: Any, fd: int, struct_type: Any, **fields: Any) -> tuple[Any, bytes]:
    """An info query with a capability chain: asks with argsz = sizeof(struct); when the kernel
    answers with a larger argsz (its capabilities did not fit) asks again with that much room.
    Returns the struct and the whole buffer (capability offsets are relative to its start)."""
    size = ctypes.sizeof(struct_type)
    for _ in range(4):
        buf = (ctypes.c_uint8 * size)()
        head = struct_type.from_buffer(buf)
        head.argsz = size
        for k, v in fields.items():
            setattr(head, k, v)
        _ioctl(seam, req, fd, buf)
        if head.argsz <= size:
            return struct_type.from_buffer_copy(buf), bytes(buf)
        size = head.argsz
    raise PCIError(f"{req.name}: argsz kept growing ({size} B)")


def _info_caps(buf: bytes, cap_offset: int) -> Iterator[tuple[int, int, int]]:
    """(id, version, offset) of each entry of a vfio_info_cap_header chain."""
    pos, hdr_size = cap_offset, ctypes.sizeof(V.vfio_info_cap_header)
    for _ in range(_INFO_CAP_TTL):
        if not pos or pos + hdr_size > len(buf):
            return
        hdr = V.vfio_info_cap_header.from_buffer_copy(buf, pos)
        yield hdr.id, hdr.version, pos
        pos = hdr.next


# ---------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class GroupStatus:
    """VFIO_GROUP_GET_STATUS: whether the group may be used, and whether it has a container."""

    viable: bool
    container_set: bool


@dataclass(frozen=True)
class IommuInfo:
    """VFIO_IOMMU_GET_INFO of a type1 container."""

    flags: int
    page_sizes: int                          # bitmap of IOMMU page sizes
    iova_ranges: tuple[tuple[int, int], ...]  # inclusive [start, end] the device may use
    dma_avail: int | None                    # DMA mappings still allowed, when reported

    @property
    def page_size_B(self) -> int:
        """The smallest IOMMU page: the alignment of every DMA mapping."""
        return self.page_sizes & -self.page_sizes


@dataclass(frozen=True)
class DmaMapping:
    """Host memory [vaddr, vaddr + size_B) visible to the devices at IOVA [iova, iova + size_B)."""

    iova: int
    size_B: int
    vaddr: int
    readable: bool  # the device may read it
    writable: bool  # the device may write it


@dataclass(frozen=True)
class DeviceInfo:
    """VFIO_DEVICE_GET_INFO."""

    flags: int
    num_regions: int
    num_irqs: int

    @property
    def can_reset(self) -> bool:
        return bool(self.flags & V.VFIO_DEVICE_FLAGS_RESET)


@dataclass(frozen=True)
class RegionInfo:
    """VFIO_DEVICE_GET_REGION_INFO: where a region lives in the device fd and what it allows.
    `sparse_areas` (offset, size) limit which parts may be mapped when the kernel says so."""

    index: int
    flags: int
    size_B: int
    offset: int
    sparse_areas: tuple[tuple[int, int], ...] | None = None
    msix_mappable: bool = False
    type_subtype: tuple[int, int] | None = None

    @property
    def readable(self) -> bool:
        return bool(self.flags & V.VFIO_REGION_INFO_FLAG_READ)

    @property
    def writable(self) -> bool:
        return bool(self.flags & V.VFIO_REGION_INFO_FLAG_WRITE)

    @property
    def mappable(self) -> bool:
        return bool(self.flags & V.VFIO_REGION_INFO_FLAG_MMAP)


@dataclass(frozen=True)
class IrqInfo:
    """VFIO_DEVICE_GET_IRQ_INFO: how many interrupts an index has and how they behave."""

    index: int
    flags: int
    count: int

    @property
    def automasked(self) -> bool:
        """INTx: after each interrupt the line stays masked until `unmask_intx`."""
        return bool(self.flags & V.VFIO_IRQ_INFO_AUTOMASKED)


class Interrupt:
    """One interrupt vector, delivered through an eventfd the device holds."""

    def __init__(self, seam: OSSeam, index: int, vector: int, fd: int) -> None:
        self.os, self.index, self.vector, self.fd = seam, index, vector, fd

    def pending(self) -> int:
        """How many times it fired since the last call (consumes the count); never blocks."""
        try:
            data = self.os.read(self.fd, 8)
        except BlockingIOError:
            return 0
        return int.from_bytes(data, "little")

    def wait(self, timeout_ms: float = 1000.0) -> int:
        """Waits until it fired at least once; returns the count. Polls with a growing sleep, so
        the mock (which cannot block) and the kernel behave the same."""
        deadline = time.monotonic() + timeout_ms / 1000
        delay = 1e-5
        while True:
            n = self.pending()
            if n:
                return n
            if time.monotonic() >= deadline:
                raise InterruptTimeout(f"no interrupt on index {self.index} vector {self.vector} "
                                       f"within {timeout_ms:.0f} ms")
            time.sleep(delay)
            delay = min(delay * 2, 1e-3)

    def __repr__(self) -> str:
        return f"<Interrupt index={self.index} vector={self.vector} fd={self.fd}>"


# ---------------------------------------------------------------------------------------- container
class VfioContainer:
    """A VFIO container: one IOMMU context shared by the groups attached to it.

    `close` releases, in order: the devices of its groups (so no device still masters the bus),
    the DMA mappings it made, the groups (unset, closed), and the container itself."""

    def __init__(self, seam: OSSeam, *, path: str = CONTAINER_PATH,
                 sysfs_root: str = SYSFS_PCI_DEVICES,
                 groups_root: str = SYSFS_IOMMU_GROUPS) -> None:
        self.os = seam
        self.sysfs_root, self.groups_root = sysfs_root, groups_root
        self.groups: dict[int, VfioGroup] = {}
        self.iommu_type: int | None = None
        self._dma: list[DmaMapping] = []
        try:
            self.fd: int | None = seam.open(path, os.O_RDWR)
        except FileNotFoundError as e:
            raise DeviceNotFound(f"no {path}: load the VFIO modules (modprobe vfio-pci)") from e
        except PermissionError as e:
            raise DeviceNotFound(f"cannot open {path}: {e.strerror or e}") from e
        try:
            self.api_version, _ = _ioctl(seam, V.VFIO_GET_API_VERSION, self.fd)
            if self.api_version != V.VFIO_API_VERSION:
                raise PCIError(f"{path}: VFIO API version {self.api_version}, this driver speaks "
                               f"{V.VFIO_API_VERSION}")
        except BaseException:
            self.close()
            raise

    def _fd(self) -> int:
        if self.fd is None:
            raise PCIError("VFIO container is closed")
        return self.fd

    def check_extension(self, extension: int) -> bool:
        """VFIO_CHECK_EXTENSION: whether an IOMMU type or feature (VFIO_TYPE1v2_IOMMU, ...) is
        available (before VFIO_SET_IOMMU: from any IOMMU driver; after: from the one set)."""
        ret, _ = _ioctl(self.os, V.VFIO_CHECK_EXTENSION, self._fd(), int(extension))
        return ret > 0

    def attach_group(self, group_id: int) -> "VfioGroup":
        """Opens /dev/vfio/`group_id` and puts it in this container (or returns it if already)."""
        group = self.groups.get(group_id)
        if group is None:
            group = VfioGroup(self, group_id)
            self.groups[group_id] = group
        return group

    def group_for(self, address: PCIAddress | str) -> "VfioGroup":
        """The group of a PCI function (from sysfs), attached to this container."""
        addr = address if isinstance(address, PCIAddress) else PCIAddress.parse(address)
        group_id = iommu_group_of(self.os, addr, self.groups_root)
        if group_id is None:
            raise DeviceNotFound(
                f"{addr} has no IOMMU group: enable the IOMMU (intel_iommu=on / amd_iommu=on, and "
                f"VT-d/AMD-Vi in firmware), or check the address with "
                f"`python -m runtime.drivers.pci list`")
        return self.attach_group(group_id)

    def set_iommu(self, iommu_type: int = V.VFIO_TYPE1v2_IOMMU) -> None:
        """VFIO_SET_IOMMU, once the kernel confirms it offers `iommu_type` (a group must be in)."""
        if not self.check_extension(iommu_type):
            raise PCIError(f"the kernel offers no IOMMU of type {iommu_type} "
                           f"(VFIO_CHECK_EXTENSION said no): load vfio_iommu_type1")
        _ioctl(self.os, V.VFIO_SET_IOMMU, self._fd(), int(iommu_type))
        self.iommu_type = iommu_type

    def iommu_info(self) -> IommuInfo:
        """VFIO_IOMMU_GET_INFO with its capabilities (IOVA ranges, DMA mappings available)."""
        info, buf = _query(self.os, V.VFIO_IOMMU_GET_INFO, self._fd(), V.vfio_iommu_type1_info)
        ranges: tuple[tuple[int, int], ...] = ()
        avail = None
        if info.flags & V.VFIO_IOMMU_INFO_CAPS:
            for cap_id, _, pos in _info_caps(buf, info.cap_offset):
                if cap_id == V.VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE:
                    cap = V.vfio_iommu_type1_info_cap_iova_range.from_buffer_copy(buf, pos)
                    first = pos + ctypes.sizeof(V.vfio_iommu_type1_info_cap_iova_range)
                    step = ctypes.sizeof(V.vfio_iova_range)
                    ranges = tuple(
                        (r.start, r.end) for r in (V.vfio_iova_range.from_buffer_copy(
                            buf, first + i * step) for i in range(cap.nr_iovas)))
                elif cap_id == V.VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL:
                    avail = V.vfio_iommu_type1_info_dma_avail.from_buffer_copy(buf, pos).avail
        return IommuInfo(info.flags, info.iova_pgsizes, ranges, avail)

    def map_dma(self, vaddr: int, size_B: int, iova: int, *, readable: bool = True,
                writable: bool = True) -> DmaMapping:
        """VFIO_IOMMU_MAP_DMA: lets the devices reach host memory [vaddr, +size_B) at `iova`.
        `readable`/`writable` are from the device's side."""
        if self.iommu_type is None:
            raise PCIError("set the container's IOMMU (set_iommu) before mapping DMA")
        flags = ((V.VFIO_DMA_MAP_FLAG_READ if readable else 0)
                 | (V.VFIO_DMA_MAP_FLAG_WRITE if writable else 0))
        arg = V.vfio_iommu_type1_dma_map(argsz=ctypes.sizeof(V.vfio_iommu_type1_dma_map),
                                         flags=flags, vaddr=vaddr, iova=iova, size=size_B)
        _ioctl(self.os, V.VFIO_IOMMU_MAP_DMA, self._fd(), arg)
        mapping = DmaMapping(iova, size_B, vaddr, readable, writable)
        self._dma.append(mapping)
        return mapping

    def map_host(self, host: HostMapping, iova: int, **access: bool) -> DmaMapping:
        """`map_dma` of a whole seam mapping (anonymous memory from `OSSeam.mmap`)."""
        return self.map_dma(host.addr, host.size, iova, **access)

    def unmap_dma(self, mapping: DmaMapping) -> None:
        """VFIO_IOMMU_UNMAP_DMA of a mapping from `map_dma`; checks the kernel unmapped it all."""
        if mapping not in self._dma:
            raise PCIError(f"IOVA {mapping.iova:#x} is not a DMA mapping of this container")
        arg = V.vfio_iommu_type1_dma_unmap(argsz=ctypes.sizeof(V.vfio_iommu_type1_dma_unmap),
                                           iova=mapping.iova, size=mapping.size_B)
        _ioctl(self.os, V.VFIO_IOMMU_UNMAP_DMA, self._fd(), arg)
        self._dma.remove(mapping)
        if arg.size != mapping.size_B:
            raise PCIError(f"VFIO_IOMMU_UNMAP_DMA of IOVA {mapping.iova:#x} unmapped {arg.size:#x}"
                           f" of {mapping.size_B:#x} B")

    @property
    def dma_mappings(self) -> list[DmaMapping]:
        """The DMA mappings this container made and has not unmapped."""
        return list(self._dma)

    def close(self) -> None:
        """Releases devices, DMA mappings, groups and the container fd, in that order; keeps
        releasing after a failure and raises the first one at the end. Idempotent."""
        errors: list[BaseException] = []
        for group in list(self.groups.values()):
            _collect(errors, group.close_devices)
        for mapping in list(self._dma):
            before = len(errors)
            _collect(errors, self.unmap_dma, mapping)
            if len(errors) > before and mapping in self._dma:
                self._dma.remove(mapping)  # the kernel drops it anyway when the last group leaves
        for group in list(self.groups.values()):
            _collect(errors, group.close)
        self.groups.clear()
        if self.fd is not None:
            fd, self.fd = self.fd, None
            _collect(errors, self.os.close, fd)
        if errors:
            raise errors[0]

    def __enter__(self) -> "VfioContainer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _collect(errors: list[BaseException], fn: Callable[..., Any], *args: Any) -> None:
    """Runs one release step; a failure is recorded so the remaining steps still run."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - re-raised by the caller once everything is released
        errors.append(e)


# ---------------------------------------------------------------------------------------- group
class VfioGroup:
    """An IOMMU group (/dev/vfio/N) in a container. Made by `VfioContainer.attach_group`."""

    def __init__(self, container: VfioContainer, group_id: int) -> None:
        self.container, self.os, self.id = container, container.os, group_id
        self.devices: list[VfioDevice] = []
        path = f"/dev/vfio/{group_id}"
        try:
            self.fd: int | None = self.os.open(path, os.O_RDWR)
        except FileNotFoundError as e:
            raise DeviceNotFound(
                f"no {path}: no device of IOMMU group {group_id} is bound to vfio-pci "
                f"({self._bind_advice(self.members()) or 'bind one first'})") from e
        except OSError as e:
            why = {E.EBUSY: "another process (or another container here) has it open",
                   E.EACCES: "permission denied: run as root or chown the node to this user",
                   E.EPERM: "permission denied (no-IOMMU groups need CAP_SYS_RAWIO)"}
            raise PCIError(f"cannot open {path}: {e.strerror or e}: "
                           f"{why.get(e.errno or 0, 'see the kernel log')}") from e
        try:
            status = self.status()
            hint = ""
            if not status.viable:
                advice = self._bind_advice(self.blockers())
                hint = (f"group {group_id} is not viable: {advice}" if advice
                        else _hint("VFIO_GROUP_SET_CONTAINER", E.EBUSY))
            _ioctl(self.os, V.VFIO_GROUP_SET_CONTAINER, self.fd,
                   (ctypes.c_int32 * 1)(container._fd()), hint)
        except BaseException:
            fd, self.fd = self.fd, None
            self.os.close(fd)
            raise

    def _fd(self) -> int:
        if self.fd is None:
            raise PCIError(f"VFIO group {self.id} is closed")
        return self.fd

    def status(self) -> GroupStatus:
        """VFIO_GROUP_GET_STATUS."""
        _, st = _ioctl(self.os, V.VFIO_GROUP_GET_STATUS, self._fd(),
                       V.vfio_group_status(argsz=ctypes.sizeof(V.vfio_group_status)))
        return GroupStatus(bool(st.flags & V.VFIO_GROUP_FLAGS_VIABLE),
                           bool(st.flags & V.VFIO_GROUP_FLAGS_CONTAINER_SET))

    def members(self) -> list[tuple[PCIAddress, str | None]]:
        """The group's PCI functions and their drivers, from sysfs."""
        c = self.container
        return [(a, sysfs_driver(self.os, a, c.sysfs_root))
                for a in iommu_group_devices(self.os, self.id, c.groups_root)]

    def blockers(self) -> list[tuple[PCIAddress, str | None]]:
        """Members bound to a driver that owns DMA: what makes the group not viable."""
        return [(a, d) for a, d in self.members() if d is not None and d not in DMA_NEUTRAL_DRIVERS]

    def _bind_advice(self, devices: list[tuple[PCIAddress, str | None]]) -> str:
        if not devices:
            return ""
        root = self.container.sysfs_root
        names = ", ".join(f"{a} (driver {d or 'none'})" for a, d in devices)
        a = devices[0][0]
        return (f"{names} must be bound to vfio-pci (or unbound), e.g. as root: "
                f"echo vfio-pci > {root}/{a}/driver_override; echo {a} > {root}/{a}/driver/unbind; "
                f"echo {a} > /sys/bus/pci/drivers_probe")

    def open_device(self, address: PCIAddress | str) -> "VfioDevice":
        """VFIO_GROUP_GET_DEVICE_FD (the container's IOMMU must be set)."""
        addr = address if isinstance(address, PCIAddress) else PCIAddress.parse(address)
        hint = ""
        if self.container.iommu_type is None:
            hint = "set the container's IOMMU first (VfioContainer.set_iommu)"
        fd, _ = _ioctl(self.os, V.VFIO_GROUP_GET_DEVICE_FD, self._fd(),
                       ctypes.create_string_buffer(str(addr).encode()), hint)
        try:
            dev = VfioDevice(self, addr, fd)
        except BaseException:
            self.os.close(fd)
            raise
        self.devices.append(dev)
        return dev

    def close_devices(self) -> None:
        """Closes the devices opened through this group."""
        errors: list[BaseException] = []
        for dev in list(self.devices):
            _collect(errors, dev.close)
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Closes its devices, takes the group out of the container and closes it. Idempotent."""
        errors: list[BaseException] = []
        _collect(errors, self.close_devices)
        if self.fd is not None:
            _collect(errors, _ioctl, self.os, V.VFIO_GROUP_UNSET_CONTAINER, self.fd)
            fd, self.fd = self.fd, None
            _collect(errors, self.os.close, fd)
        self.container.groups.pop(self.id, None)
        if errors:
            raise errors[0]


# ---------------------------------------------------------------------------------------- device
class VfioDevice(PCIDevice):
    """A PCI function through its VFIO device fd. Made by `VfioGroup.open_device` or
    `open_vfio_device`; config space and BARs follow the `PCIDevice` contract, plus region
    access, DMA (through the container), interrupts and reset."""

    def __init__(self, group: VfioGroup, address: PCIAddress, fd: int) -> None:
        self.group, self.os, self.address = group, group.os, address
        self.fd: int | None = fd
        self.owner: VfioContainer | None = None  # set by open_vfio_device: close releases it too
        self._regions: dict[int, RegionInfo] = {}
        self._mappings: list[HostMapping] = []
        self._irqs: dict[int, list[Interrupt]] = {}
        info, _ = _query(self.os, V.VFIO_DEVICE_GET_INFO, fd, V.vfio_device_info)
        self.info = DeviceInfo(info.flags, info.num_regions, info.num_irqs)
        if not info.flags & V.VFIO_DEVICE_FLAGS_PCI:
            raise PCIError(f"{address}: VFIO device is not a PCI device (flags {info.flags:#x})")

    @property
    def container(self) -> VfioContainer:
        return self.group.container

    def _fd(self) -> int:
        if self.fd is None:
            raise PCIError(f"{self.address}: VFIO device is closed")
        return self.fd

    # ------------------------------------------------------------------ regions
    def region_info(self, index: int) -> RegionInfo:
        """VFIO_DEVICE_GET_REGION_INFO (cached: regions do not move while the fd is open)."""
        got = self._regions.get(index)
        if got is not None:
            return got
        info, buf = _query(self.os, V.VFIO_DEVICE_GET_REGION_INFO, self._fd(),
                           V.vfio_region_info, index=index)
        sparse: tuple[tuple[int, int], ...] | None = None
        msix_mappable, type_subtype = False, None
        if info.flags & V.VFIO_REGION_INFO_FLAG_CAPS:
            for cap_id, _, pos in _info_caps(buf, info.cap_offset):
                if cap_id == V.VFIO_REGION_INFO_CAP_SPARSE_MMAP:
                    cap = V.vfio_region_info_cap_sparse_mmap.from_buffer_copy(buf, pos)
                    first = pos + ctypes.sizeof(V.vfio_region_info_cap_sparse_mmap)
                    step = ctypes.sizeof(V.vfio_region_sparse_mmap_area)
                    sparse = tuple((a.offset, a.size) for a in (
                        V.vfio_region_sparse_mmap_area.from_buffer_copy(buf, first + i * step)
                        for i in range(cap.nr_areas)))
                elif cap_id == V.VFIO_REGION_INFO_CAP_MSIX_MAPPABLE:
                    msix_mappable = True
                elif cap_id == V.VFIO_REGION_INFO_CAP_TYPE:
                    t = V.vfio_region_info_cap_type.from_buffer_copy(buf, pos)
                    type_subtype = (t.type, t.subtype)
        region = RegionInfo(index, info.flags, info.size, info.offset, sparse, msix_mappable,
                            type_subtype)
        self._regions[index] = region
        return region

    def read_region(self, index: int, offset: int, size: int) -> bytes:
        """pread of `size` bytes at `offset` of region `index`."""
        region = self._check_access(index, offset, size, write=False)
        try:
            data = self.os.pread(self._fd(), size, region.offset + offset)
        except OSError as e:
            raise PCIError(f"{self.address}: read of region {index} [{offset:#x}, +{size:#x}) "
                           f"failed: errno {e.errno} ({e.strerror})"
                           + (" - memory decoding is off (PCI_COMMAND_MEMORY)"
                              if e.errno == E.EIO else "")) from e
        if len(data) != size:
            raise PCIError(f"{self.address}: short read of region {index}: {len(data)} of {size} B")
        return data

    def write_region(self, index: int, offset: int, data: bytes) -> None:
        """pwrite of `data` at `offset` of region `index`."""
        region = self._check_access(index, offset, len(data), write=True)
        try:
            done = self.os.pwrite(self._fd(), bytes(data), region.offset + offset)
        except OSError as e:
            raise PCIError(f"{self.address}: write of region {index} [{offset:#x}, "
                           f"+{len(data):#x}) failed: errno {e.errno} ({e.strerror})"
                           + (" - memory decoding is off (PCI_COMMAND_MEMORY)"
                              if e.errno == E.EIO else "")) from e
        if done != len(data):
            raise PCIError(f"{self.address}: short write of region {index}: {done} of "
                           f"{len(data)} B")

    def _check_access(self, index: int, offset: int, size: int, write: bool) -> RegionInfo:
        region = self.region_info(index)
        if not (region.writable if write else region.readable):
            raise PCIError(f"{self.address}: region {index} is not "
                           f"{'writable' if write else 'readable'} (flags {region.flags:#x})")
        if offset < 0 or size < 0 or offset + size > region.size_B:
            raise PCIError(f"{self.address}: [{offset:#x}, +{size:#x}) is outside region {index} "
                           f"({region.size_B:#x} B)")
        return region

    # ------------------------------------------------------------------ PCIDevice contract
    @property
    def config_size(self) -> int:
        return self.region_info(V.VFIO_PCI_CONFIG_REGION_INDEX).size_B

    def read_config(self, offset: int, size: int) -> bytes:
        return self.read_region(V.VFIO_PCI_CONFIG_REGION_INDEX, offset, size)

    def write_config(self, offset: int, data: bytes) -> None:
        self.write_region(V.VFIO_PCI_CONFIG_REGION_INDEX, offset, data)

    def bars(self) -> list[BarInfo]:
        """Sizes and mappability from region info; kind and address from the BAR registers."""
        out = []
        for i in range(PCI_NUM_BARS):
            region = self.region_info(V.VFIO_PCI_BAR0_REGION_INDEX + i)
            reg = self.read32(R.PCI_BASE_ADDRESS_0 + 4 * i)
            io = bool(reg & R.PCI_BASE_ADDRESS_SPACE_IO) and region.size_B > 0
            is64 = (not io and region.size_B > 0 and (reg & R.PCI_BASE_ADDRESS_MEM_TYPE_MASK)
                    == R.PCI_BASE_ADDRESS_MEM_TYPE_64)
            if io:
                addr = reg & R.PCI_BASE_ADDRESS_IO_MASK & 0xFFFFFFFF
            else:
                addr = reg & R.PCI_BASE_ADDRESS_MEM_MASK & 0xFFFFFFFF
                if is64 and i + 1 < PCI_NUM_BARS:
                    addr |= self.read32(R.PCI_BASE_ADDRESS_0 + 4 * (i + 1)) << 32
            out.append(BarInfo(i, addr if region.size_B else 0, region.size_B, io, is64,
                               bool(not io and reg & R.PCI_BASE_ADDRESS_MEM_PREFETCH),
                               region.mappable))
        return out

    def map_bar(self, index: int, offset: int = 0, size_B: int | None = None) -> HostMapping:
        """mmap of part of BAR `index`. The kernel says which BARs may be mapped (I/O BARs may
        not; old kernels leave out the MSI-X table, reported as sparse areas)."""
        if not 0 <= index < PCI_NUM_BARS:
            raise PCIError(f"{self.address}: no BAR{index} (BAR0-BAR5)")
        region = self.region_info(V.VFIO_PCI_BAR0_REGION_INDEX + index)
        if not region.mappable:
            raise PCIError(f"{self.address}: BAR{index} cannot be mapped (region flags "
                           f"{region.flags:#x}, size {region.size_B:#x}); use read_region/"
                           f"write_region")
        size = region.size_B - offset if size_B is None else size_B
        if offset < 0 or size <= 0 or offset + size > region.size_B:
            raise PCIError(f"{self.address}: [{offset:#x}, +{size:#x}) is outside BAR{index} "
                           f"({region.size_B:#x} B)")
        if region.sparse_areas is not None and not any(
                a <= offset and offset + size <= a + n for a, n in region.sparse_areas):
            areas = ", ".join(f"[{a:#x}, +{n:#x})" for a, n in region.sparse_areas)
            raise PCIError(f"{self.address}: BAR{index} may only be mapped within {areas}")
        prot = (PROT_READ if region.readable else 0) | (PROT_WRITE if region.writable else 0)
        try:
            mapping = self.os.mmap(None, size, prot, MAP_SHARED, self._fd(),
                                   region.offset + offset)
        except OSError as e:
            raise PCIError(f"{self.address}: mmap of BAR{index} [{offset:#x}, +{size:#x}) failed: "
                           f"errno {e.errno} ({e.strerror}); offsets must be page aligned") from e
        self._mappings.append(mapping)
        return mapping

    def enable_bus_master(self) -> None:
        """Sets PCI_COMMAND_MEMORY and PCI_COMMAND_MASTER: the device decodes its BARs and DMAs."""
        cmd = self.read16(R.PCI_COMMAND)
        self.write16(R.PCI_COMMAND, cmd | R.PCI_COMMAND_MEMORY | R.PCI_COMMAND_MASTER)

    # ------------------------------------------------------------------ interrupts
    def irq_info(self, index: int) -> IrqInfo:
        """VFIO_DEVICE_GET_IRQ_INFO for VFIO_PCI_{INTX,MSI,MSIX,ERR,REQ}_IRQ_INDEX."""
        _, info = _ioctl(self.os, V.VFIO_DEVICE_GET_IRQ_INFO, self._fd(),
                         V.vfio_irq_info(argsz=ctypes.sizeof(V.vfio_irq_info), index=index))
        return IrqInfo(index, info.flags, info.count)

    def _set_irqs(self, index: int, flags: int, start: int, count: int,
                  data: bytes = b"") -> None:
        size = ctypes.sizeof(V.vfio_irq_set) + len(data)
        buf = (ctypes.c_uint8 * size)()
        hdr = V.vfio_irq_set.from_buffer(buf)
        hdr.argsz, hdr.flags, hdr.index, hdr.start, hdr.count = size, flags, index, start, count
        ctypes.memmove(ctypes.addressof(buf) + ctypes.sizeof(V.vfio_irq_set), data, len(data))
        _ioctl(self.os, V.VFIO_DEVICE_SET_IRQS, self._fd(), buf)

    def enable_interrupts(self, index: int, count: int | None = None) -> list[Interrupt]:
        """Routes vectors 0..count-1 of `index` (all of them by default) to new eventfds."""
        if index in self._irqs:
            raise PCIError(f"{self.address}: interrupts of index {index} are already enabled")
        if count is None:
            count = self.irq_info(index).count
        if count <= 0:
            raise PCIError(f"{self.address}: interrupt index {index} has no vectors")
        irqs: list[Interrupt] = []
        try:
            for v in range(count):
                irqs.append(Interrupt(self.os, index, v, self.os.eventfd(0, os.EFD_NONBLOCK)))
            data = b"".join(i.fd.to_bytes(4, "little", signed=True) for i in irqs)
            self._set_irqs(index, V.VFIO_IRQ_SET_DATA_EVENTFD | V.VFIO_IRQ_SET_ACTION_TRIGGER,
                           0, count, data)
        except BaseException:
            for i in irqs:
                self.os.close(i.fd)
            raise
        self._irqs[index] = irqs
        return irqs

    def disable_interrupts(self, index: int) -> None:
        """Turns index `index` off (DATA_NONE, count 0) and closes its eventfds."""
        irqs = self._irqs.pop(index, None)
        if irqs is None:
            return
        try:
            self._set_irqs(index, V.VFIO_IRQ_SET_DATA_NONE | V.VFIO_IRQ_SET_ACTION_TRIGGER, 0, 0)
        finally:
            for i in irqs:
                self.os.close(i.fd)

    def trigger_interrupts(self, index: int, start: int = 0, count: int = 1) -> None:
        """Loopback: the kernel signals the eventfds as if the device had interrupted."""
        self._set_irqs(index, V.VFIO_IRQ_SET_DATA_NONE | V.VFIO_IRQ_SET_ACTION_TRIGGER,
                       start, count)

    def mask_intx(self) -> None:
        """Masks the INTx line."""
        self._set_irqs(V.VFIO_PCI_INTX_IRQ_INDEX,
                       V.VFIO_IRQ_SET_DATA_NONE | V.VFIO_IRQ_SET_ACTION_MASK, 0, 1)

    def unmask_intx(self) -> None:
        """Unmasks INTx, which the kernel masks after each interrupt (it is automasked)."""
        self._set_irqs(V.VFIO_PCI_INTX_IRQ_INDEX,
                       V.VFIO_IRQ_SET_DATA_NONE | V.VFIO_IRQ_SET_ACTION_UNMASK, 0, 1)

    # ------------------------------------------------------------------ reset and close
    def reset(self) -> None:
        """VFIO_DEVICE_RESET (a function-level or similar reset the kernel picks)."""
        if not self.info.can_reset:
            raise PCIError(f"{self.address}: the kernel offers no reset for this device "
                           f"(VFIO_DEVICE_FLAGS_RESET clear): a bus reset needs "
                           f"VFIO_DEVICE_PCI_HOT_RESET")
        _ioctl(self.os, V.VFIO_DEVICE_RESET, self._fd())

    def close(self) -> None:
        """Disables interrupts and closes their eventfds, unmaps BARs, closes the device fd; when
        opened with `open_vfio_device`, also releases its group and container. Idempotent."""
        errors: list[BaseException] = []
        if self.fd is not None:
            for index in list(self._irqs):
                _collect(errors, self.disable_interrupts, index)
            while self._mappings:
                _collect(errors, self.os.munmap, self._mappings.pop())
            fd, self.fd = self.fd, None
            _collect(errors, self.os.close, fd)
            if self in self.group.devices:
                self.group.devices.remove(self)
        if self.owner is not None:
            owner, self.owner = self.owner, None
            _collect(errors, owner.close)
        if errors:
            raise errors[0]


def open_vfio_device(seam: OSSeam, address: PCIAddress | str, *,
                     iommu_type: int = V.VFIO_TYPE1v2_IOMMU, container_path: str = CONTAINER_PATH,
                     sysfs_root: str = SYSFS_PCI_DEVICES,
                     groups_root: str = SYSFS_IOMMU_GROUPS) -> VfioDevice:
    """Container, group (from sysfs), IOMMU and device in one call; the device's `close` releases
    all of them."""
    container = VfioContainer(seam, path=container_path, sysfs_root=sysfs_root,
                              groups_root=groups_root)
    try:
        group = container.group_for(address)
        container.set_iommu(iommu_type)
        dev = group.open_device(address)
    except BaseException:
        container.close()
        raise
    dev.owner = container
    return dev
