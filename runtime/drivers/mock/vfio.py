"""Mock VFIO: /dev/vfio/vfio, /dev/vfio/<group> and vfio-pci device files over mock PCI functions.

`MockVfio` installs into a `MockOS` and answers the VFIO ioctls (argument structs and request
numbers from the generated `vfio` bindings) with the checks the kernel makes, in the kernel's order
(Linux 6.x: drivers/vfio/container.c, group.c, vfio_main.c, vfio_iommu_type1.c,
pci/vfio_pci_core.c, pci/vfio_pci_intrs.c, pci/vfio_pci_rdwr.c):

- container: API version, extension checks, VFIO_SET_IOMMU only after a group is attached and only
  once; the IOMMU (type1 and type1v2) records DMA mappings, rejects unaligned, overlapping,
  out-of-range (the x86 MSI window is reserved) and unbacked ones, unmaps with v1 or v2 semantics,
  and drops everything when the last group leaves;
- group: opened by one file at a time; SET_CONTAINER fails with EBUSY while a function of the group
  is bound to a driver that owns DMA (the group is not viable); GET_DEVICE_FD needs a container with
  an IOMMU set; UNSET_CONTAINER fails while devices are open;
- device: argsz checked as the kernel does (minsz, capability chains returned only when argsz has
  room, otherwise argsz reports the size needed); region info with the kernel's flags and
  index << 40 offsets; config space and BARs backed by memory through pread/pwrite (BAR access
  needs memory decoding enabled, as vfio_pci_rdwr.c checks) and mmap; INTx/MSI/MSI-X/ERR/REQ
  triggers through eventfds, fired by `MockPCIFunction.raise_interrupt` (the simulated device) or
  by loopback SET_IRQS; reset; and device-side DMA through the IOMMU (`dma_read`/`dma_write`).

Each function also appears in the mock sysfs (vendor, device, class, resource, uevent, config,
resourceN, /sys/kernel/iommu_groups), so the sysfs backend can be tested against it too.
Kernel objects are counted in `MockOS.live_objects` (containers, open groups and devices, DMA
mappings, interrupt triggers) so tests can prove that a driver released everything.

Not modelled: VFIO_DMA_MAP_FLAG_VADDR / VFIO_UPDATE_VADDR, dirty-page tracking, hot reset, device
features, iommufd, and the MSI-X table contents (vectors are enabled through SET_IRQS only).
"""
from __future__ import annotations

import ctypes
import errno as E
import functools
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from hcq_bindings.linux import pci_regs as R
from hcq_bindings.linux import vfio as V

from runtime.drivers.mock.os import EventFd, MockFile, MockOS

PAGE = 4096
VFIO_PCI_OFFSET_SHIFT = 40  # drivers/vfio/pci/vfio_pci_priv.h: region index in the top offset bits
VFIO_PCI_OFFSET_MASK = (1 << VFIO_PCI_OFFSET_SHIFT) - 1
# Type1 on x86 with 4K/2M/1G IOMMU pages; dma_entry_limit defaults to U16_MAX (vfio_iommu_type1.c).
TYPE1_PGSIZES = (1 << 12) | (1 << 21) | (1 << 30)
DMA_ENTRY_LIMIT = 0xFFFF
# IOVA ranges a 48-bit x86 IOMMU offers: all but the reserved MSI window 0xfee00000-0xfeefffff
# (iommu_get_resv_regions → vfio_iommu_iova_build_caps).
IOVA_RANGES = ((0, 0xFEDF_FFFF), (0xFEF0_0000, (1 << 48) - 1))
# Drivers that leave DMA ownership to their user (driver_managed_dma): a group whose functions are
# all bound to these, or unbound, is viable (drivers/iommu/iommu.c: iommu_group_claim_dma_owner).
DMA_NEUTRAL_DRIVERS = frozenset({"vfio-pci", "pci-stub", "pcieport"})
VFIO_DRIVER = "vfio-pci"
SYSFS_PCI = "/sys/bus/pci/devices"
SYSFS_GROUPS = "/sys/kernel/iommu_groups"
# struct resource flags for the sysfs `resource` file (include/linux/ioport.h).
_IORESOURCE_IO, _IORESOURCE_MEM = 0x100, 0x200
_IORESOURCE_PREFETCH, _IORESOURCE_MEM_64, _IORESOURCE_SIZEALIGN = 0x2000, 0x100000, 0x40000
_U64 = (1 << 64) - 1


class IOMMUFault(Exception):
    """A mock device's DMA hit an IOVA the IOMMU does not map (or maps without that permission),
    or the device was not allowed to master the bus. The mock also logs it like the kernel's DMAR
    fault lines."""


# ---------------------------------------------------------------------------------------- helpers
def _user(arg: Any, size: int) -> Any:
    """The user buffer behind an ioctl argument, at least `size` bytes (copy_from_user faults with
    EFAULT on a bad pointer: a by-value integer or a too-small buffer)."""
    if arg is None or isinstance(arg, int) or ctypes.sizeof(arg) < size:
        raise OSError(E.EFAULT, "bad address")
    return (ctypes.c_char * ctypes.sizeof(arg)).from_buffer(arg)


def _copy_in(arg: Any, struct_type: Any, minsz: int) -> Any:
    """copy_from_user of the first `minsz` bytes into a fresh struct."""
    buf = _user(arg, minsz)
    out = struct_type()
    ctypes.memmove(ctypes.addressof(out), buf, minsz)
    return out


def _copy_out(arg: Any, data: bytes, at: int = 0) -> None:
    """copy_to_user of `data` at byte `at` of the argument."""
    buf = _user(arg, at + len(data))
    ctypes.memmove(ctypes.addressof(buf) + at, data, len(data))


def _offsetofend(struct_type: Any, name: str) -> int:
    f = getattr(struct_type, name)
    return int(f.offset + f.size)


def _cap_chain(caps: list[tuple[int, int, bytes]]) -> bytes:
    """A vfio_info_cap chain (vfio_info_cap_add): each capability (id, version, body) gets a
    vfio_info_cap_header and is padded to 8 bytes; `next` is an offset from the chain's start, 0 at
    the end. The caller shifts the offsets to where the chain lands (vfio_info_cap_shift)."""
    out = bytearray()
    hdr_size = ctypes.sizeof(V.vfio_info_cap_header)
    for i, (cap_id, version, body) in enumerate(caps):
        size = (hdr_size + len(body) + 7) & ~7
        nxt = len(out) + size if i + 1 < len(caps) else 0
        hdr = V.vfio_info_cap_header(id=cap_id, version=version, next=nxt)
        out += bytes(hdr) + body + bytes(size - hdr_size - len(body))
    return bytes(out)


def _attach_chain(arg: Any, info: Any, chain: bytes, caps_flag: int) -> None:
    """Puts a capability chain behind the info struct `info`, as the kernel's info ioctls do: sets
    `caps_flag`; if the caller's argsz cannot hold the chain, only raises argsz (the caller asks
    again with a larger buffer), else copies the chain, shifted, to just past the struct and
    points cap_offset at it."""
    info.flags |= caps_flag
    base = ctypes.sizeof(type(info))
    if info.argsz < base + len(chain):
        info.argsz = base + len(chain)
    else:
        _copy_out(arg, _shift_chain(chain, base), base)
        info.cap_offset = base


def _shift_chain(chain: bytes, by: int) -> bytes:
    """vfio_info_cap_shift: rebases every non-zero `next` by `by`."""
    out = bytearray(chain)
    pos = 0
    while True:
        hdr = V.vfio_info_cap_header.from_buffer_copy(bytes(out[pos:pos + 8]))
        if hdr.next == 0:
            return bytes(out)
        nxt = hdr.next
        hdr.next = nxt + by
        out[pos:pos + 8] = bytes(hdr)
        pos = nxt


