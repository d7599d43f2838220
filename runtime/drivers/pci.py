"""Raw PCI access from userspace: the `PCIDevice` interface, its sysfs backend and capability walks.

Userspace GPU drivers that bypass the kernel's GPU driver (tinygrad's AM driver for AMD does) need
config space, BAR mappings and the capability lists of a PCI function. Two backends implement
`PCIDevice`: `SysfsPCIDevice` here (the `config` and `resourceN` files of
/sys/bus/pci/devices/<address>, Documentation/PCI/sysfs-pci.rst) and `VfioDevice` in
`runtime.drivers.vfio` (the same through a VFIO device fd, with DMA and interrupts besides).

Everything goes through the OS seam (`runtime.hcq.seam.OSSeam`), so the mock OS can stand in for
sysfs. Register offsets, capability IDs and their names come from the generated `pci_regs`
bindings (linux/pci_regs.h), never from hand-copied numbers.

`python -m runtime.drivers.pci list` prints the machine's PCI functions, like a small lspci.
"""
from __future__ import annotations

import argparse
import errno as E
import os
import sys
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Mapping, Self, Sequence

from hcq_bindings.linux import pci_regs as R

from runtime.hcq.errors import HCQError
from runtime.hcq.seam import MAP_SHARED, PROT_READ, PROT_WRITE, HostMapping, OSSeam, RealOS

SYSFS_PCI_DEVICES = "/sys/bus/pci/devices"
SYSFS_IOMMU_GROUPS = "/sys/kernel/iommu_groups"
PCI_IDS_PATHS = ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids", "/usr/share/pci.ids")

# Flags of the sysfs `resource` file's third column: struct resource flags, include/linux/ioport.h
# (kernel-internal, hence not in the generated uapi bindings).
IORESOURCE_IO = 0x00000100
IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
IORESOURCE_MEM_64 = 0x00100000

PCI_NUM_BARS = 6           # type 0 header: PCI_BASE_ADDRESS_0 .. PCI_BASE_ADDRESS_5
PCI_ROM_RESOURCE = 6       # include/linux/pci.h: the expansion ROM is resource 6
# drivers/pci/pci.c: PCI_FIND_CAP_TTL bounds a walk of the standard list; an extended capability
# header takes at least 8 bytes, so at most (4096 - 256) / 8 of them fit.
PCI_FIND_CAP_TTL = 48
PCI_EXT_CAP_TTL = (R.PCI_CFG_SPACE_EXP_SIZE - R.PCI_CFG_SPACE_SIZE) // 8
PCI_STD_HEADER_SIZE = 0x40  # capabilities live above the standard header


def _id_names(prefix: str) -> Mapping[int, str]:
    """Capability ID → generated macro name, for every `prefix`* constant (the `_MAX` aliases,
    which repeat the last ID, are left out so each ID keeps its own name)."""
    # dir(), not vars(): the generated module materialises its definitions on first use.
    names = {getattr(R, k): k for k in dir(R)
             if k.startswith(prefix) and not k.endswith("_MAX") and isinstance(getattr(R, k), int)}
    return types.MappingProxyType(names)


CAP_ID_NAMES: Mapping[int, str] = _id_names("PCI_CAP_ID_")
EXT_CAP_ID_NAMES: Mapping[int, str] = _id_names("PCI_EXT_CAP_ID_")


class PCIError(HCQError):
    """A PCI function could not be found, read, written or mapped."""


class ConfigAccessDenied(PCIError, PermissionError):
    """Config space beyond what the kernel lets this process read: without CAP_SYS_ADMIN, sysfs
    `config` reads stop after the first 64 bytes (128 for CardBus bridges), pci-sysfs.c."""


