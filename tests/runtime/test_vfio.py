"""The VFIO backend against the mock VFIO kernel (runtime.drivers.mock.vfio).

The driver path (`open_vfio_device`, `VfioContainer`/`VfioGroup`/`VfioDevice`) is exercised end to
end; the mock's kernel behaviour (call order, argsz, region info, DMA bookkeeping, interrupts) is
also checked with raw generated ioctls so it cannot drift into agreeing with driver bugs. Every
test ends by checking that the mock kernel holds no object the test did not release.
"""
from __future__ import annotations

import ctypes
import errno as E
import os
from typing import Any, Iterator

import pytest

from hcq_bindings.linux import pci_regs as R
from hcq_bindings.linux import vfio as V
from runtime.drivers.mock.os import MockOS
from runtime.drivers.mock.vfio import (IOMMUFault, MockBar, MockPCIFunction, MockVfio,
                                       VFIO_PCI_OFFSET_SHIFT)
from runtime.drivers.pci import PCIDevice, PCIError, SysfsPCIDevice
from runtime.drivers.vfio import (InterruptTimeout, VfioContainer, VfioDevice, open_vfio_device)
from runtime.hcq.errors import DeviceNotFound, IoctlError
from runtime.hcq.seam import MAP_ANONYMOUS, MAP_PRIVATE, PROT_READ, PROT_WRITE, RealOS

GPU, AUDIO = "0000:03:00.0", "0000:03:00.1"
IDLE = {"fds": 0, "mappings": 0, "vfio_containers": 0, "vfio_groups_open": 0,
        "vfio_devices_open": 0, "vfio_dma_mappings": 0, "vfio_irq_triggers": 0}


@pytest.fixture()
def machine() -> Iterator[tuple[MockOS, MockVfio]]:
    mos, vfio = MockVfio.gpu_machine()
    yield mos, vfio
    assert mos.live_objects() == IDLE, "the test leaked kernel objects"


@pytest.fixture()
def dev(machine: tuple[MockOS, MockVfio]) -> Iterator[VfioDevice]:
    mos, _ = machine
    d = open_vfio_device(mos, GPU)
    yield d
    d.close()


def raw(mos: MockOS, req: Any, fd: int, arg: Any = None) -> tuple[int, Any]:
    """A generated request issued straight at the mock kernel: (result, argument)."""
    result: list[int] = []

    def sys_ioctl(f: int, r: int, a: Any) -> int:
        result.append(mos.ioctl(f, r, a))
        return result[-1]

    out = req(fd, arg, ioctl=sys_ioctl)
    return result[0], out


def host_memory(mos: MockOS, size: int) -> Any:
    return mos.mmap(None, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)