# ---------------------------------------------------------------------------------------- config
class ConfigSpace:
    """A function's config space: bytes plus a per-byte mask of the bits software may change.
    Writes keep read-only bits (hardware drops writes to them); a BAR's mask clears the bits below
    its size, so writing all ones and reading back sizes it, as on hardware."""

    def __init__(self, size: int) -> None:
        self.data = np.zeros(size, dtype=np.uint8)
        self.wmask = np.zeros(size, dtype=np.uint8)
        self._last_std: int | None = None
        self._last_ext: int | None = None

    @property
    def size(self) -> int:
        return len(self.data)

    def put(self, offset: int, value: int, width: int, wmask: int = 0) -> None:
        """Sets a register's initial value and writable bits."""
        self.data[offset:offset + width] = np.frombuffer(value.to_bytes(width, "little"), np.uint8)
        self.wmask[offset:offset + width] = np.frombuffer(wmask.to_bytes(width, "little"), np.uint8)

    def get(self, offset: int, width: int) -> int:
        return int.from_bytes(self.data[offset:offset + width].tobytes(), "little")

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset:offset + size].tobytes()

    def write(self, offset: int, data: bytes) -> None:
        new = np.frombuffer(data, np.uint8)
        span = slice(offset, offset + len(data))
        self.data[span] = (self.data[span] & ~self.wmask[span]) | (new & self.wmask[span])

    def add_capability(self, offset: int, cap_id: int, body: bytes = b"") -> int:
        """Links a standard capability at `offset` (ID, next, then `body` from byte 2)."""
        self.data[offset] = cap_id
        self.data[offset + 2:offset + 2 + len(body)] = np.frombuffer(body, np.uint8)
        if self._last_std is None:
            self.data[R.PCI_CAPABILITY_LIST] = offset
            self.put(R.PCI_STATUS, self.get(R.PCI_STATUS, 2) | R.PCI_STATUS_CAP_LIST, 2)
        else:
            self.data[self._last_std + R.PCI_CAP_LIST_NEXT] = offset
        self._last_std = offset
        return offset

    def add_ext_capability(self, offset: int, cap_id: int, version: int, body: bytes = b"") -> int:
        """Links an extended capability at `offset` (the first must be at 0x100)."""
        if self._last_ext is None and offset != R.PCI_CFG_SPACE_SIZE:
            raise ValueError("the first extended capability lives at 0x100")
        self.put(offset, cap_id | (version << 16), 4)
        self.data[offset + 4:offset + 4 + len(body)] = np.frombuffer(body, np.uint8)
        if self._last_ext is not None:
            hdr = self.get(self._last_ext, 4)
            self.put(self._last_ext, (hdr & 0xFFFFF) | (offset << 20), 4)
        self._last_ext = offset
        return offset


@dataclass(frozen=True)
class MockBar:
    """A BAR of a mock function. `registers` BARs are device registers and read as zeros after a
    reset; others (VRAM apertures) keep their contents."""

    size_B: int
    io: bool = False
    is_64bit: bool = False
    prefetchable: bool = False
    registers: bool = False


@dataclass
class _Trigger:
    """An eventfd a device interrupt signals (the kernel holds an eventfd_ctx reference, so closing
    the user's descriptor does not disarm it)."""

    eventfd: EventFd
    fd: int