@dataclass(frozen=True, order=True)
class PCIAddress:
    """A PCI function's address: domain:bus:device.function, as sysfs and lspci -D name it."""

    domain: int
    bus: int
    device: int
    function: int

    @classmethod
    def parse(cls, text: str) -> "PCIAddress":
        """Parses "0000:03:00.0" (or "03:00.0", domain 0)."""
        try:
            head, fn = text.strip().rsplit(".", 1)
            parts = head.split(":")
            if len(parts) == 2:
                parts.insert(0, "0")
            dom, bus, dev = (int(p, 16) for p in parts)
            addr = cls(dom, bus, dev, int(fn, 16))
        except ValueError:
            raise ValueError(f"not a PCI address: {text!r} (expected DDDD:BB:DD.F)") from None
        if addr.bus > 0xFF or addr.device > 0x1F or addr.function > 7 or len(parts) != 3:
            raise ValueError(f"not a PCI address: {text!r} "
                             f"(bus <= ff, device <= 1f, function <= 7)")
        return addr

    @property
    def devfn(self) -> int:
        """Device and function packed as in the kernel's devfn (PCI_DEVFN)."""
        return (self.device << 3) | self.function

    def __str__(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.{self.function:x}"


@dataclass(frozen=True)
class Capability:
    """One entry of a capability list. `offset` is its place in config space; extended
    capabilities (PCI Express, at 0x100 and above) also carry a `version`."""

    offset: int
    id: int
    extended: bool = False
    version: int = 0

    @property
    def name(self) -> str:
        """The generated macro name (PCI_CAP_ID_MSIX, PCI_EXT_CAP_ID_ERR), or a hex placeholder."""
        table = EXT_CAP_ID_NAMES if self.extended else CAP_ID_NAMES
        kind = "PCI_EXT_CAP_ID" if self.extended else "PCI_CAP_ID"
        return table.get(self.id, f"{kind}_{self.id:#x}(unknown)")

    def __str__(self) -> str:
        where = f"[{self.offset:03x} v{self.version}]" if self.extended else f"[{self.offset:02x}]"
        return f"{where} {self.name}"


@dataclass(frozen=True)
class BarInfo:
    """A base address register as the kernel assigned it: bus `address`, `size_B` (0: unused),
    and its kind. `mappable` says whether the backend can mmap it (memory BARs only)."""

    index: int
    address: int
    size_B: int
    io: bool
    is_64bit: bool
    prefetchable: bool
    mappable: bool

    def __str__(self) -> str:
        if self.io:
            return (f"BAR{self.index}: I/O ports at {self.address:#x} "
                    f"[size={_size_text(self.size_B)}]")
        kind = ("64-bit" if self.is_64bit else "32-bit") + (
            ", prefetchable" if self.prefetchable else ", non-prefetchable")
        return (f"BAR{self.index}: memory at {self.address:#x} ({kind}) "
                f"[size={_size_text(self.size_B)}]")


def _size_text(size_B: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size_B >= 1 << shift and size_B % (1 << shift) == 0:
            return f"{size_B >> shift}{unit}"
    return str(size_B)


def _u16(cfg: bytes, off: int) -> int:
    return int.from_bytes(cfg[off:off + 2], "little")


def _u32(cfg: bytes, off: int) -> int:
    return int.from_bytes(cfg[off:off + 4], "little")


def walk_capabilities(config: bytes) -> list[Capability]:
    """The standard capability list, then the extended one, of a config-space image.

    Follows the kernel's walk (drivers/pci/pci.c: __pci_find_next_cap_ttl,
    pci_find_next_ext_capability): pointers are dword aligned, the standard list starts at
    PCI_CAPABILITY_LIST (PCI_CB_CAPABILITY_LIST for CardBus) when PCI_STATUS_CAP_LIST is set, ends
    at a zero pointer, an ID of 0xff, a pointer into the header or a loop; the extended list starts
    at 0x100 when the image has it and ends at a zero (or all-ones) header, a pointer below 0x100 or
    a loop. An image shorter than the list needs raises `ConfigAccessDenied`.
    """
    caps: list[Capability] = []
    need = PCI_STD_HEADER_SIZE
    if len(config) < need:
        raise ConfigAccessDenied(f"only {len(config)} config bytes to walk (the header is {need})")
    if _u16(config, R.PCI_STATUS) & R.PCI_STATUS_CAP_LIST:
        cardbus = (config[R.PCI_HEADER_TYPE] & R.PCI_HEADER_TYPE_MASK) == R.PCI_HEADER_TYPE_CARDBUS
        pos = config[R.PCI_CB_CAPABILITY_LIST if cardbus else R.PCI_CAPABILITY_LIST] & ~3
        seen: set[int] = set()
        for _ in range(PCI_FIND_CAP_TTL):
            if pos < PCI_STD_HEADER_SIZE or pos in seen:
                break
            if pos + 2 > len(config):
                raise ConfigAccessDenied(
                    f"capability at {pos:#x} lies beyond the {len(config)} config bytes this "
                    f"process may read (reading all of config space needs root: CAP_SYS_ADMIN)")
            seen.add(pos)
            cap_id = config[pos + R.PCI_CAP_LIST_ID]
            if cap_id == 0xFF:
                break
            caps.append(Capability(pos, cap_id))
            pos = config[pos + R.PCI_CAP_LIST_NEXT] & ~3
    if len(config) > R.PCI_CFG_SPACE_SIZE:
        pos, seen = R.PCI_CFG_SPACE_SIZE, set()
        for _ in range(PCI_EXT_CAP_TTL):
            if pos + 4 > len(config):
                break
            header = _u32(config, pos)
            if header in (0, 0xFFFFFFFF) or pos in seen:
                break
            seen.add(pos)
            caps.append(Capability(pos, R.PCI_EXT_CAP_ID(header), True, R.PCI_EXT_CAP_VER(header)))
            pos = R.PCI_EXT_CAP_NEXT(header)
            if pos < R.PCI_CFG_SPACE_SIZE:
                break
    return caps


class PCIDevice(ABC):
    """One PCI function, opened for config access and BAR mappings.

    Contract for backends: `read_config`/`write_config` access config space at byte offsets (the
    kernel splits them into aligned accesses); `config_size` is how much of it this process may
    read (256 for PCI, 4096 for PCI Express, 64 when sysfs hides the rest from non-root);
    `bars` describes the six BARs; `map_bar` maps part of a memory BAR and the device remembers
    the mapping until `unmap` or `close`. `close` releases every fd and mapping the device made
    and is idempotent. Everything else (IDs, capability walks) is built on those here.
    """

    address: PCIAddress
    os: OSSeam
    _mappings: list[HostMapping]   # what map_bar mapped, until unmap or close

    # ------------------------------------------------------------------ backend contract
    @property
    @abstractmethod
    def config_size(self) -> int:
        """Bytes of config space this process may read."""

    @abstractmethod
    def read_config(self, offset: int, size: int) -> bytes:
        """`size` bytes of config space at `offset`."""

    @abstractmethod
    def write_config(self, offset: int, data: bytes) -> None:
        """Writes `data` into config space at `offset`."""

    @abstractmethod
    def bars(self) -> list[BarInfo]:
        """The six BARs (unused ones have size 0)."""

    @abstractmethod
    def map_bar(self, index: int, offset: int = 0, size_B: int | None = None) -> HostMapping:
        """Maps `size_B` bytes (default: the rest) of memory BAR `index` from `offset`."""

    def unmap(self, mapping: HostMapping) -> None:
        """Removes a mapping made by `map_bar` (backends keep theirs in `_mappings`)."""
        if mapping not in self._mappings:
            raise PCIError(f"{self.address}: {mapping.addr:#x} is not a mapping of this device")
        self._mappings.remove(mapping)
        self.os.munmap(mapping)

    @abstractmethod
    def close(self) -> None:
        """Releases every mapping and descriptor; idempotent."""

    # ------------------------------------------------------------------ built on the contract
    def read8(self, offset: int) -> int:
        """One config byte."""
        return self.read_config(offset, 1)[0]

    def read16(self, offset: int) -> int:
        """A little-endian config word."""
        return int.from_bytes(self.read_config(offset, 2), "little")

    def read32(self, offset: int) -> int:
        """A little-endian config dword."""
        return int.from_bytes(self.read_config(offset, 4), "little")

    def write8(self, offset: int, value: int) -> None:
        """Writes one config byte."""
        self.write_config(offset, value.to_bytes(1, "little"))

    def write16(self, offset: int, value: int) -> None:
        """Writes a little-endian config word."""
        self.write_config(offset, value.to_bytes(2, "little"))

    def write32(self, offset: int, value: int) -> None:
        """Writes a little-endian config dword."""
        self.write_config(offset, value.to_bytes(4, "little"))

    def config(self) -> bytes:
        """All of config space this process may read."""
        return self.read_config(0, self.config_size)

    @property
    def vendor_id(self) -> int:
        """PCI_VENDOR_ID."""
        return self.read16(R.PCI_VENDOR_ID)

    @property
    def device_id(self) -> int:
        """PCI_DEVICE_ID."""
        return self.read16(R.PCI_DEVICE_ID)

    @property
    def revision(self) -> int:
        """PCI_REVISION_ID."""
        return self.read8(R.PCI_REVISION_ID)

    @property
    def class_code(self) -> int:
        """24-bit class code: base class, subclass, programming interface (PCI_CLASS_PROG)."""
        return int.from_bytes(self.read_config(R.PCI_CLASS_PROG, 3), "little")

    @property
    def header_type(self) -> int:
        """PCI_HEADER_TYPE without the multi-function bit."""
        return self.read8(R.PCI_HEADER_TYPE) & R.PCI_HEADER_TYPE_MASK

    @property
    def subsystem(self) -> tuple[int, int]:
        """(PCI_SUBSYSTEM_VENDOR_ID, PCI_SUBSYSTEM_ID) of a type 0 header."""
        return self.read16(R.PCI_SUBSYSTEM_VENDOR_ID), self.read16(R.PCI_SUBSYSTEM_ID)

    def capabilities(self) -> list[Capability]:
        """Standard then extended capabilities (see `walk_capabilities`)."""
        return walk_capabilities(self.config())

    def find_capability(self, cap_id: int, extended: bool = False) -> Capability | None:
        """The first capability with `cap_id` (a PCI_CAP_ID_* or, with `extended`, a
        PCI_EXT_CAP_ID_* value), or None."""
        return next((c for c in self.capabilities()
                     if c.id == cap_id and c.extended == extended), None)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.address}>"


# ---------------------------------------------------------------------------------------- sysfs
def list_devices(seam: OSSeam, root: str = SYSFS_PCI_DEVICES) -> list[PCIAddress]:
    """Addresses of the PCI functions sysfs lists, sorted. Raises `PCIError` when `root` is absent
    (no PCI bus, or a sandbox without /sys)."""
    try:
        names = seam.listdir(root)
    except OSError as e:
        raise PCIError(f"cannot list PCI devices: {root}: {e.strerror or e} "
                       f"(no PCI bus visible here, or /sys is not mounted)") from e
    out = []
    for name in names:
        try:
            out.append(PCIAddress.parse(name))
        except ValueError:
            continue  # sysfs lists only addresses here; anything else is not a PCI function
    return sorted(out)


def sysfs_driver(seam: OSSeam, address: PCIAddress, root: str = SYSFS_PCI_DEVICES) -> str | None:
    """The kernel driver bound to a function (the DRIVER= line of its uevent file), or None.
    `uevent` is used rather than the `driver` symlink because the seam reads files, not links."""
    try:
        text = seam.read_sysfs(f"{root}/{address}/uevent")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("DRIVER="):
            return line.split("=", 1)[1].strip() or None
    return None


def iommu_group_of(seam: OSSeam, address: PCIAddress,
                   groups_root: str = SYSFS_IOMMU_GROUPS) -> int | None:
    """The IOMMU group number of a function, or None when it has none (no IOMMU, or it is off).
    Found by listing /sys/kernel/iommu_groups/*/devices (the seam lists directories; the
    device's own `iommu_group` is a symlink whose target it cannot read)."""
    try:
        groups = seam.listdir(groups_root)
    except OSError:
        return None
    for g in groups:
        try:
            members = seam.listdir(f"{groups_root}/{g}/devices")
        except OSError:
            continue
        if str(address) in members:
            return int(g)
    return None


def iommu_group_devices(seam: OSSeam, group: int,
                        groups_root: str = SYSFS_IOMMU_GROUPS) -> list[PCIAddress]:
    """The PCI functions in IOMMU group `group`, sorted (empty when the group is not listed)."""
    try:
        names = seam.listdir(f"{groups_root}/{group}/devices")
    except OSError:
        return []
    out = []
    for name in names:
        try:
            out.append(PCIAddress.parse(name))
        except ValueError:
            continue  # a non-PCI device sharing the group (platform devices have other names)
    return sorted(out)


class SysfsPCIDevice(PCIDevice):
    """A PCI function through sysfs: config space from `config`, BARs from `resource` and
    mappings of `resourceN` (Documentation/PCI/sysfs-pci.rst).

    Opened read-only unless `writable` (writing config and mapping BARs need root). Without
    CAP_SYS_ADMIN the kernel returns only the first 64 bytes of config space; `config_size`
    reports what a read actually returned, and reads beyond it raise `ConfigAccessDenied`.
    """

    def __init__(self, seam: OSSeam, address: PCIAddress | str, *, writable: bool = False,
                 root: str = SYSFS_PCI_DEVICES) -> None:
        self.os = seam
        self.address = address if isinstance(address, PCIAddress) else PCIAddress.parse(address)
        self.root = root
        self.path = f"{root}/{self.address}"
        self.writable = writable
        self._mappings: list[HostMapping] = []
        self._fd: int | None = None
        try:
            self._fd = seam.open(f"{self.path}/config", os.O_RDWR if writable else os.O_RDONLY)
        except FileNotFoundError as e:
            raise PCIError(f"no PCI function {self.address}: {self.path}/config does not exist") \
                from e
        except PermissionError as e:
            raise PCIError(f"{self.path}/config: {e.strerror or e} (opening it for writing needs "
                           f"root)") from e
        # One read of the largest config space tells how much this process may see: sysfs cuts
        # reads short rather than failing them.
        self._readable = len(seam.pread(self._fd, R.PCI_CFG_SPACE_EXP_SIZE, 0))

    @property
    def config_size(self) -> int:
        return self._readable

    @property
    def driver(self) -> str | None:
        """The kernel driver bound to this function, or None."""
        return sysfs_driver(self.os, self.address, self.root)

    def _config_fd(self) -> int:
        if self._fd is None:
            raise PCIError(f"{self.address}: device is closed")
        return self._fd

    def read_config(self, offset: int, size: int) -> bytes:
        fd = self._config_fd()
        if offset < 0 or size < 0:
            raise ValueError(f"config read of {size} B at {offset}")
        if offset + size > self._readable:
            if self._readable < R.PCI_CFG_SPACE_SIZE:
                raise ConfigAccessDenied(
                    f"{self.address}: config bytes [{offset:#x}, {offset + size:#x}) are beyond "
                    f"the {self._readable} this process may read (the rest needs root: "
                    f"CAP_SYS_ADMIN)")
            raise PCIError(f"{self.address}: config read [{offset:#x}, {offset + size:#x}) is "
                           f"outside its {self._readable}-byte config space")
        data = self.os.pread(fd, size, offset)
        if len(data) != size:
            raise PCIError(f"{self.address}: short config read: {len(data)} of {size} B at "
                           f"{offset:#x}")
        return data

    def write_config(self, offset: int, data: bytes) -> None:
        fd = self._config_fd()
        if not self.writable:
            raise PCIError(f"{self.address}: opened read-only; open with writable=True (as root) "
                           f"to write config space")
        if offset < 0 or offset + len(data) > self._readable:
            raise PCIError(f"{self.address}: config write [{offset:#x}, {offset + len(data):#x})"
                           f" is outside its {self._readable}-byte config space")
        done = self.os.pwrite(fd, bytes(data), offset)
        if done != len(data):
            raise PCIError(f"{self.address}: short config write: {done} of {len(data)} B")

    def resources(self) -> list[tuple[int, int, int]]:
        """(start, end, flags) of each line of the `resource` file: BARs 0-5, the ROM, then
        bridge windows; an unused resource reads as zeros."""
        try:
            text = self.os.read_sysfs(f"{self.path}/resource")
        except OSError as e:
            raise PCIError(f"{self.address}: cannot read {self.path}/resource: {e}") from e
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                start, end, flags = (int(x, 16) for x in line.split()[:3])
            except ValueError:  # too few columns, or not hex
                start = end = -1
            if start < 0 or end < 0 or (end and end < start):
                raise PCIError(f"{self.address}: line {n} of {self.path}/resource is not "
                               f"'START END FLAGS' in hex with START <= END: {line[:80]!r}")
            rows.append((start, end, flags))
        return rows

    def bars(self) -> list[BarInfo]:
        rows = self.resources()
        out = []
        for i in range(PCI_NUM_BARS):
            start, end, flags = rows[i] if i < len(rows) else (0, 0, 0)
            size = end - start + 1 if end else 0
            io = bool(flags & IORESOURCE_IO)
            out.append(BarInfo(i, start, size, io, bool(flags & IORESOURCE_MEM_64),
                               bool(flags & IORESOURCE_PREFETCH),
                               bool(size and flags & IORESOURCE_MEM)))
        return out

    def map_bar(self, index: int, offset: int = 0, size_B: int | None = None, *,
                write_combine: bool = False) -> HostMapping:
        """Maps memory BAR `index` through `resourceN` (`resourceN_wc` with `write_combine`, for
        prefetchable BARs such as VRAM apertures). Needs root."""
        self._config_fd()
        if not 0 <= index < PCI_NUM_BARS:
            raise PCIError(f"{self.address}: no BAR{index} (a type 0 header has BAR0-BAR5)")
        bar = self.bars()[index]
        if not bar.mappable:
            what = "an I/O port BAR" if bar.io else "not implemented"
            raise PCIError(f"{self.address}: BAR{index} is {what}; only memory BARs can be mapped")
        size = bar.size_B - offset if size_B is None else size_B
        if offset < 0 or size <= 0 or offset + size > bar.size_B:
            raise PCIError(f"{self.address}: [{offset:#x}, +{size:#x}) is outside BAR{index} "
                           f"({bar.size_B:#x} B)")
        name = f"{self.path}/resource{index}" + ("_wc" if write_combine else "")
        prot = PROT_READ | (PROT_WRITE if self.writable else 0)
        try:
            fd = self.os.open(name, os.O_RDWR if self.writable else os.O_RDONLY)
        except OSError as e:
            raise PCIError(f"{self.address}: cannot open {name}: {e.strerror or e}"
                           + (" (mapping BARs needs root)" if e.errno in (E.EACCES, E.EPERM)
                              else "")) from e
        try:
            mapping = self.os.mmap(None, size, prot, MAP_SHARED, fd, offset)
        except OSError as e:
            raise PCIError(f"{self.address}: mmap of {name} [{offset:#x}, +{size:#x}) failed: "
                           f"{e.strerror or e}") from e
        finally:
            self.os.close(fd)  # the mapping keeps the file alive; the fd is not needed past mmap
        self._mappings.append(mapping)
        return mapping

    def close(self) -> None:
        while self._mappings:
            self.os.munmap(self._mappings.pop())
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self.os.close(fd)


# ---------------------------------------------------------------------------------------- pci.ids
@dataclass(frozen=True)
class PciIds:
    """Names from the pci.ids database (shipped with pciutils), for display only."""

    vendors: Mapping[int, str]
    devices: Mapping[tuple[int, int], str]
    classes: Mapping[tuple[int, int | None], str]

    @classmethod
    def load(cls, seam: OSSeam, paths: Sequence[str] = PCI_IDS_PATHS) -> "PciIds":
        """Parses the first pci.ids found; empty tables when there is none."""
        for path in paths:
            try:
                return cls.parse(seam.read_sysfs(path))
            except OSError:
                continue
        return cls({}, {}, {})

    @classmethod
    def parse(cls, text: str) -> "PciIds":
        """Vendor lines ("1af4  Red Hat"), device lines (one tab), class lines ("C 01  Mass
        storage controller") and subclass lines (one tab after a class). Subsystems are skipped."""
        vendors: dict[int, str] = {}
        devices: dict[tuple[int, int], str] = {}
        classes: dict[tuple[int, int | None], str] = {}
        vendor: int | None = None
        klass: int | None = None
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            try:
                if line.startswith("C "):
                    code, name = line[2:].split(None, 1)
                    klass, vendor = int(code, 16), None
                    classes[(klass, None)] = name.strip()
                elif line.startswith("\t\t"):
                    continue
                elif line.startswith("\t"):
                    code, name = line[1:].split(None, 1)
                    if vendor is not None:
                        devices[(vendor, int(code, 16))] = name.strip()
                    elif klass is not None:
                        classes[(klass, int(code, 16))] = name.strip()
                else:
                    code, name = line.split(None, 1)
                    vendor, klass = int(code, 16), None
                    vendors[vendor] = name.strip()
            except ValueError:
                continue  # lines of other lists in the file (the file's own format, not ours)
        return cls(vendors, devices, classes)

    def class_name(self, class_code: int) -> str:
        base, sub = class_code >> 16, (class_code >> 8) & 0xFF
        return (self.classes.get((base, sub)) or self.classes.get((base, None))
                or f"Class {class_code >> 8:04x}")


# ---------------------------------------------------------------------------------------- CLI
def describe(dev: SysfsPCIDevice, ids: PciIds) -> list[str]:
    """lspci-like lines for one function: address, class, IDs, driver, BARs, capabilities."""
    vendor, device, klass = dev.vendor_id, dev.device_id, dev.class_code
    vname = ids.vendors.get(vendor, "")
    dname = ids.devices.get((vendor, device), "")
    name = " ".join(x for x in (vname, dname) if x) or "unknown device"
    head = (f"{dev.address} {ids.class_name(klass)} [{klass >> 8:04x}]: {name} "
            f"[{vendor:04x}:{device:04x}] (rev {dev.revision:02x})")
    lines = [head]
    drv = dev.driver
    if drv:
        lines.append(f"\tKernel driver in use: {drv}")
    if dev.header_type == R.PCI_HEADER_TYPE_NORMAL:
        try:
            lines += [f"\t{b}" for b in dev.bars() if b.size_B]
        except PCIError as e:
            lines.append(f"\tBARs: {e}")
    try:
        caps = dev.capabilities()
        lines += [f"\tCapabilities: {c}" for c in caps] or ["\tCapabilities: none"]
    except ConfigAccessDenied:
        lines.append("\tCapabilities: <access denied> (reading them needs root)")
    return lines


def main(argv: Sequence[str] | None = None, seam: OSSeam | None = None,
         out: Callable[[str], None] = print) -> int:
    """`python -m runtime.drivers.pci list [--root DIR] [ADDRESS...]`. Exit codes: 0 ok, 1 no PCI
    bus or a function could not be read, 2 bad usage."""
    parser = argparse.ArgumentParser(prog="python -m runtime.drivers.pci",
                                     description="PCI functions through sysfs, like a small lspci")
    sub = parser.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="print PCI functions with IDs, class, BARs and capabilities")
    ls.add_argument("addresses", nargs="*", help="only these functions (DDDD:BB:DD.F)")
    ls.add_argument("--root", default=SYSFS_PCI_DEVICES, help="sysfs PCI devices directory")
    args = parser.parse_args(argv)
    seam = seam or RealOS()
    try:
        addrs = ([PCIAddress.parse(a) for a in args.addresses] if args.addresses
                 else list_devices(seam, args.root))
    except (PCIError, ValueError) as e:
        print(f"pci: {e}", file=sys.stderr)
        return 1
    ids = PciIds.load(seam)
    status = 0
    for addr in addrs:
        try:
            with SysfsPCIDevice(seam, addr, root=args.root) as dev:
                for line in describe(dev, ids):
                    out(line)
        except PCIError as e:
            print(f"pci: {e}", file=sys.stderr)
            status = 1
        out("")
    return status


if __name__ == "__main__":
    sys.exit(main())