# ---------------------------------------------------------------------------------------- happy
def test_open_and_describe(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    mos, _ = machine
    assert isinstance(dev, PCIDevice)
    assert dev.info.num_regions == V.VFIO_PCI_NUM_REGIONS and dev.info.num_irqs == 5
    assert dev.info.can_reset and dev.container.api_version == V.VFIO_API_VERSION
    assert dev.container.iommu_type == V.VFIO_TYPE1v2_IOMMU
    assert dev.group.id == 12 and dev.group.status().container_set
    assert mos.live_objects() == {**IDLE, "fds": 3, "vfio_containers": 1, "vfio_groups_open": 1,
                                  "vfio_devices_open": 1}
    assert (dev.vendor_id, dev.device_id, dev.class_code) == (0x1002, 0x744C, 0x030000)
    assert dev.config_size == 4096
    # the same capabilities the sysfs backend walks, from the same config space
    with SysfsPCIDevice(mos, GPU) as sysfs:
        assert dev.capabilities() == sysfs.capabilities()
        assert dev.config() == sysfs.config()
    assert [c.name for c in dev.capabilities()][:4] == [
        "PCI_CAP_ID_PM", "PCI_CAP_ID_EXP", "PCI_CAP_ID_MSI", "PCI_CAP_ID_MSIX"]
    bars = dev.bars()
    assert [(b.size_B, b.io, b.is_64bit, b.prefetchable, b.mappable) for b in bars] == [
        (256 << 20, False, True, True, True), (0, False, False, False, False),
        (2 << 20, False, True, True, True), (0, False, False, False, False),
        (256, True, False, False, False), (1 << 20, False, False, False, True)]
    assert bars[0].address == 0x80_0000_0000 and bars[4].address == 0xE000


def test_region_info_flags_and_offsets(dev: VfioDevice) -> None:
    rw = V.VFIO_REGION_INFO_FLAG_READ | V.VFIO_REGION_INFO_FLAG_WRITE
    mm = rw | V.VFIO_REGION_INFO_FLAG_MMAP
    want = {0: (mm, 256 << 20), 1: (0, 0), 2: (mm, 2 << 20), 3: (0, 0), 4: (rw, 256),
            5: (mm | V.VFIO_REGION_INFO_FLAG_CAPS, 1 << 20), 6: (0, 0), 7: (rw, 4096),
            8: (rw, 0xC0000)}
    for index, (flags, size) in want.items():
        info = dev.region_info(index)
        assert (info.flags, info.size_B) == (flags, size), index
        assert info.offset == index << VFIO_PCI_OFFSET_SHIFT
    assert dev.region_info(5).msix_mappable and dev.region_info(5).sparse_areas is None
    with pytest.raises(IoctlError, match="VFIO_DEVICE_GET_REGION_INFO.*EINVAL.*no such region"):
        dev.region_info(9)


def test_config_and_bar_access(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    _, vfio = machine
    fn = vfio.functions[GPU]
    # opening enabled decoding (pci_enable_device) but not bus mastering
    assert dev.read16(R.PCI_COMMAND) & (R.PCI_COMMAND_MEMORY | R.PCI_COMMAND_IO) == 3
    dev.enable_bus_master()
    assert dev.read16(R.PCI_COMMAND) & R.PCI_COMMAND_MASTER
    old = dev.read32(R.PCI_BASE_ADDRESS_0)
    dev.write32(R.PCI_BASE_ADDRESS_0, 0xFFFFFFFF)  # sizing: low dword of a 256M 64-bit BAR
    assert dev.read32(R.PCI_BASE_ADDRESS_0) == 0xF000000C
    dev.write32(R.PCI_BASE_ADDRESS_0, old)
    dev.write_region(5, 0x10, b"\xaa\xbb")
    assert bytes(fn.bar_memory[5][0x10:0x12]) == b"\xaa\xbb"
    fn.bar_memory[4][3] = 7
    assert dev.read_region(4, 0, 4) == b"\x00\x00\x00\x07"  # I/O BAR through pread
    with pytest.raises(PCIError, match="outside region 4"):
        dev.read_region(4, 255, 2)
    with pytest.raises(PCIError, match="not writable"):
        dev.write_region(6, 0, b"x")
    with pytest.raises(PCIError, match="outside region 7"):
        dev.read_config(4095, 2)
    # BAR access needs memory decoding, as vfio_pci_rdwr.c checks
    dev.write16(R.PCI_COMMAND, 0)
    with pytest.raises(PCIError, match="PCI_COMMAND_MEMORY"):
        dev.read_region(5, 0, 4)
    dev.enable_bus_master()


def test_bar_mmap(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    mos, vfio = machine
    fn = vfio.functions[GPU]
    vram = dev.map_bar(0, 2 << 20, 1 << 20)
    regs = dev.map_bar(5)
    assert vram.view is not None and regs.view is not None and len(regs.view) == 1 << 20
    vram.view[:3] = b"abc"
    assert bytes(fn.bar_memory[0][2 << 20:(2 << 20) + 3]) == b"abc"
    fn.bar_memory[5][0x42000] = 9  # the MSI-X table page: mappable on modern kernels
    assert regs.view[0x42000] == 9
    assert mos.live_objects()["mappings"] == 2
    dev.unmap(vram)
    with pytest.raises(PCIError, match="not a mapping"):
        dev.unmap(vram)
    with pytest.raises(PCIError, match="BAR4 cannot be mapped"):
        dev.map_bar(4)
    with pytest.raises(PCIError, match="BAR1 cannot be mapped"):
        dev.map_bar(1)
    with pytest.raises(PCIError, match="page aligned"):
        dev.map_bar(0, 100, 4096)
    with pytest.raises(PCIError, match="outside BAR2"):
        dev.map_bar(2, 0, 4 << 20)
    # regs stays mapped: close must unmap it


def test_legacy_sparse_msix_bar() -> None:
    mos, vfio = MockVfio.gpu_machine(legacy_msix_sparse=True)
    dev = open_vfio_device(mos, GPU)
    info = dev.region_info(5)
    assert info.sparse_areas == ((0, 0x42000), (0x43000, (1 << 20) - 0x43000))
    assert not info.msix_mappable
    with pytest.raises(PCIError, match=r"only be mapped within \[0x0, \+0x42000\)"):
        dev.map_bar(5)
    low, high = dev.map_bar(5, 0, 0x42000), dev.map_bar(5, 0x43000, 0x1000)
    assert low.size == 0x42000 and high.size == 0x1000
    # the kernel refuses a mapping over the table even when the driver's check is bypassed
    with pytest.raises(OSError) as e:
        mos.mmap(None, 4096, PROT_READ, 1, dev.fd, info.offset + 0x42000)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    dev.close()
    assert mos.live_objects() == IDLE


def test_iommu_info_and_dma(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    mos, vfio = machine
    fn = vfio.functions[GPU]
    c = dev.container
    info = c.iommu_info()
    assert info.page_size_B == 4096 and info.flags & V.VFIO_IOMMU_INFO_CAPS
    assert info.iova_ranges == ((0, 0xFEDFFFFF), (0xFEF00000, (1 << 48) - 1))
    assert info.dma_avail == 0xFFFF
    host = host_memory(mos, 1 << 16)
    ring = c.map_host(host, 0x10_0000)
    ro = c.map_dma(host.addr, 4096, 0x20_0000, writable=False)  # same pages at a second IOVA
    assert vfio.dma_mappings() == [
        (0x10_0000, 1 << 16, host.addr, V.VFIO_DMA_MAP_FLAG_READ | V.VFIO_DMA_MAP_FLAG_WRITE),
        (0x20_0000, 4096, host.addr, V.VFIO_DMA_MAP_FLAG_READ)]
    assert c.iommu_info().dma_avail == 0xFFFF - 2
    with pytest.raises(IOMMUFault, match="bus mastering"):
        fn.dma_read(0x10_0000, 4)
    dev.enable_bus_master()
    host.view[:5] = b"hello"
    assert fn.dma_read(0x10_0000, 5) == b"hello"
    assert fn.dma_read(0x20_0000, 5) == b"hello"
    fn.dma_write(0x10_0000 + 8, b"world")
    assert bytes(host.view[8:13]) == b"world"
    with pytest.raises(IOMMUFault, match="not mapped for writing"):
        fn.dma_write(0x20_0000, b"x")
    with pytest.raises(IOMMUFault, match="0x300000"):
        fn.dma_read(0x30_0000, 4)
    assert any("DMAR: [DMA Read] Request device [0000:03:00.0] fault addr 0x300000" in line
               for line in mos.kernel_log())
    # overlapping, unaligned, reserved and unbacked mappings are refused with advice
    with pytest.raises(IoctlError, match="VFIO_IOMMU_MAP_DMA.*EEXIST.*overlaps") as e:
        c.map_dma(host.addr, 4096, 0x10_8000)
    assert e.value.errno == E.EEXIST and e.value.name == "VFIO_IOMMU_MAP_DMA"
    with pytest.raises(IoctlError, match="EINVAL.*page size"):
        c.map_dma(host.addr + 1, 4096, 0x40_0000)
    with pytest.raises(IoctlError, match="EINVAL"):
        c.map_dma(host.addr, 4096, 0xFEE0_0000)  # the MSI window
    with pytest.raises(IoctlError, match="EINVAL"):
        c.map_dma(host.addr, 4096, 0x40_0000, readable=False, writable=False)
    with pytest.raises(IoctlError, match="EFAULT.*host memory"):
        c.map_dma(0x7000_0000_0000, 4096, 0x40_0000)
    assert len(c.dma_mappings) == 2
    c.unmap_dma(ro)
    with pytest.raises(PCIError, match="not a DMA mapping"):
        c.unmap_dma(ro)
    with pytest.raises(IOMMUFault):
        fn.dma_read(0x20_0000, 4)
    assert c.dma_mappings == [ring]  # `ring` stays: container close must unmap it
    mos.munmap(host)  # the IOMMU still pins the pages, as the kernel does
    assert fn.dma_read(0x10_0000 + 8, 5) == b"world"


def test_type1v2_unmap_must_cover_whole_mappings(machine: tuple[MockOS, MockVfio],
                                                 dev: VfioDevice) -> None:
    mos, _ = machine
    c = dev.container
    host = host_memory(mos, 3 * 4096)
    c.map_dma(host.addr, 2 * 4096, 0x10_0000)
    c.map_dma(host.addr + 2 * 4096, 4096, 0x10_2000)
    unmap = V.vfio_iommu_type1_dma_unmap
    arg = unmap(argsz=ctypes.sizeof(unmap), iova=0x10_1000, size=4096)
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_IOMMU_UNMAP_DMA, c.fd, arg)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    arg = unmap(argsz=ctypes.sizeof(unmap), iova=0x10_0000, size=3 * 4096)  # both at once
    raw(mos, V.VFIO_IOMMU_UNMAP_DMA, c.fd, arg)  # type: ignore[arg-type]
    assert arg.size == 3 * 4096
    arg = unmap(argsz=ctypes.sizeof(unmap), iova=0x10_0000, size=4096)
    raw(mos, V.VFIO_IOMMU_UNMAP_DMA, c.fd, arg)  # type: ignore[arg-type]
    assert arg.size == 0  # nothing there: success, zero bytes
    c._dma.clear()  # unmapped behind the driver's back above
    mos.munmap(host)


def test_type1_v1_unmap_semantics(machine: tuple[MockOS, MockVfio]) -> None:
    mos, _ = machine
    c = VfioContainer(mos)
    c.attach_group(12)
    c.set_iommu(V.VFIO_TYPE1_IOMMU)
    host = host_memory(mos, 2 * 4096)
    c.map_dma(host.addr, 2 * 4096, 0x10_0000)
    unmap = V.vfio_iommu_type1_dma_unmap
    arg = unmap(argsz=ctypes.sizeof(unmap), iova=0x10_1000, size=4096)
    raw(mos, V.VFIO_IOMMU_UNMAP_DMA, c.fd, arg)  # type: ignore[arg-type]
    assert arg.size == 0  # v1: an unmap inside a mapping succeeds and unmaps nothing
    c.close()
    mos.munmap(host)


def test_interrupts_msix_msi_and_loopback(machine: tuple[MockOS, MockVfio],
                                          dev: VfioDevice) -> None:
    mos, vfio = machine
    fn = vfio.functions[GPU]
    info = dev.irq_info(V.VFIO_PCI_MSIX_IRQ_INDEX)
    assert info.count == 16 and info.flags == V.VFIO_IRQ_INFO_EVENTFD | V.VFIO_IRQ_INFO_NORESIZE
    assert dev.irq_info(V.VFIO_PCI_MSI_IRQ_INDEX).count == 1
    assert dev.irq_info(V.VFIO_PCI_ERR_IRQ_INDEX).count == 1
    intx = dev.irq_info(V.VFIO_PCI_INTX_IRQ_INDEX)
    assert intx.count == 1 and intx.automasked
    assert not fn.raise_interrupt(V.VFIO_PCI_MSIX_IRQ_INDEX, 0)  # nothing routed yet
    fds_before = mos.live_objects()["fds"]
    irqs = dev.enable_interrupts(V.VFIO_PCI_MSIX_IRQ_INDEX)
    assert len(irqs) == 16 and mos.live_objects()["fds"] == fds_before + 16
    assert fn.raise_interrupt(V.VFIO_PCI_MSIX_IRQ_INDEX, 3)
    assert fn.raise_interrupt(V.VFIO_PCI_MSIX_IRQ_INDEX, 3)
    assert [i.pending() for i in irqs[:5]] == [0, 0, 0, 2, 0]
    assert irqs[3].pending() == 0  # reading consumed the count
    dev.trigger_interrupts(V.VFIO_PCI_MSIX_IRQ_INDEX, 10, 2)
    assert irqs[10].wait(100) == 1 and irqs[11].wait(100) == 1
    with pytest.raises(InterruptTimeout, match="vector 12"):
        irqs[12].wait(timeout_ms=5)
    # one interrupt mode at a time
    with pytest.raises(IoctlError, match="VFIO_DEVICE_SET_IRQS.*EINVAL.*disable it first"):
        dev.enable_interrupts(V.VFIO_PCI_MSI_IRQ_INDEX)
    with pytest.raises(PCIError, match="already enabled"):
        dev.enable_interrupts(V.VFIO_PCI_MSIX_IRQ_INDEX)
    dev.disable_interrupts(V.VFIO_PCI_MSIX_IRQ_INDEX)
    assert mos.live_objects()["fds"] == fds_before
    assert mos.live_objects()["vfio_irq_triggers"] == 0
    assert not fn.raise_interrupt(V.VFIO_PCI_MSIX_IRQ_INDEX, 3)
    (msi,) = dev.enable_interrupts(V.VFIO_PCI_MSI_IRQ_INDEX)
    assert fn.raise_interrupt(V.VFIO_PCI_MSI_IRQ_INDEX, 0) and msi.pending() == 1
    with pytest.raises(IoctlError, match="EINVAL"):
        dev.trigger_interrupts(V.VFIO_PCI_MSI_IRQ_INDEX, 0, 2)  # beyond its one vector
    with pytest.raises(IoctlError, match="ENOTTY.*masked"):
        dev._set_irqs(V.VFIO_PCI_MSI_IRQ_INDEX,
                      V.VFIO_IRQ_SET_DATA_NONE | V.VFIO_IRQ_SET_ACTION_MASK, 0, 1)
    # msi stays enabled: close must disable it and close its eventfd


def test_intx_is_automasked(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    _, vfio = machine
    fn = vfio.functions[GPU]
    (line,) = dev.enable_interrupts(V.VFIO_PCI_INTX_IRQ_INDEX)
    assert fn.raise_interrupt(V.VFIO_PCI_INTX_IRQ_INDEX)
    assert not fn.raise_interrupt(V.VFIO_PCI_INTX_IRQ_INDEX)  # masked: pending, not signalled
    assert line.pending() == 1
    dev.unmask_intx()  # the pending interrupt fires on unmask
    assert line.pending() == 1 and fn.intx_masked
    dev.unmask_intx()
    dev.mask_intx()
    assert not fn.raise_interrupt(V.VFIO_PCI_INTX_IRQ_INDEX) and line.pending() == 0
    dev.unmask_intx()
    assert line.pending() == 1
    dev.disable_interrupts(V.VFIO_PCI_INTX_IRQ_INDEX)
    with pytest.raises(IoctlError, match="EINVAL"):
        dev.unmask_intx()  # INTx no longer enabled


def test_err_and_req_triggers(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    _, vfio = machine
    fn = vfio.functions[GPU]
    (err,) = dev.enable_interrupts(V.VFIO_PCI_ERR_IRQ_INDEX)
    (req,) = dev.enable_interrupts(V.VFIO_PCI_REQ_IRQ_INDEX)
    assert fn.raise_interrupt(V.VFIO_PCI_ERR_IRQ_INDEX) and err.pending() == 1
    dev.trigger_interrupts(V.VFIO_PCI_REQ_IRQ_INDEX)
    assert req.pending() == 1 and err.pending() == 0
    dev.disable_interrupts(V.VFIO_PCI_ERR_IRQ_INDEX)
    assert not fn.raise_interrupt(V.VFIO_PCI_ERR_IRQ_INDEX)


def test_set_irqs_argsz_and_descriptor_checks(machine: tuple[MockOS, MockVfio],
                                              dev: VfioDevice) -> None:
    mos, _ = machine
    fd = dev.fd
    size = ctypes.sizeof(V.vfio_irq_set) + 4
    buf = (ctypes.c_uint8 * size)()
    hdr = V.vfio_irq_set.from_buffer(buf)
    hdr.flags = V.VFIO_IRQ_SET_DATA_EVENTFD | V.VFIO_IRQ_SET_ACTION_TRIGGER
    hdr.index, hdr.start, hdr.count = V.VFIO_PCI_MSIX_IRQ_INDEX, 0, 1
    ctypes.c_int32.from_buffer(buf, ctypes.sizeof(V.vfio_irq_set)).value = dev.container.fd or 0
    for argsz, errno in ((ctypes.sizeof(V.vfio_irq_set), E.EINVAL),  # no room for the fd
                         (size, E.EINVAL),                            # a container, not an eventfd
                         (12, E.EINVAL)):                             # below minsz
        hdr.argsz = argsz
        with pytest.raises(OSError) as e:
            raw(mos, V.VFIO_DEVICE_SET_IRQS, fd, buf)  # type: ignore[arg-type]
        assert e.value.errno == errno, argsz
    hdr.argsz, hdr.flags = size, hdr.flags | V.VFIO_IRQ_SET_DATA_BOOL  # two data types
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_DEVICE_SET_IRQS, fd, buf)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    assert mos.live_objects()["vfio_irq_triggers"] == 0


def test_reset(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    mos, vfio = machine
    fn = vfio.functions[GPU]
    fn.bar_memory[5][0:4] = 1
    fn.bar_memory[0][0:4] = 2
    dev.write16(R.PCI_COMMAND, R.PCI_COMMAND_MEMORY | R.PCI_COMMAND_MASTER)
    dev.reset()
    assert fn.reset_count == 1
    assert not fn.bar_memory[5][:4].any() and fn.bar_memory[0][0] == 2  # registers only
    assert dev.read16(R.PCI_COMMAND) == R.PCI_COMMAND_MEMORY | R.PCI_COMMAND_MASTER  # restored
    assert "vfio-pci 0000:03:00.0: reset (FLR)" in mos.kernel_log()


def test_device_without_reset() -> None:
    mos = MockOS()
    vfio = MockVfio(mos)
    vfio.add_function(MockPCIFunction("0000:05:00.0", vendor_id=0x1234, device_id=0x11,
                                      class_code=0x120000, bars={0: MockBar(4096)}, flr=False), 7)
    dev = open_vfio_device(mos, "0000:05:00.0")
    assert not dev.info.can_reset
    with pytest.raises(PCIError, match="no reset"):
        dev.reset()
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_DEVICE_RESET, dev.fd)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    with pytest.raises(IoctlError, match="EINVAL"):
        dev.region_info(V.VFIO_PCI_VGA_REGION_INDEX)  # not a VGA device
    assert dev.irq_info(V.VFIO_PCI_MSIX_IRQ_INDEX).count == 0
    with pytest.raises(PCIError, match="has no vectors"):
        dev.enable_interrupts(V.VFIO_PCI_MSIX_IRQ_INDEX)
    dev.close()
    assert mos.live_objects() == IDLE


# ---------------------------------------------------------------------------------------- order
def test_wrong_order_is_refused_like_the_kernel(machine: tuple[MockOS, MockVfio]) -> None:
    mos, _ = machine
    c = VfioContainer(mos)
    with pytest.raises(IoctlError, match="VFIO_SET_IOMMU.*EINVAL.*attach a group") as e:
        c.set_iommu()
    assert e.value.errno == E.EINVAL
    with pytest.raises(PCIError, match="set the container's IOMMU"):
        c.map_dma(0, 4096, 0)
    with pytest.raises(OSError) as oe:  # the kernel agrees: no IOMMU, no type1 ioctls
        raw(mos, V.VFIO_IOMMU_GET_INFO, c.fd,  # type: ignore[arg-type]
            V.vfio_iommu_type1_info(argsz=ctypes.sizeof(V.vfio_iommu_type1_info)))
    assert oe.value.errno == E.EINVAL
    g = c.attach_group(12)
    assert c.attach_group(12) is g
    with pytest.raises(IoctlError, match="VFIO_GROUP_GET_DEVICE_FD.*EINVAL.*set the container's"):
        g.open_device(GPU)
    assert c.check_extension(V.VFIO_TYPE1v2_IOMMU) and c.check_extension(V.VFIO_TYPE1_IOMMU)
    assert not c.check_extension(V.VFIO_SPAPR_TCE_IOMMU)
    assert not c.check_extension(V.VFIO_DMA_CC_IOMMU)  # asked of no IOMMU yet
    with pytest.raises(PCIError, match="no IOMMU of type 2"):
        c.set_iommu(V.VFIO_SPAPR_TCE_IOMMU)
    with pytest.raises(OSError) as oe:  # the kernel's own answer to an unsupported type
        raw(mos, V.VFIO_SET_IOMMU, c.fd, V.VFIO_SPAPR_TCE_IOMMU)  # type: ignore[arg-type]
    assert oe.value.errno == E.ENODEV
    c.set_iommu()
    assert c.check_extension(V.VFIO_DMA_CC_IOMMU)
    with pytest.raises(IoctlError, match="VFIO_SET_IOMMU.*EINVAL"):
        c.set_iommu()  # only once
    with pytest.raises(IoctlError, match="VFIO_GROUP_GET_DEVICE_FD.*ENODEV"):
        g.open_device("0000:03:00.7")
    d = g.open_device(GPU)
    with pytest.raises(OSError) as oe:  # a group with open devices keeps its container
        raw(mos, V.VFIO_GROUP_UNSET_CONTAINER, g.fd)  # type: ignore[arg-type]
    assert oe.value.errno == E.EBUSY
    with pytest.raises(OSError) as oe:
        raw(mos, V.VFIO_GROUP_SET_CONTAINER, g.fd,  # type: ignore[arg-type]
            (ctypes.c_int32 * 1)(c.fd or 0))
    assert oe.value.errno == E.EINVAL  # already has one
    d2 = g.open_device(AUDIO)
    assert d2.class_code == 0x040300
    c.close()
    c.close()  # idempotent
    assert d.fd is None and d2.fd is None and g.fd is None


def test_non_viable_group_names_the_devices_to_rebind() -> None:
    mos, vfio = MockVfio.gpu_machine(audio_driver="snd_hda_intel")
    c = VfioContainer(mos)
    with pytest.raises(IoctlError) as e:
        c.group_for(GPU)
    msg = str(e.value)
    assert e.value.name == "VFIO_GROUP_SET_CONTAINER" and e.value.errno == E.EBUSY
    assert "group 12 is not viable: 0000:03:00.1 (driver snd_hda_intel) must be bound to " \
           "vfio-pci" in msg
    assert "echo vfio-pci > /sys/bus/pci/devices/0000:03:00.1/driver_override" in msg
    assert "0000:03:00.0" not in msg.split("not viable:")[1].split("must")[0]
    assert mos.live_objects()["vfio_groups_open"] == 0  # the failed group was closed
    # the audio function is no vfio device, so it cannot be opened either
    vfio.bind(AUDIO, None)  # unbound is fine for viability
    g = c.group_for(GPU)
    assert g.status().viable
    c.set_iommu()
    with pytest.raises(IoctlError, match="ENODEV"):
        g.open_device(AUDIO)
    c.close()
    with pytest.raises(DeviceNotFound, match="no /dev/vfio/vfio"):
        VfioContainer(MockOS())
    assert mos.live_objects() == IDLE


def test_group_status_and_exclusive_open(machine: tuple[MockOS, MockVfio]) -> None:
    mos, vfio = machine
    fd = mos.open("/dev/vfio/12")
    st = V.vfio_group_status(argsz=ctypes.sizeof(V.vfio_group_status))
    raw(mos, V.VFIO_GROUP_GET_STATUS, fd, st)
    assert st.flags == V.VFIO_GROUP_FLAGS_VIABLE
    with VfioContainer(mos) as c, pytest.raises(PCIError, match="another process"):
        c.group_for(GPU)
    mos.close(fd)
    assert mos.live_objects() == IDLE
    vfio.bind(GPU, "amdgpu")
    vfio.bind(AUDIO, "snd_hda_intel")
    with VfioContainer(mos) as c:
        with pytest.raises(DeviceNotFound, match=r"no /dev/vfio/12.*03:00.0 \(driver amdgpu\)"):
            c.group_for(GPU)
        with pytest.raises(DeviceNotFound, match="no IOMMU group"):
            c.group_for("0000:07:00.0")
    vfio.bind(GPU, "vfio-pci")
    vfio.bind(AUDIO, "vfio-pci")
    with open_vfio_device(mos, GPU) as d:
        with pytest.raises(OSError, match="open through VFIO"):
            vfio.bind(GPU, "amdgpu")
        assert d.group.status() == type(d.group.status())(True, True)


def test_group_file_closed_while_device_open(machine: tuple[MockOS, MockVfio]) -> None:
    mos, _ = machine
    dev = open_vfio_device(mos, GPU)
    group_fd = dev.group.fd
    assert group_fd is not None
    mos.close(group_fd)  # the device fd keeps the group (and its container) alive
    dev.group.fd = None
    assert mos.live_objects()["vfio_groups_open"] == 1
    assert dev.read16(R.PCI_VENDOR_ID) == 0x1002
    with pytest.raises(OSError) as e:
        mos.open("/dev/vfio/12")
    assert e.value.errno == E.EBUSY
    dev.close()
    assert mos.live_objects() == IDLE


# ---------------------------------------------------------------------------------------- argsz
def test_region_info_argsz_protocol(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    mos, _ = machine
    fd = dev.fd
    base = ctypes.sizeof(V.vfio_region_info)
    small = V.vfio_region_info(argsz=base - 1, index=0)
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_DEVICE_GET_REGION_INFO, fd, small)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    info = V.vfio_region_info(argsz=base, index=5)
    raw(mos, V.VFIO_DEVICE_GET_REGION_INFO, fd, info)  # type: ignore[arg-type]
    assert info.flags & V.VFIO_REGION_INFO_FLAG_CAPS and info.cap_offset == 0
    assert info.argsz == base + 8  # the MSI-X-mappable capability is a bare header
    buf = (ctypes.c_uint8 * info.argsz)()
    head = V.vfio_region_info.from_buffer(buf)
    head.argsz, head.index = info.argsz, 5
    raw(mos, V.VFIO_DEVICE_GET_REGION_INFO, fd, buf)  # type: ignore[arg-type]
    assert head.cap_offset == base
    cap = V.vfio_info_cap_header.from_buffer(buf, base)
    assert (cap.id, cap.version, cap.next) == (V.VFIO_REGION_INFO_CAP_MSIX_MAPPABLE, 1, 0)
    st = V.vfio_group_status(argsz=4)
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_GROUP_GET_STATUS, dev.group.fd, st)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    dinfo = V.vfio_device_info(argsz=8)
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_DEVICE_GET_INFO, fd, dinfo)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    irq = V.vfio_irq_info(argsz=ctypes.sizeof(V.vfio_irq_info), index=V.VFIO_PCI_NUM_IRQS)
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_DEVICE_GET_IRQ_INFO, fd, irq)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    dmap = V.vfio_iommu_type1_dma_map(argsz=16, flags=V.VFIO_DMA_MAP_FLAG_READ, size=4096)
    with pytest.raises(OSError) as e:
        raw(mos, V.VFIO_IOMMU_MAP_DMA, dev.container.fd, dmap)  # type: ignore[arg-type]
    assert e.value.errno == E.EINVAL
    with pytest.raises(OSError) as e:  # a by-value argument where a pointer belongs
        raw(mos, V.VFIO_GROUP_GET_STATUS, dev.group.fd, 0)  # type: ignore[arg-type]
    assert e.value.errno == E.EFAULT


def test_iommu_info_argsz_protocol(machine: tuple[MockOS, MockVfio], dev: VfioDevice) -> None:
    mos, _ = machine
    cfd = dev.container.fd
    info = V.vfio_iommu_type1_info(argsz=16)  # an old user: no room even for cap_offset
    raw(mos, V.VFIO_IOMMU_GET_INFO, cfd, info)  # type: ignore[arg-type]
    assert info.iova_pgsizes & 4096 and info.argsz > ctypes.sizeof(info)
    full = (ctypes.c_uint8 * info.argsz)()
    head = V.vfio_iommu_type1_info.from_buffer(full)
    head.argsz = info.argsz
    raw(mos, V.VFIO_IOMMU_GET_INFO, cfd, full)  # type: ignore[arg-type]
    ids, pos = [], head.cap_offset
    while pos:
        hdr = V.vfio_info_cap_header.from_buffer(full, pos)
        assert pos % 8 == 0
        ids.append(hdr.id)
        pos = hdr.next
    assert ids == [V.VFIO_IOMMU_TYPE1_INFO_CAP_MIGRATION, V.VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL,
                   V.VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE]


# ---------------------------------------------------------------------------------------- errors
def test_failing_ioctl_names_request_and_errno(machine: tuple[MockOS, MockVfio],
                                               dev: VfioDevice) -> None:
    mos, _ = machine
    mos.inject_ioctl_failure("VFIO_DEVICE_GET_IRQ_INFO", E.EIO)
    with pytest.raises(IoctlError) as e:
        dev.irq_info(V.VFIO_PCI_MSIX_IRQ_INDEX)
    assert e.value.name == "VFIO_DEVICE_GET_IRQ_INFO" and e.value.errno == E.EIO
    assert str(e.value).startswith("ioctl VFIO_DEVICE_GET_IRQ_INFO failed: errno 5 (EIO")
    mos.inject_ioctl_failure("VFIO_IOMMU_MAP_DMA", E.ENOMEM)
    with pytest.raises(IoctlError, match="ENOMEM.*ulimit -l"):
        dev.container.map_dma(0, 4096, 0)
    mos.inject_ioctl_failure("VFIO_GET_API_VERSION", E.EACCES)
    with pytest.raises(IoctlError, match="VFIO_GET_API_VERSION.*permission denied"):
        VfioContainer(mos)
    assert mos.live_objects()["vfio_containers"] == 1  # only dev's: the failed one was closed


def test_close_releases_everything_even_when_a_step_fails(machine: tuple[MockOS, MockVfio]) -> None:
    mos, vfio = machine
    dev = open_vfio_device(mos, GPU)
    dev.enable_bus_master()
    host = host_memory(mos, 1 << 16)
    dev.container.map_host(host, 0x10_0000)
    dev.enable_interrupts(V.VFIO_PCI_MSIX_IRQ_INDEX)
    dev.map_bar(0, 0, 1 << 20)
    dev.map_bar(2)
    audio = dev.group.open_device(AUDIO)
    audio.enable_interrupts(V.VFIO_PCI_MSI_IRQ_INDEX)
    assert mos.live_objects()["vfio_devices_open"] == 2
    mos.inject_ioctl_failure("VFIO_IOMMU_UNMAP_DMA", E.EIO)
    with pytest.raises(IoctlError, match="VFIO_IOMMU_UNMAP_DMA"):
        dev.close()
    mos.munmap(host)
    # the failed unmap was dropped by the kernel when the last group left the container
    assert mos.live_objects() == IDLE
    assert vfio.functions[GPU].command & R.PCI_COMMAND_MASTER == 0  # disabled on release
    assert audio.fd is None


def test_real_vfio_container_if_present() -> None:
    if not os.path.exists("/dev/vfio/vfio"):
        pytest.skip("no /dev/vfio/vfio on this machine (vfio module not loaded): the mock covers "
                    "the VFIO backend")
    try:
        c = VfioContainer(RealOS())
    except DeviceNotFound as e:
        pytest.skip(f"cannot open the real VFIO container: {e}")
    try:
        assert c.api_version == V.VFIO_API_VERSION
        assert isinstance(c.check_extension(V.VFIO_TYPE1v2_IOMMU), bool)
    finally:
        c.close()