class MockPCIFunction:
    """A virtual PCI function: config space, memory behind its BARs, and interrupt lines.

    `raise_interrupt` is what the device does when it wants attention; `dma_read`/`dma_write` are
    its bus-master accesses, translated by the IOMMU of the container its group is attached to.
    """

    def __init__(self, address: str, *, vendor_id: int, device_id: int, class_code: int,
                 revision: int = 0, subsystem: tuple[int, int] = (0, 0),
                 bars: dict[int, MockBar] | None = None, express: bool = True,
                 msi_vectors: int = 1, msix_vectors: int = 0, msix_bar: int = 0,
                 msix_table_offset: int = 0, interrupt_pin: int = 1, flr: bool = True,
                 driver: str | None = VFIO_DRIVER,
                 ext_caps: Iterable[tuple[int, int, int]] = ()) -> None:
        self.address = address
        self.driver = driver
        self.bar_specs = dict(bars or {})
        self.express, self.flr = express, flr
        self.msi_vectors, self.msix_vectors = msi_vectors, msix_vectors
        self.msix_bar, self.msix_table_offset = msix_bar, msix_table_offset
        self.class_code = class_code
        self.machine: MockVfio | None = None
        self.group: _Group | None = None
        self.open_count = 0
        self.reset_count = 0
        self.irq_type: int | None = None        # VFIO_PCI_{INTX,MSI,MSIX}_IRQ_INDEX while enabled
        self.triggers: dict[tuple[int, int], _Trigger] = {}
        self.intx_masked = False
        self.intx_pending = False
        self.cfg = ConfigSpace(R.PCI_CFG_SPACE_EXP_SIZE if express else R.PCI_CFG_SPACE_SIZE)
        self.bar_memory: dict[int, np.ndarray] = {}
        self.bar_address: dict[int, int] = {}
        self._build_config(vendor_id, device_id, class_code, revision, subsystem, interrupt_pin,
                           list(ext_caps))

    # ------------------------------------------------------------------ construction
    def _build_config(self, vendor_id: int, device_id: int, class_code: int, revision: int,
                      subsystem: tuple[int, int], interrupt_pin: int,
                      ext_caps: list[tuple[int, int, int]]) -> None:
        c = self.cfg
        c.put(R.PCI_VENDOR_ID, vendor_id, 2)
        c.put(R.PCI_DEVICE_ID, device_id, 2)
        cmd_bits = (R.PCI_COMMAND_IO | R.PCI_COMMAND_MEMORY | R.PCI_COMMAND_MASTER
                    | R.PCI_COMMAND_PARITY | R.PCI_COMMAND_SERR | R.PCI_COMMAND_INTX_DISABLE)
        c.put(R.PCI_COMMAND, 0, 2, cmd_bits)
        c.put(R.PCI_REVISION_ID, revision, 1)
        c.put(R.PCI_CLASS_PROG, class_code, 3)
        c.put(R.PCI_CACHE_LINE_SIZE, 0, 1, 0xFF)
        c.put(R.PCI_LATENCY_TIMER, 0, 1, 0xFF)
        c.put(R.PCI_HEADER_TYPE, R.PCI_HEADER_TYPE_NORMAL, 1)
        c.put(R.PCI_SUBSYSTEM_VENDOR_ID, subsystem[0], 2)
        c.put(R.PCI_SUBSYSTEM_ID, subsystem[1], 2)
        c.put(R.PCI_INTERRUPT_LINE, 0xFF, 1, 0xFF)
        c.put(R.PCI_INTERRUPT_PIN, interrupt_pin, 1)
        # Bus addresses as firmware would assign them: naturally aligned, 64-bit BARs high.
        next_addr = {"io": 0xE000, "mem32": 0xF000_0000, "mem64": 0x80_0000_0000}
        for index, bar in sorted(self.bar_specs.items()):
            kind = "io" if bar.io else ("mem64" if bar.is_64bit else "mem32")
            addr = (next_addr[kind] + bar.size_B - 1) & ~(bar.size_B - 1)
            next_addr[kind] = addr + bar.size_B
            self.bar_address[index] = addr
            reg = R.PCI_BASE_ADDRESS_0 + 4 * index
            if bar.io:
                low = addr | R.PCI_BASE_ADDRESS_SPACE_IO
                c.put(reg, low, 4, ~(bar.size_B - 1) & R.PCI_BASE_ADDRESS_IO_MASK & 0xFFFFFFFF)
            else:
                low = (addr & 0xFFFFFFFF) | (R.PCI_BASE_ADDRESS_MEM_TYPE_64 if bar.is_64bit else 0)
                low |= R.PCI_BASE_ADDRESS_MEM_PREFETCH if bar.prefetchable else 0
                mask = ~(bar.size_B - 1) & _U64
                c.put(reg, low, 4, mask & R.PCI_BASE_ADDRESS_MEM_MASK & 0xFFFFFFFF)
                if bar.is_64bit:
                    c.put(reg + 4, addr >> 32, 4, mask >> 32)
            # Memory BARs are backed by whole pages so they can be mapped (vfio_pci_core_enable
            # reserves the rest of a sub-page BAR's page).
            self.bar_memory[index] = np.zeros(max(bar.size_B, PAGE if not bar.io else 0),
                                              dtype=np.uint8)
        pos = 0x40
        c.add_capability(pos, R.PCI_CAP_ID_PM, (3).to_bytes(2, "little"))  # PM version 3
        c.put(pos + R.PCI_PM_CTRL, 0, 2, R.PCI_PM_CTRL_STATE_MASK)
        pos += 0x10
        if self.express:
            flags = 2 | (R.PCI_EXP_TYPE_LEG_END << 4)  # capability version 2, legacy endpoint
            devcap = R.PCI_EXP_DEVCAP_FLR if self.flr else 0
            body = flags.to_bytes(2, "little") + devcap.to_bytes(4, "little")
            c.add_capability(pos, R.PCI_CAP_ID_EXP, body)
            c.put(pos + R.PCI_EXP_DEVCTL, 0x2810, 2, 0x7FFF)
            pos += 0x40
        if self.msi_vectors:
            mmc = (self.msi_vectors - 1).bit_length()  # log2 of the vectors it can request
            flags = R.PCI_MSI_FLAGS_64BIT | (mmc << 1)
            c.add_capability(pos, R.PCI_CAP_ID_MSI, flags.to_bytes(2, "little"))
            c.put(pos + R.PCI_MSI_FLAGS, flags, 2, R.PCI_MSI_FLAGS_ENABLE | R.PCI_MSI_FLAGS_QSIZE)
            pos += 0x20
        if self.msix_vectors:
            flags = self.msix_vectors - 1
            table = self.msix_table_offset | self.msix_bar
            pba = (self.msix_table_offset + 16 * self.msix_vectors) | self.msix_bar
            body = (flags.to_bytes(2, "little") + table.to_bytes(4, "little")
                    + pba.to_bytes(4, "little"))
            c.add_capability(pos, R.PCI_CAP_ID_MSIX, body)
            c.put(pos + R.PCI_MSIX_FLAGS, flags, 2,
                  R.PCI_MSIX_FLAGS_ENABLE | R.PCI_MSIX_FLAGS_MASKALL)
            pos += 0x10
        if ext_caps and not self.express:
            raise ValueError("extended capabilities need a PCI Express function")
        for offset, cap_id, version in ext_caps:
            c.add_ext_capability(offset, cap_id, version)

    @classmethod
    def navi31(cls, address: str = "0000:03:00.0", **kw: Any) -> "MockPCIFunction":
        """An AMD Radeon RX 7900 XTX-like GPU (1002:744c): 256M VRAM aperture, doorbells, I/O
        ports, 1M of registers with the MSI-X table, and a typical set of extended capabilities."""
        bars = {0: MockBar(256 << 20, is_64bit=True, prefetchable=True),
                2: MockBar(2 << 20, is_64bit=True, prefetchable=True),
                4: MockBar(256, io=True),
                5: MockBar(1 << 20, registers=True)}
        ext = [(0x100, R.PCI_EXT_CAP_ID_VNDR, 1), (0x150, R.PCI_EXT_CAP_ID_ERR, 2),
               (0x200, R.PCI_EXT_CAP_ID_REBAR, 1), (0x270, R.PCI_EXT_CAP_ID_SECPCI, 1),
               (0x2A0, R.PCI_EXT_CAP_ID_ACS, 1), (0x320, R.PCI_EXT_CAP_ID_LTR, 1),
               (0x400, R.PCI_EXT_CAP_ID_DLF, 1)]
        args: dict[str, Any] = dict(vendor_id=0x1002, device_id=0x744C, class_code=0x030000,
                                    revision=0xC8, subsystem=(0x1002, 0x0E3B), bars=bars,
                                    msi_vectors=1, msix_vectors=16, msix_bar=5,
                                    msix_table_offset=0x42000, ext_caps=ext)
        args.update(kw)
        return cls(address, **args)

    @classmethod
    def hdmi_audio(cls, address: str = "0000:03:00.1", **kw: Any) -> "MockPCIFunction":
        """The HDMI audio function that shares a GPU's IOMMU group (1002:ab30)."""
        args: dict[str, Any] = dict(vendor_id=0x1002, device_id=0xAB30, class_code=0x040300,
                                    subsystem=(0x1002, 0xAB30), bars={0: MockBar(16 << 10)},
                                    msi_vectors=1, ext_caps=[(0x100, R.PCI_EXT_CAP_ID_ERR, 2)])
        args.update(kw)
        return cls(address, **args)

    # ------------------------------------------------------------------ state
    @property
    def command(self) -> int:
        return self.cfg.get(R.PCI_COMMAND, 2)

    def capability(self, cap_id: int) -> int | None:
        """Offset of standard capability `cap_id`, walking the list as the kernel does."""
        pos = int(self.cfg.data[R.PCI_CAPABILITY_LIST]) & ~3
        while pos >= 0x40:
            if self.cfg.data[pos] == cap_id:
                return pos
            pos = int(self.cfg.data[pos + 1]) & ~3
        return None

    def irq_count(self, index: int) -> int:
        """vfio_pci_get_irq_count."""
        if index == V.VFIO_PCI_INTX_IRQ_INDEX:
            return 1 if self.cfg.get(R.PCI_INTERRUPT_PIN, 1) else 0
        if index == V.VFIO_PCI_MSI_IRQ_INDEX:
            pos = self.capability(R.PCI_CAP_ID_MSI)
            if pos is None:
                return 0
            return 1 << ((self.cfg.get(pos + R.PCI_MSI_FLAGS, 2) & R.PCI_MSI_FLAGS_QMASK) >> 1)
        if index == V.VFIO_PCI_MSIX_IRQ_INDEX:
            pos = self.capability(R.PCI_CAP_ID_MSIX)
            if pos is None:
                return 0
            return (self.cfg.get(pos + R.PCI_MSIX_FLAGS, 2) & R.PCI_MSIX_FLAGS_QSIZE) + 1
        if index == V.VFIO_PCI_ERR_IRQ_INDEX:
            return 1 if self.express else 0
        if index == V.VFIO_PCI_REQ_IRQ_INDEX:
            return 1
        return 0

    # ------------------------------------------------------------------ the simulated device
    def raise_interrupt(self, index: int = V.VFIO_PCI_MSIX_IRQ_INDEX, vector: int = 0) -> bool:
        """The device asserts interrupt `vector` of `index`; True when an eventfd was signalled.

        INTx is level-triggered and automasked (vfio_intx_handler): it signals once and stays
        masked until VFIO_IRQ_SET_ACTION_UNMASK; an interrupt while masked stays pending and fires
        on unmask. MSI/MSI-X signal the vector's eventfd when that mode is enabled."""
        if index == V.VFIO_PCI_INTX_IRQ_INDEX:
            if self.irq_type != index or self.command & R.PCI_COMMAND_INTX_DISABLE:
                return False
            if self.intx_masked:
                self.intx_pending = True
                return False
            return self._fire_intx()
        msi = index in (V.VFIO_PCI_MSI_IRQ_INDEX, V.VFIO_PCI_MSIX_IRQ_INDEX)
        if msi and self.irq_type != index:
            return False
        trig = self.triggers.get((index, vector))
        if trig is None:
            return False
        trig.eventfd.signal()
        return True

    def _fire_intx(self) -> bool:
        trig = self.triggers.get((V.VFIO_PCI_INTX_IRQ_INDEX, 0))
        self.intx_masked, self.intx_pending = True, False
        if trig is None:
            return False
        trig.eventfd.signal()
        return True

    def _iommu(self) -> "_Type1":
        if not self.command & R.PCI_COMMAND_MASTER:
            raise IOMMUFault(f"{self.address}: DMA with bus mastering disabled "
                             f"(PCI_COMMAND_MASTER)")
        cont = self.group.container if self.group else None
        if cont is None or cont.iommu is None:
            raise IOMMUFault(f"{self.address}: DMA without an IOMMU domain")
        return cont.iommu

    def dma_read(self, iova: int, size: int) -> bytes:
        """The device reads host memory at `iova`, through the IOMMU."""
        return bytes(self._iommu().translate(self, iova, size, write=False))

    def dma_write(self, iova: int, data: bytes) -> None:
        """The device writes host memory at `iova`, through the IOMMU."""
        span = self._iommu().translate(self, iova, len(data), write=True)
        span[:] = np.frombuffer(data, np.uint8)

    # ------------------------------------------------------------------ kernel-side device ops
    def enable(self) -> None:
        """vfio_pci_core_enable → pci_enable_device: decode the BARs it has."""
        cmd = self.command
        if any(not b.io for b in self.bar_specs.values()):
            cmd |= R.PCI_COMMAND_MEMORY
        if any(b.io for b in self.bar_specs.values()):
            cmd |= R.PCI_COMMAND_IO
        self._set_command(cmd)

    def disable(self) -> None:
        """vfio_pci_core_disable: interrupts off, bus mastering and decoding off."""
        self.disable_irqs()
        self._set_command(self.command & ~(R.PCI_COMMAND_MASTER | R.PCI_COMMAND_MEMORY
                                           | R.PCI_COMMAND_IO))

    def _set_command(self, cmd: int) -> None:
        self.cfg.data[R.PCI_COMMAND:R.PCI_COMMAND + 2] = np.frombuffer(
            cmd.to_bytes(2, "little"), np.uint8)

    def disable_irqs(self) -> None:
        self.triggers.clear()
        self.irq_type = None
        self.intx_masked = self.intx_pending = False

    def reset(self) -> None:
        """A function-level reset: registers back to zero; the kernel saves and restores config
        space around it (pci_try_reset_function), so config reads are unchanged."""
        self.reset_count += 1
        for index, bar in self.bar_specs.items():
            if bar.registers:
                self.bar_memory[index][:] = 0
        if self.machine:
            self.machine.os.log_kernel(f"vfio-pci {self.address}: reset (FLR)")


# ---------------------------------------------------------------------------------------- IOMMU
@dataclass
class _Dma:
    iova: int
    size: int
    vaddr: int
    prot: int  # VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE (device's point of view)
    backing: np.ndarray


class _Type1:
    """The vfio_iommu_type1 state of one container."""

    def __init__(self, machine: "MockVfio", v2: bool) -> None:
        self.machine, self.v2 = machine, v2
        self.dmas: list[_Dma] = []
        self.dma_avail = DMA_ENTRY_LIMIT

    @property
    def page_mask(self) -> int:
        return (TYPE1_PGSIZES & -TYPE1_PGSIZES) - 1

    def find(self, start: int, size: int) -> _Dma | None:
        """vfio_find_dma: a mapping overlapping [start, start + size)."""
        return next((d for d in self.dmas if d.iova < start + size and start < d.iova + d.size),
                    None)

    def map(self, m: Any) -> None:
        """vfio_dma_do_map."""
        prot = m.flags & (V.VFIO_DMA_MAP_FLAG_READ | V.VFIO_DMA_MAP_FLAG_WRITE)
        if not prot or not m.size or (m.size | m.iova | m.vaddr) & self.page_mask:
            raise OSError(E.EINVAL, "map: no access flags, zero size, or not page aligned")
        if m.iova + m.size - 1 > _U64 or m.vaddr + m.size - 1 > _U64:
            raise OSError(E.EINVAL, "map: address wraps")
        if self.find(m.iova, m.size):
            raise OSError(E.EEXIST, "map: IOVA range already mapped")
        if not self.dma_avail:
            raise OSError(E.ENOSPC, "map: dma_entry_limit reached")
        if not any(lo <= m.iova and m.iova + m.size - 1 <= hi for lo, hi in IOVA_RANGES):
            raise OSError(E.EINVAL, "map: IOVA range outside the IOMMU's valid ranges")
        backing = self.machine.os.host_region(m.vaddr, m.size)  # pinning: EFAULT if not memory
        self.dma_avail -= 1
        self.dmas.append(_Dma(m.iova, m.size, m.vaddr, prot, backing))

    def unmap(self, u: Any) -> int:
        """vfio_dma_do_unmap; returns the bytes unmapped."""
        if u.flags & V.VFIO_DMA_UNMAP_FLAG_ALL:
            if u.iova or u.size:
                raise OSError(E.EINVAL, "unmap all: iova and size must be 0")
            total = sum(d.size for d in self.dmas)
            self.dma_avail += len(self.dmas)
            self.dmas.clear()
            return total
        if u.iova & self.page_mask or not u.size or u.size & self.page_mask:
            raise OSError(E.EINVAL, "unmap: zero size or not page aligned")
        if u.iova + u.size - 1 > _U64:
            raise OSError(E.EINVAL, "unmap: range wraps")
        if self.v2:  # v2 may not bisect a mapping
            d = self.find(u.iova, 1)
            if d and d.iova != u.iova:
                raise OSError(E.EINVAL, "unmap: range starts inside a mapping")
            d = self.find(u.iova + u.size - 1, 1)
            if d and d.iova + d.size != u.iova + u.size:
                raise OSError(E.EINVAL, "unmap: range ends inside a mapping")
        total = 0
        while (d := self.find(u.iova, u.size)) is not None:
            if not self.v2 and u.iova > d.iova:
                break  # v1: an unmap offset into a mapping unmaps nothing and succeeds
            total += d.size
            self.dmas.remove(d)
            self.dma_avail += 1
        return total

    def translate(self, fn: MockPCIFunction, iova: int, size: int, write: bool) -> np.ndarray:
        d = self.find(iova, 1)
        need = V.VFIO_DMA_MAP_FLAG_WRITE if write else V.VFIO_DMA_MAP_FLAG_READ
        if d is None or iova + size > d.iova + d.size or not d.prot & need:
            kind = "Write" if write else "Read"
            self.machine.os.log_kernel(
                f"DMAR: [DMA {kind}] Request device [{fn.address}] fault addr {iova:#x} "
                f"[fault reason 0x05] PTE {'Write' if write else 'Read'} access is not set")
            raise IOMMUFault(f"{fn.address}: DMA {kind.lower()} of {size} B at IOVA {iova:#x} is "
                             f"not mapped for {'writing' if write else 'reading'}")
        off = iova - d.iova
        return d.backing[off:off + size]


@dataclass(eq=False)
class _Container:
    machine: "MockVfio"
    file_open: bool = True
    groups: list["_Group"] = field(default_factory=list)
    iommu: _Type1 | None = None


@dataclass(eq=False)
class _Group:
    id: int
    functions: list[MockPCIFunction] = field(default_factory=list)
    opened: bool = False             # group->opened_file
    release_pending: bool = False    # file closed while device files still hold it
    container: _Container | None = None
    open_devices: int = 0

    def viable(self) -> bool:
        return all(f.driver is None or f.driver in DMA_NEUTRAL_DRIVERS for f in self.functions)

    def vfio_functions(self) -> list[MockPCIFunction]:
        return [f for f in self.functions if f.driver == VFIO_DRIVER]


# ---------------------------------------------------------------------------------------- files
class _ContainerFile(MockFile):
    path = "/dev/vfio/vfio"

    def __init__(self, machine: "MockVfio") -> None:
        self.machine = machine
        self.container = _Container(machine)
        machine.containers.append(self.container)

    def ioctl(self, request: int, arg: Any) -> int:
        c = self.container
        if request == V.VFIO_GET_API_VERSION:
            return V.VFIO_API_VERSION
        # Both take their argument by value; a pointer there is just a number no driver knows.
        value = arg if isinstance(arg, int) else -1
        if request == V.VFIO_CHECK_EXTENSION:
            return self.machine.check_extension(c, value)
        if request == V.VFIO_SET_IOMMU:
            if not c.groups or c.iommu is not None:
                raise OSError(E.EINVAL, "VFIO_SET_IOMMU: no group attached, or IOMMU already set")
            kind = value
            if kind not in (V.VFIO_TYPE1_IOMMU, V.VFIO_TYPE1v2_IOMMU):
                raise OSError(E.ENODEV, f"no IOMMU driver supports type {kind}")
            c.iommu = _Type1(self.machine, kind == V.VFIO_TYPE1v2_IOMMU)
            return 0
        if c.iommu is None:
            raise OSError(E.EINVAL, "container has no IOMMU set")  # vfio_fops_unl_ioctl default
        if request == V.VFIO_IOMMU_GET_INFO:
            return self._get_info(arg)
        if request == V.VFIO_IOMMU_MAP_DMA:
            minsz = _offsetofend(V.vfio_iommu_type1_dma_map, "size")
            m = _copy_in(arg, V.vfio_iommu_type1_dma_map, minsz)
            if m.argsz < minsz or m.flags & ~(V.VFIO_DMA_MAP_FLAG_READ | V.VFIO_DMA_MAP_FLAG_WRITE
                                              | V.VFIO_DMA_MAP_FLAG_VADDR):
                raise OSError(E.EINVAL, "map: argsz too small or unknown flags")
            if m.flags & V.VFIO_DMA_MAP_FLAG_VADDR:
                self.machine.os.log_kernel("mock vfio: VFIO_DMA_MAP_FLAG_VADDR is not modelled")
                raise OSError(E.EINVAL, "map: VFIO_DMA_MAP_FLAG_VADDR is not supported")
            c.iommu.map(m)
            return 0
        if request == V.VFIO_IOMMU_UNMAP_DMA:
            minsz = _offsetofend(V.vfio_iommu_type1_dma_unmap, "size")
            u = _copy_in(arg, V.vfio_iommu_type1_dma_unmap, minsz)
            if u.argsz < minsz or u.flags & ~V.VFIO_DMA_UNMAP_FLAG_ALL:
                raise OSError(E.EINVAL, "unmap: argsz too small or unsupported flags")
            u.size = c.iommu.unmap(u)
            _copy_out(arg, bytes(u)[:minsz])
            return 0
        raise OSError(E.ENOTTY, f"type1: unknown ioctl {request:#x}")

    def _get_info(self, arg: Any) -> int:
        """vfio_iommu_type1_get_info: migration, DMA-available and IOVA-range capabilities."""
        assert self.container.iommu is not None
        minsz = _offsetofend(V.vfio_iommu_type1_info, "iova_pgsizes")
        capsz = _offsetofend(V.vfio_iommu_type1_info, "cap_offset")
        info = _copy_in(arg, V.vfio_iommu_type1_info, minsz)
        if info.argsz < minsz:
            raise OSError(E.EINVAL, "iommu info: argsz too small")
        if info.argsz >= capsz:
            minsz, info.cap_offset = capsz, 0
        info.flags = V.VFIO_IOMMU_INFO_PGSIZES
        info.iova_pgsizes = TYPE1_PGSIZES
        mig = V.vfio_iommu_type1_info_cap_migration(flags=0, pgsize_bitmap=TYPE1_PGSIZES,
                                                    max_dirty_bitmap_size=256 << 20)
        hdr_size = ctypes.sizeof(V.vfio_info_cap_header)
        ranges = b"".join(bytes(V.vfio_iova_range(start=lo, end=hi)) for lo, hi in IOVA_RANGES)
        iova_body = len(IOVA_RANGES).to_bytes(4, "little") + bytes(4) + ranges
        chain = _cap_chain([
            (V.VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION, 1, bytes(mig)[hdr_size:]),
            (V.VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL, 1,
             self.container.iommu.dma_avail.to_bytes(4, "little")),
            (V.VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, 1, iova_body)])
        _attach_chain(arg, info, chain, V.VFIO_IOMMU_INFO_CAPS)
        _copy_out(arg, bytes(info)[:minsz])
        return 0

    def close(self) -> None:
        self.container.file_open = False  # groups still attached keep it (and its IOMMU) alive
        self.machine.reap()


class _GroupFile(MockFile):
    def __init__(self, machine: "MockVfio", group: _Group) -> None:
        self.machine, self.group = machine, group
        self.path = f"/dev/vfio/{group.id}"

    def ioctl(self, request: int, arg: Any) -> int:
        g = self.group
        if request == V.VFIO_GROUP_GET_STATUS:
            minsz = _offsetofend(V.vfio_group_status, "flags")
            st = _copy_in(arg, V.vfio_group_status, minsz)
            if st.argsz < minsz:
                raise OSError(E.EINVAL, "group status: argsz too small")
            st.flags = 0
            if g.container is not None:
                st.flags |= V.VFIO_GROUP_FLAGS_CONTAINER_SET | V.VFIO_GROUP_FLAGS_VIABLE
            elif g.viable():
                st.flags |= V.VFIO_GROUP_FLAGS_VIABLE
            _copy_out(arg, bytes(st)[:minsz])
            return 0
        if request == V.VFIO_GROUP_SET_CONTAINER:
            fd = int.from_bytes(bytes(_user(arg, 4))[:4], "little", signed=True)
            try:
                target = self.machine.os.file(fd)
            except OSError:
                raise OSError(E.EBADF, f"bad file descriptor {fd}") from None
            if g.container is not None:
                raise OSError(E.EINVAL, "group already has a container")
            if not isinstance(target, _ContainerFile):
                raise OSError(E.EBADFD, f"fd {fd} is not a VFIO container")
            if not g.viable():  # iommu_group_claim_dma_owner
                raise OSError(E.EBUSY, "a device of the group is bound to a DMA-owning driver")
            g.container = target.container
            target.container.groups.append(g)
            return 0
        if request == V.VFIO_GROUP_UNSET_CONTAINER:
            if g.container is None:
                raise OSError(E.EINVAL, "group has no container")
            if g.open_devices:
                raise OSError(E.EBUSY, "devices of the group are open")
            self.machine.detach(g)
            return 0
        if request == V.VFIO_GROUP_GET_DEVICE_FD:
            raw = bytes(_user(arg, 1))
            if b"\0" not in raw:
                raise OSError(E.EFAULT, "device name is not NUL-terminated")
            name = raw.split(b"\0", 1)[0].decode(errors="replace")
            fn = next((f for f in g.vfio_functions() if f.address == name), None)
            if fn is None:
                raise OSError(E.ENODEV, f"no VFIO device {name!r} in group {g.id}")
            if g.container is None or g.container.iommu is None:
                raise OSError(E.EINVAL, "group needs a container with an IOMMU set")
            if fn.open_count == 0:
                fn.enable()
            fn.open_count += 1
            g.open_devices += 1
            return self.machine.os.install(_DeviceFile(self.machine, fn))
        raise OSError(E.ENOTTY, f"group: unknown ioctl {request:#x}")

    def close(self) -> None:
        # Device files hold the group file: its release waits until they are closed.
        self.group.release_pending = True
        self.machine.release_group(self.group)


class _DeviceFile(MockFile):
    path = "anon_inode:[vfio-device]"

    def __init__(self, machine: "MockVfio", fn: MockPCIFunction) -> None:
        self.machine, self.fn = machine, fn

    # ------------------------------------------------------------------ ioctls
    def ioctl(self, request: int, arg: Any) -> int:
        handler = {
            int(V.VFIO_DEVICE_GET_INFO): self._get_info,
            int(V.VFIO_DEVICE_GET_REGION_INFO): self._region_info,
            int(V.VFIO_DEVICE_GET_IRQ_INFO): self._irq_info,
            int(V.VFIO_DEVICE_SET_IRQS): self._set_irqs,
            int(V.VFIO_DEVICE_RESET): self._reset,
        }.get(request)
        if handler is None:
            raise OSError(E.ENOTTY, f"vfio-pci: unknown ioctl {request:#x}")
        return handler(arg)

    def _get_info(self, arg: Any) -> int:
        minsz = _offsetofend(V.vfio_device_info, "num_irqs")
        capsz = _offsetofend(V.vfio_device_info, "cap_offset")
        info = _copy_in(arg, V.vfio_device_info, minsz)
        if info.argsz < minsz:
            raise OSError(E.EINVAL, "device info: argsz too small")
        if info.argsz >= capsz:
            minsz, info.cap_offset = capsz, 0  # no capabilities on x86
        info.flags = V.VFIO_DEVICE_FLAGS_PCI | (V.VFIO_DEVICE_FLAGS_RESET if self.fn.flr else 0)
        info.num_regions = V.VFIO_PCI_NUM_REGIONS
        info.num_irqs = V.VFIO_PCI_NUM_IRQS
        _copy_out(arg, bytes(info)[:minsz])
        return 0

    def _region(self, index: int) -> tuple[int, int, list[tuple[int, int, bytes]]]:
        """(size, flags, capabilities) of a region, as vfio_pci_ioctl_get_region_info answers."""
        fn = self.fn
        rw = V.VFIO_REGION_INFO_FLAG_READ | V.VFIO_REGION_INFO_FLAG_WRITE
        if index == V.VFIO_PCI_CONFIG_REGION_INDEX:
            return fn.cfg.size, rw, []
        if V.VFIO_PCI_BAR0_REGION_INDEX <= index <= V.VFIO_PCI_BAR5_REGION_INDEX:
            bar = fn.bar_specs.get(index)
            if bar is None:
                return 0, 0, []
            if bar.io:
                return bar.size_B, rw, []
            flags = rw | V.VFIO_REGION_INFO_FLAG_MMAP
            caps: list[tuple[int, int, bytes]] = []
            if fn.msix_vectors and index == fn.msix_bar:
                if self.machine.legacy_msix_sparse:
                    areas = [a for a in self.machine.msix_sparse_areas(fn) if a[1]]
                    body = len(areas).to_bytes(4, "little") + bytes(4) + b"".join(
                        bytes(V.vfio_region_sparse_mmap_area(offset=o, size=s)) for o, s in areas)
                    caps.append((V.VFIO_REGION_INFO_CAP_SPARSE_MMAP, 1, body))
                else:
                    caps.append((V.VFIO_REGION_INFO_CAP_MSIX_MAPPABLE, 1, b""))
            return bar.size_B, flags, caps
        if index == V.VFIO_PCI_ROM_REGION_INDEX:
            return 0, 0, []  # the mock functions have no expansion ROM
        if index == V.VFIO_PCI_VGA_REGION_INDEX:
            if fn.class_code >> 8 != 0x0300:
                raise OSError(E.EINVAL, "no VGA region")
            return 0xC0000, rw, []
        raise OSError(E.EINVAL, f"no region {index}")

    def _region_info(self, arg: Any) -> int:
        minsz = _offsetofend(V.vfio_region_info, "offset")
        info = _copy_in(arg, V.vfio_region_info, minsz)
        if info.argsz < minsz:
            raise OSError(E.EINVAL, "region info: argsz too small")
        size, flags, caps = self._region(info.index)
        info.offset = info.index << VFIO_PCI_OFFSET_SHIFT
        info.size, info.flags, info.cap_offset = size, flags, 0
        if caps:
            _attach_chain(arg, info, _cap_chain(caps), V.VFIO_REGION_INFO_FLAG_CAPS)
        _copy_out(arg, bytes(info)[:minsz])
        return 0

    def _irq_info(self, arg: Any) -> int:
        minsz = _offsetofend(V.vfio_irq_info, "count")
        info = _copy_in(arg, V.vfio_irq_info, minsz)
        if info.argsz < minsz or info.index >= V.VFIO_PCI_NUM_IRQS:
            raise OSError(E.EINVAL, "irq info: argsz too small or bad index")
        if info.index == V.VFIO_PCI_ERR_IRQ_INDEX and not self.fn.express:
            raise OSError(E.EINVAL, "ERR interrupts need PCI Express")
        info.flags = V.VFIO_IRQ_INFO_EVENTFD
        info.count = self.fn.irq_count(info.index)
        if info.index == V.VFIO_PCI_INTX_IRQ_INDEX:
            info.flags |= V.VFIO_IRQ_INFO_MASKABLE | V.VFIO_IRQ_INFO_AUTOMASKED
        else:
            info.flags |= V.VFIO_IRQ_INFO_NORESIZE
        _copy_out(arg, bytes(info)[:minsz])
        return 0

    def _set_irqs(self, arg: Any) -> int:
        """vfio_pci_ioctl_set_irqs: vfio_set_irqs_validate_and_prepare, then the index's handler."""
        minsz = _offsetofend(V.vfio_irq_set, "count")
        hdr = _copy_in(arg, V.vfio_irq_set, minsz)
        max_count = self.fn.irq_count(hdr.index) if hdr.index < V.VFIO_PCI_NUM_IRQS else 0
        if (hdr.argsz < minsz or hdr.index >= V.VFIO_PCI_NUM_IRQS
                or hdr.flags & ~(V.VFIO_IRQ_SET_DATA_TYPE_MASK | V.VFIO_IRQ_SET_ACTION_TYPE_MASK)):
            raise OSError(E.EINVAL, "set irqs: argsz, index or flags")
        if hdr.start >= max_count or hdr.start + hdr.count > max_count:
            raise OSError(E.EINVAL, "set irqs: start/count beyond the index's interrupts")
        data_type = hdr.flags & V.VFIO_IRQ_SET_DATA_TYPE_MASK
        size = {V.VFIO_IRQ_SET_DATA_NONE: 0, V.VFIO_IRQ_SET_DATA_BOOL: 1,
                V.VFIO_IRQ_SET_DATA_EVENTFD: 4}.get(data_type)
        if size is None:
            raise OSError(E.EINVAL, "set irqs: exactly one data type")
        data = b""
        if size:
            if hdr.argsz - minsz < hdr.count * size:
                raise OSError(E.EINVAL, "set irqs: argsz leaves no room for the data")
            data = bytes(_user(arg, minsz + hdr.count * size))[minsz:minsz + hdr.count * size]
        action = hdr.flags & V.VFIO_IRQ_SET_ACTION_TYPE_MASK
        if action not in (V.VFIO_IRQ_SET_ACTION_MASK, V.VFIO_IRQ_SET_ACTION_UNMASK,
                          V.VFIO_IRQ_SET_ACTION_TRIGGER):
            raise OSError(E.EINVAL, "set irqs: exactly one action")
        index = hdr.index
        if index == V.VFIO_PCI_INTX_IRQ_INDEX:
            return self._intx(action, data_type, hdr.start, hdr.count, data)
        if action != V.VFIO_IRQ_SET_ACTION_TRIGGER:
            raise OSError(E.ENOTTY, "only INTx can be masked")  # vfio_pci_set_irqs_ioctl: no func
        if index in (V.VFIO_PCI_MSI_IRQ_INDEX, V.VFIO_PCI_MSIX_IRQ_INDEX):
            return self._msi(index, data_type, hdr.start, hdr.count, data)
        return self._single(index, data_type, hdr.count, data)

    def _eventfd(self, fd: int) -> EventFd:
        try:
            f = self.machine.os.file(fd)
        except OSError:
            raise OSError(E.EBADF, f"bad file descriptor {fd}") from None
        if not isinstance(f, EventFd):
            raise OSError(E.EINVAL, f"fd {fd} is not an eventfd")
        return f

    def _fds(self, data: bytes, count: int) -> list[int]:
        return [int.from_bytes(data[4 * i:4 * i + 4], "little", signed=True) for i in range(count)]

    def _intx(self, action: int, data_type: int, start: int, count: int, data: bytes) -> int:
        fn = self.fn
        key = (V.VFIO_PCI_INTX_IRQ_INDEX, 0)
        is_intx = fn.irq_type == V.VFIO_PCI_INTX_IRQ_INDEX
        if action in (V.VFIO_IRQ_SET_ACTION_MASK, V.VFIO_IRQ_SET_ACTION_UNMASK):
            if not is_intx or start != 0 or count != 1:
                raise OSError(E.EINVAL, "INTx mask/unmask needs INTx enabled, start 0, count 1")
            if data_type == V.VFIO_IRQ_SET_DATA_EVENTFD:
                raise OSError(E.EINVAL, "irqfd masking is not modelled")
            if data_type == V.VFIO_IRQ_SET_DATA_BOOL and not data[0]:
                return 0
            if action == V.VFIO_IRQ_SET_ACTION_MASK:
                fn.intx_masked = True
            else:
                fn.intx_masked = False
                if fn.intx_pending:  # vfio_pci_intx_unmask_handler: a pending interrupt fires
                    fn._fire_intx()
            return 0
        if is_intx and count == 0 and data_type == V.VFIO_IRQ_SET_DATA_NONE:
            fn.disable_irqs()
            return 0
        if not (is_intx or fn.irq_type is None) or start != 0 or count != 1:
            raise OSError(E.EINVAL, "INTx trigger needs no other interrupt mode, start 0, count 1")
        if data_type == V.VFIO_IRQ_SET_DATA_EVENTFD:
            fd = self._fds(data, 1)[0]
            if fd >= 0:
                fn.triggers[key] = _Trigger(self._eventfd(fd), fd)
                fn.irq_type = V.VFIO_PCI_INTX_IRQ_INDEX
            elif is_intx:
                fn.disable_irqs()
            return 0
        if not is_intx:
            raise OSError(E.EINVAL, "INTx is not enabled")
        if data_type == V.VFIO_IRQ_SET_DATA_NONE or data[0]:
            fn._fire_intx()  # loopback: as if the device asserted INTx
        return 0

    def _msi(self, index: int, data_type: int, start: int, count: int, data: bytes) -> int:
        """vfio_pci_set_msi_trigger."""
        fn = self.fn
        if fn.irq_type == index and count == 0 and data_type == V.VFIO_IRQ_SET_DATA_NONE:
            fn.disable_irqs()
            return 0
        if not (fn.irq_type == index or fn.irq_type is None):
            raise OSError(E.EINVAL, "another interrupt mode is enabled")
        if data_type == V.VFIO_IRQ_SET_DATA_EVENTFD:
            fds = self._fds(data, count)
            new = {}
            for i, fd in enumerate(fds):  # validate all first: a bad fd enables nothing
                if fd >= 0:
                    new[(index, start + i)] = _Trigger(self._eventfd(fd), fd)
            for i, fd in enumerate(fds):
                if fd < 0:
                    fn.triggers.pop((index, start + i), None)
            fn.triggers.update(new)
            fn.irq_type = index
            return 0
        if fn.irq_type != index:
            raise OSError(E.EINVAL, "this interrupt mode is not enabled")
        for i in range(count):
            if data_type == V.VFIO_IRQ_SET_DATA_NONE or data[i]:
                trig = fn.triggers.get((index, start + i))
                if trig:
                    trig.eventfd.signal()
        return 0

    def _single(self, index: int, data_type: int, count: int, data: bytes) -> int:
        """vfio_pci_set_ctx_trigger_single (ERR and REQ)."""
        triggers = self.fn.triggers
        key = (index, 0)
        if data_type == V.VFIO_IRQ_SET_DATA_NONE:
            if key in triggers:
                if count:
                    triggers[key].eventfd.signal()
                else:
                    del triggers[key]
            return 0
        if not count:
            raise OSError(E.EINVAL, "count must be 1")
        if data_type == V.VFIO_IRQ_SET_DATA_BOOL:
            if data[0] and key in triggers:
                triggers[key].eventfd.signal()
            return 0
        fd = self._fds(data, 1)[0]
        if fd == -1:
            triggers.pop(key, None)
        elif fd >= 0:
            triggers[key] = _Trigger(self._eventfd(fd), fd)
        else:
            raise OSError(E.EINVAL, f"bad eventfd {fd}")
        return 0

    def _reset(self, arg: Any) -> int:
        if not self.fn.flr:
            raise OSError(E.EINVAL, "device has no reset method")
        self.fn.reset()
        return 0

    # ------------------------------------------------------------------ read/write/mmap
    def _split(self, offset: int) -> tuple[int, int]:
        index, pos = offset >> VFIO_PCI_OFFSET_SHIFT, offset & VFIO_PCI_OFFSET_MASK
        if index >= V.VFIO_PCI_NUM_REGIONS:
            raise OSError(E.EINVAL, f"no region {index}")
        return index, pos

    def _bar_span(self, index: int, pos: int, count: int) -> np.ndarray:
        fn = self.fn
        bar = fn.bar_specs.get(index)
        if bar is None:
            raise OSError(E.EINVAL, f"BAR{index} is not implemented")
        if not bar.io and not fn.command & R.PCI_COMMAND_MEMORY:
            raise OSError(E.EIO, "memory decoding is disabled (PCI_COMMAND_MEMORY)")
        if pos >= bar.size_B:
            raise OSError(E.EINVAL, f"offset {pos:#x} beyond BAR{index}")
        return fn.bar_memory[index][pos:pos + min(count, bar.size_B - pos)]

    def pread(self, offset: int, size: int) -> bytes:
        index, pos = self._split(offset)
        if index == V.VFIO_PCI_CONFIG_REGION_INDEX:
            if pos >= self.fn.cfg.size or pos + size > self.fn.cfg.size:
                raise OSError(E.EFAULT, "config access beyond config space")
            return self.fn.cfg.read(pos, size)
        if index <= V.VFIO_PCI_BAR5_REGION_INDEX:
            return self._bar_span(index, pos, size).tobytes()
        raise OSError(E.EINVAL, f"region {index} cannot be read")

    def pwrite(self, offset: int, data: bytes) -> int:
        index, pos = self._split(offset)
        if index == V.VFIO_PCI_CONFIG_REGION_INDEX:
            if pos >= self.fn.cfg.size or pos + len(data) > self.fn.cfg.size:
                raise OSError(E.EFAULT, "config access beyond config space")
            self.fn.cfg.write(pos, data)
            return len(data)
        if index <= V.VFIO_PCI_BAR5_REGION_INDEX:
            span = self._bar_span(index, pos, len(data))
            span[:] = np.frombuffer(data[:len(span)], np.uint8)
            return len(span)
        raise OSError(E.EINVAL, f"region {index} cannot be written")

    def mmap(self, offset: int, size: int, prot: int) -> tuple[np.ndarray, None]:
        """vfio_pci_core_mmap."""
        index, pos = self._split(offset)
        fn = self.fn
        bar = fn.bar_specs.get(index) if index <= V.VFIO_PCI_BAR5_REGION_INDEX else None
        if bar is None or bar.io:
            raise OSError(E.EINVAL, f"region {index} cannot be mapped")
        length = -(-size // PAGE) * PAGE
        phys_len = -(-bar.size_B // PAGE) * PAGE
        if pos % PAGE or pos + length > phys_len:
            raise OSError(E.EINVAL, f"[{pos:#x}, +{length:#x}) is outside BAR{index}")
        if fn.msix_vectors and index == fn.msix_bar and self.machine.legacy_msix_sparse:
            lo, hi = self.machine.msix_table_pages(fn)
            if pos < hi and lo < pos + length:
                raise OSError(E.EINVAL, "mapping would cover the MSI-X table")
        return fn.bar_memory[index][pos:pos + length], None

    def close(self) -> None:
        fn, g = self.fn, self.fn.group
        fn.open_count -= 1
        if fn.open_count == 0:
            fn.disable()
        if g is not None:
            g.open_devices -= 1
            self.machine.release_group(g)


class _SysfsConfigFile(MockFile):
    """/sys/bus/pci/devices/<address>/config: the raw config space, 64 bytes to the unprivileged
    (pci-sysfs.c: pci_read_config)."""

    def __init__(self, machine: "MockVfio", fn: MockPCIFunction) -> None:
        self.machine, self.fn = machine, fn
        self.path = f"{SYSFS_PCI}/{fn.address}/config"

    def pread(self, offset: int, size: int) -> bytes:
        limit = self.fn.cfg.size if self.machine.privileged else 64
        if offset >= limit:
            return b""
        return self.fn.cfg.read(offset, min(size, limit - offset))

    def pwrite(self, offset: int, data: bytes) -> int:
        if offset >= self.fn.cfg.size:
            return 0
        data = data[:self.fn.cfg.size - offset]
        self.fn.cfg.write(offset, data)
        return len(data)


class _SysfsResourceFile(MockFile):
    """/sys/bus/pci/devices/<address>/resourceN: mmap of a memory BAR (pci_mmap_resource)."""

    def __init__(self, fn: MockPCIFunction, index: int) -> None:
        self.fn, self.index = fn, index
        self.path = f"{SYSFS_PCI}/{fn.address}/resource{index}"

    def mmap(self, offset: int, size: int, prot: int) -> tuple[np.ndarray, None]:
        bar = self.fn.bar_specs[self.index]
        length = -(-size // PAGE) * PAGE
        if bar.io or offset % PAGE or offset + length > max(bar.size_B, PAGE):
            raise OSError(E.EINVAL, f"cannot map [{offset:#x}, +{size:#x}) of {self.path}")
        return self.fn.bar_memory[self.index][offset:offset + length], None


# ---------------------------------------------------------------------------------------- machine
class MockVfio:
    """The VFIO part of a mock kernel: IOMMU groups of mock PCI functions, the container device,
    group devices, and the sysfs view of the functions.

    `privileged` is whether the process counts as root for sysfs (config reads past 64 bytes,
    writable `config`, `resourceN`). `legacy_msix_sparse` answers region info for the MSI-X BAR as
    kernels before 4.16 did: a sparse-mmap capability that leaves out the MSI-X table.
    """

    def __init__(self, mos: MockOS, *, privileged: bool = True,
                 legacy_msix_sparse: bool = False) -> None:
        self.os = mos
        self.privileged = privileged
        self.legacy_msix_sparse = legacy_msix_sparse
        self.groups: dict[int, _Group] = {}
        self.functions: dict[str, MockPCIFunction] = {}
        self.containers: list[_Container] = []
        implemented = (V.VFIO_GET_API_VERSION, V.VFIO_CHECK_EXTENSION, V.VFIO_SET_IOMMU,
                       V.VFIO_GROUP_GET_STATUS, V.VFIO_GROUP_SET_CONTAINER,
                       V.VFIO_GROUP_UNSET_CONTAINER, V.VFIO_GROUP_GET_DEVICE_FD,
                       V.VFIO_DEVICE_GET_INFO, V.VFIO_DEVICE_GET_REGION_INFO,
                       V.VFIO_DEVICE_GET_IRQ_INFO, V.VFIO_DEVICE_SET_IRQS, V.VFIO_DEVICE_RESET,
                       V.VFIO_IOMMU_GET_INFO, V.VFIO_IOMMU_MAP_DMA, V.VFIO_IOMMU_UNMAP_DMA)
        # Several VFIO requests share numbers (device and IOMMU ioctls go to different files), so
        # only the ones answered here are named.
        mos.name_requests({int(r): r.name for r in implemented})
        mos.add_device("/dev/vfio/vfio", lambda flags: _ContainerFile(self))
        mos.add_counter(self.live_objects)
        mos.drivers.append(self)

    @classmethod
    def gpu_machine(cls, *, audio_driver: str | None = VFIO_DRIVER, group: int = 12,
                    **kw: Any) -> tuple[MockOS, "MockVfio"]:
        """A mock machine with a Navi 31-like GPU and its HDMI audio function in one IOMMU group.
        With `audio_driver="snd_hda_intel"` the group is not viable."""
        mos = MockOS()
        vfio = cls(mos, **kw)
        vfio.add_function(MockPCIFunction.navi31(), group)
        vfio.add_function(MockPCIFunction.hdmi_audio(driver=audio_driver), group)
        return mos, vfio

    # ------------------------------------------------------------------ topology
    def add_function(self, fn: MockPCIFunction, group: int) -> MockPCIFunction:
        """Plugs in a function, in IOMMU group `group`, and publishes it in sysfs."""
        if fn.address in self.functions:
            raise ValueError(f"{fn.address} already exists")
        fn.machine = self
        g = self.groups.get(group)
        if g is None:
            g = self.groups[group] = _Group(group)
            self.os.add_device(f"/dev/vfio/{group}", functools.partial(self._open_group, g))
        g.functions.append(fn)
        fn.group = g
        self.functions[fn.address] = fn
        self.os.add_device(f"{SYSFS_PCI}/{fn.address}/config",
                           functools.partial(self._open_sysfs_config, fn))
        for index in fn.bar_specs:
            self.os.add_device(f"{SYSFS_PCI}/{fn.address}/resource{index}",
                               functools.partial(self._open_resource, fn, index))
        self._publish(fn)
        return fn

    def bind(self, address: str, driver: str | None) -> None:
        """Binds a function to `driver` (None: unbound), as driver_override + drivers_probe do."""
        fn = self.functions[address]
        if fn.open_count:
            raise OSError(E.EBUSY, f"{address} is open through VFIO")
        fn.driver = driver
        self._publish(fn)

    def _publish(self, fn: MockPCIFunction) -> None:
        fs, base = self.os.sysfs, f"{SYSFS_PCI}/{fn.address}"
        c = fn.cfg
        vendor, device = c.get(R.PCI_VENDOR_ID, 2), c.get(R.PCI_DEVICE_ID, 2)
        sv, sd = c.get(R.PCI_SUBSYSTEM_VENDOR_ID, 2), c.get(R.PCI_SUBSYSTEM_ID, 2)
        fs[f"{base}/vendor"] = f"{vendor:#06x}\n"
        fs[f"{base}/device"] = f"{device:#06x}\n"
        fs[f"{base}/class"] = f"{fn.class_code:#08x}\n"
        fs[f"{base}/revision"] = f"{c.get(R.PCI_REVISION_ID, 1):#04x}\n"
        fs[f"{base}/subsystem_vendor"] = f"{sv:#06x}\n"
        fs[f"{base}/subsystem_device"] = f"{sd:#06x}\n"
        rows = []
        for i in range(7):
            bar = fn.bar_specs.get(i)
            if bar is None:
                rows.append((0, 0, 0))
                continue
            start = fn.bar_address[i]
            low = c.get(R.PCI_BASE_ADDRESS_0 + 4 * i, 1) & 0xF
            if bar.io:
                flags = _IORESOURCE_IO | _IORESOURCE_SIZEALIGN | (low & 0x3)
            else:
                flags = _IORESOURCE_MEM | _IORESOURCE_SIZEALIGN | low
                flags |= (_IORESOURCE_PREFETCH if bar.prefetchable else 0)
                flags |= (_IORESOURCE_MEM_64 if bar.is_64bit else 0)
            rows.append((start, start + bar.size_B - 1, flags))
        fs[f"{base}/resource"] = "".join(f"0x{a:016x} 0x{b:016x} 0x{f:016x}\n" for a, b, f in rows)
        uevent = (f"PCI_CLASS={fn.class_code:X}\nPCI_ID={vendor:04X}:{device:04X}\n"
                  f"PCI_SUBSYS_ID={sv:04X}:{sd:04X}\nPCI_SLOT_NAME={fn.address}\n")
        if fn.driver:
            uevent = f"DRIVER={fn.driver}\n" + uevent
        fs[f"{base}/uevent"] = uevent
        assert fn.group is not None
        fs[f"{SYSFS_GROUPS}/{fn.group.id}/devices/{fn.address}/uevent"] = uevent

    def msix_table_pages(self, fn: MockPCIFunction) -> tuple[int, int]:
        """Page-aligned [start, end) of the MSI-X table in its BAR."""
        lo = fn.msix_table_offset & ~(PAGE - 1)
        hi = -(-(fn.msix_table_offset + 16 * fn.msix_vectors) // PAGE) * PAGE
        return lo, hi

    def msix_sparse_areas(self, fn: MockPCIFunction) -> list[tuple[int, int]]:
        """The mappable (offset, size) areas of the MSI-X BAR around its table (pre-4.16)."""
        lo, hi = self.msix_table_pages(fn)
        size = max(fn.bar_specs[fn.msix_bar].size_B, PAGE)
        return [(0, lo), (hi, size - hi)]

    # ------------------------------------------------------------------ opening
    def _open_group(self, g: _Group, flags: int) -> _GroupFile:
        if not g.vfio_functions():
            # /dev/vfio/N exists only while a function of the group is bound to a VFIO driver.
            raise FileNotFoundError(E.ENOENT, f"No such file or directory: '/dev/vfio/{g.id}'")
        if g.opened:
            raise OSError(E.EBUSY, f"/dev/vfio/{g.id} is already open")
        g.opened, g.release_pending = True, False
        return _GroupFile(self, g)

    def _open_sysfs_config(self, fn: MockPCIFunction, flags: int) -> _SysfsConfigFile:
        if flags & (os.O_WRONLY | os.O_RDWR) and not self.privileged:
            raise PermissionError(E.EACCES, f"Permission denied: '{SYSFS_PCI}/{fn.address}/config'")
        return _SysfsConfigFile(self, fn)

    def _open_resource(self, fn: MockPCIFunction, index: int, flags: int) -> _SysfsResourceFile:
        if not self.privileged:
            raise PermissionError(E.EACCES, f"Permission denied: '{SYSFS_PCI}/{fn.address}/"
                                            f"resource{index}'")
        return _SysfsResourceFile(fn, index)

    # ------------------------------------------------------------------ kernel object lifetimes
    def check_extension(self, c: _Container, ext: int) -> int:
        if ext in (V.VFIO_TYPE1_IOMMU, V.VFIO_TYPE1v2_IOMMU, V.VFIO_UNMAP_ALL):
            return 1
        if ext == V.VFIO_DMA_CC_IOMMU:
            return 1 if c.iommu is not None else 0
        return 0

    def detach(self, g: _Group) -> None:
        """vfio_group_detach_container: the last group out takes the IOMMU (and its mappings)."""
        c = g.container
        assert c is not None
        c.groups.remove(g)
        g.container = None
        if not c.groups:
            c.iommu = None
        self.reap()

    def release_group(self, g: _Group) -> None:
        if g.release_pending and g.open_devices == 0:
            if g.container is not None:
                self.detach(g)
            g.opened = g.release_pending = False

    def reap(self) -> None:
        self.containers = [c for c in self.containers if c.file_open or c.groups]

    def live_objects(self) -> dict[str, int]:
        """Kernel objects alive: containers, open groups and devices, DMA mappings, irq triggers."""
        return {
            "vfio_containers": len(self.containers),
            "vfio_groups_open": sum(g.opened for g in self.groups.values()),
            "vfio_devices_open": sum(f.open_count for f in self.functions.values()),
            "vfio_dma_mappings": sum(len(c.iommu.dmas) for c in self.containers if c.iommu),
            "vfio_irq_triggers": sum(len(f.triggers) for f in self.functions.values()),
        }

    def dma_mappings(self) -> list[tuple[int, int, int, int]]:
        """(iova, size, vaddr, flags) of every DMA mapping of every container, sorted."""
        return sorted((d.iova, d.size, d.vaddr, d.prot) for c in self.containers if c.iommu
                      for d in c.iommu.dmas)
