"""AMDDevice: an AMD GPU driven through KFD (or the mock KFD), with a PM4 compute queue and an SDMA
copy queue. What differs between architectures is the record `arch.pick_arch` chooses from the
node's gfx_target_version (runtime/drivers/amd/arch.py).

Bring-up: topology from sysfs, open /dev/kfd and the render node,
GET_VERSION, ACQUIRE_VM, the event page and events, then the two user-mode queues with their
doorbells. Teardown releases everything in reverse: queues, events, memory (unmap from the GPU,
free, munmap), the doorbell mapping, then the descriptors.
"""
from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

from hcq_bindings.amd import hsa
from hcq_bindings.linux import kfd_ioctl as kfd

from runtime.drivers.amd import process
from runtime.drivers.amd.arch import AMDArch, pick_arch
from runtime.drivers.amd.decode import describe_pm4, describe_sdma
from runtime.drivers.amd.kfd import (TOPOLOGY, Kfd, KfdNode, read_ip_bases, read_mem_banks,
                                     read_p2p_links, read_topology)
from runtime.drivers.amd.pm4 import PM4Encoding, PM4Queue, ShRegs, pm4_encoding
from runtime.drivers.amd.program import AMDProgram
from runtime.drivers.amd.ring import RPTR_OFFSET_B, WPTR_OFFSET_B, HwRing, QueueMemory
from runtime.drivers.amd.scratch import ScratchPool
from runtime.drivers.amd.sdma import MAX_COPY_B, SDMAEncoding, SDMAQueue, sdma_encoding
from runtime.hcq.device import Device, DeviceProperties, MemInfo, parse_device_name
from runtime.hcq.registry import mock_seam
from runtime.hcq.errors import (ArgumentError, DeviceFault, DeviceNotFound, HCQMemoryError,
                                IoctlError)
from runtime.hcq.memory import PAGE_B, Allocator, Buffer, BufferSpec, MemKind, round_up
from runtime.hcq.seam import (MAP_ANONYMOUS, MAP_FIXED, MAP_NORESERVE, MAP_PRIVATE, MAP_SHARED,
                              PROT_NONE, PROT_READ, PROT_WRITE, HostMapping, OSSeam, RealOS)
from runtime.hcq.signal import Signal

if TYPE_CHECKING:
    from runtime.drivers.amd.compiler import AMDCompiler

GC_HWID = 11                  # soc15_hw_ip.h: GC_HWID
EVENT_SLOT_B = 8
DOORBELL_MAP_B = 0x2000       # the process's doorbell slice (2 pages), tinygrad maps it once
EOP_B = 0x1000
# A fault check this soon after a wait for every event (exception events included) returned takes
# that wait's answer instead of asking the kernel again.
_EVENTS_FRESH_S = 200e-6
QUEUE_PRIORITY = 7            # middle of 0..KFD_MAX_QUEUE_PRIORITY, as tinygrad


@dataclass(frozen=True)
class KfdEvent:
    """A KFD event; signal events have a mailbox slot in the event page."""

    event_id: int
    event_type: int
    mailbox_va: int = 0


@dataclass
class KfdMem:
    """What the driver keeps per allocation to undo it."""

    handle: int
    size: int
    reservation: HostMapping | None
    cpu: HostMapping | None


class KfdAllocator(Allocator):
    """Device memory through ALLOC_MEMORY_OF_GPU + MAP_MEMORY_TO_GPU; GPU VA == CPU VA."""

    device: "AMDDevice"

    def _alloc(self, size: int, spec: BufferSpec) -> Buffer:
        flags = (kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | kfd.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
                 | kfd.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE)
        if spec.kind is MemKind.HOST:
            flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
        elif spec.kind is MemKind.GTT:
            flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT
        else:
            flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        if spec.uncached:
            flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED
        if spec.cpu_access and spec.kind is not MemKind.HOST:
            flags |= kfd.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
        return self.alloc_flags(size, flags, spec)

    def alloc_flags(self, size: int, flags: int, spec: BufferSpec,
                    mmap_offset: int | None = None) -> Buffer:
        """Allocates with explicit KFD flags (also used for the doorbell page)."""
        dev = self.device
        os_ = dev.os
        # WRITABLE is `1 << 31` in C: a negative int in Python; the ioctl field is a u32.
        flags &= 0xFFFFFFFF
        host = bool(flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)
        # Reserve the VA range (or, for userptr, the host memory itself): the GPU uses the same
        # address.
        try:
            if host:
                res = os_.mmap(None, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS)
            else:
                res = os_.mmap(None, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        except OSError as e:
            raise HCQMemoryError(f"{dev.name}: cannot reserve {size:#x} B of address space for "
                                 f"{spec.kind.value}: {e}") from e
        va = res.addr
        try:
            args = dev.kfd.alloc_memory(dev.node.gpu_id, va, size, flags,
                                        va if host else (mmap_offset or 0))
        except IoctlError as e:
            os_.munmap(res)
            if e.errno == 12:
                raise HCQMemoryError(f"{dev.name}: cannot allocate {size:#x} B of "
                                     f"{spec.kind.value}: {e}") from e
            raise
        mem = KfdMem(args.handle, size, res, None)
        try:
            cpu = None
            if host:
                cpu = res
            elif spec.cpu_access:
                cpu = os_.mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, dev.drm_fd,
                               args.mmap_offset)
                mem.cpu, mem.reservation = cpu, None  # MAP_FIXED replaced the reservation
            dev.kfd.map_memory(args.handle, [dev.node.gpu_id])
        except BaseException:
            self._undo(mem)
            raise
        return Buffer(dev, va, size, spec, cpu.view if cpu is not None else None, mem)

    def alloc_doorbells(self) -> Buffer:
        """The process's doorbell slice mapped at a GPU address (tracked like any allocation)."""
        flags = (kfd.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | kfd.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
                 | kfd.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | kfd.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED)
        buf = self.alloc_flags(DOORBELL_MAP_B, flags, BufferSpec(MemKind.GTT))
        self._live[id(buf)] = buf
        self.bytes_in_use += buf.size
        return buf

    def _free(self, buf: Buffer) -> None:
        mem: KfdMem = buf.handle
        # If the unmap fails, that error is the one to report: freeing memory that is still
        # mapped would only fail again (EBUSY) and hide it. The buffer then stays live and
        # close() tries again.
        self.device.kfd.unmap_memory(mem.handle, [self.device.node.gpu_id])
        self._undo(mem)

    def _undo(self, mem: KfdMem) -> None:
        os_ = self.device.os
        try:
            self.device.kfd.free_memory(mem.handle)
        finally:
            for m in (mem.cpu, mem.reservation):
                if m is not None:
                    os_.munmap(m)


class AMDDevice(Device):
    """An AMD GPU through KFD, of any architecture arch.py describes (gfx11, gfx942). Names:
    "amd:N" (a real GPU), "mock-amd:N" (a gfx1100 GPU of the shared mock machine), or any name
    with an explicit `os` seam, e.g. a `MockOS.with_amd_gpus(2, archs=("gfx1100", "gfx942"))`
    prepared by a test, whose GPUs may be of different architectures."""

    def __init__(self, name: str = "amd:0", *, os: OSSeam | None = None, ring_B: int = 1 << 20,
                 sdma_ring_B: int = 1 << 20, max_copy_B: int = MAX_COPY_B, **kwargs: Any) -> None:
        parsed = parse_device_name(name, "amd")
        index = parsed.index
        release = None
        if os is None:
            if parsed.mock:
                os, release = mock_seam("amd")  # the core's registry leases the mock machine
            else:
                os = RealOS()
        super().__init__(name, **kwargs)
        self._release_lease = release
        self.os = os
        self.max_copy_B = max_copy_B
        self._ring_B = ring_B
        self.kfd: Kfd = None  # type: ignore[assignment]
        self.drm_fd = -1
        self.signal_event: KfdEvent | None = None
        self._events: list[KfdEvent] = []
        self._events_seen_at = 0.0  # when a wait for every event last returned (perf_counter)
        self._rings: list[HwRing] = []
        self._ring_mem: list[QueueMemory] = []
        self._doorbell_map: HostMapping | None = None
        self.compute_ring: HwRing = None  # type: ignore[assignment]
        self._scratch: ScratchPool | None = None
        self._queue_desc: Buffer | None = None
        self.copy_ring: HwRing = None  # type: ignore[assignment]
        self._event_page: process.EventPage | None = None
        try:
            self._claim()
            self._open(index, ring_B, sdma_ring_B)
        except BaseException:
            try:
                self._release_hw()
            finally:
                self.closed = True
                self._give_back_lease()
            raise

    # ------------------------------------------------------------------ bring-up
    def _open(self, index: int, ring_B: int, sdma_ring_B: int) -> None:
        nodes = read_topology(self.os)
        if index >= len(nodes):
            raise DeviceNotFound(f"{self.name}: only {len(nodes)} AMD GPU(s) in the KFD topology")
        self.node: KfdNode = nodes[index]
        self.arch = self.node.arch
        # The architecture is chosen once, from the node's gfx_target_version; what differs between
        # architectures is read from its record from here on.
        self.gfx: AMDArch = pick_arch(self.node.gfx_target_version, self.name)
        # Its packet encodings, built once per architecture; every queue of this device binds them.
        self.pm4_encoding: PM4Encoding = pm4_encoding(self.gfx)
        self.sdma_encoding: SDMAEncoding = sdma_encoding(self.gfx)
        self.kfd = Kfd(self.os)
        minor = self.node.drm_render_minor
        self.drm_fd = self.os.open(f"/dev/dri/renderD{minor}", os.O_RDWR)
        self.kfd_version = self.kfd.version()
        self.kfd.acquire_vm(self.drm_fd, self.node.gpu_id)
        try:
            self.gc_bases = read_ip_bases(self.os, minor, GC_HWID)
        except OSError:
            # Kernels without ip_discovery in sysfs: the segment bases the architecture's parts
            # report, as recorded in its generated register module.
            self.gc_bases = list(self.gfx.gc.GC_SEGMENT_BASES)
        self.sh_regs = ShRegs(self.gc_bases, self.gfx)
        self._init_core(KfdAllocator(self))
        # Events: the process's event page (process.py: one per process, shared by its devices),
        # one auto-reset signal event (its mailbox is the page slot), and the memory-fault and
        # hardware-exception events that report faults.
        self._event_page, first = process.join(self)
        page = self._event_page.buf
        sig = self.kfd.create_event(kfd.KFD_IOC_EVENT_SIGNAL, 1,
                                    page.handle.handle if first else 0)
        self.signal_event = KfdEvent(sig.event_id, kfd.KFD_IOC_EVENT_SIGNAL,
                                     page.va + sig.event_slot_index * EVENT_SLOT_B)
        self._events.append(self.signal_event)
        for etype in (kfd.KFD_IOC_EVENT_MEMORY, kfd.KFD_IOC_EVENT_HW_EXCEPTION):
            ev = self.kfd.create_event(etype, 0, 0, self.node.node_id)
            self._events.append(KfdEvent(ev.event_id, etype))
        self.compute_ring = self._create_queue("pm4", ring_B)
        self.copy_ring = self._create_queue("sdma", sdma_ring_B)

    def _cwsr_sizes(self) -> tuple[int, int, int, int]:
        """(ctx save/restore size, control stack size, debug area size) of one XCC of this node,
        and the number of XCCs (each has its own save area). The sizes are amdkfd's
        (kfd_queue.c kfd_queue_ctx_save_restore_size), which newer kernels require exactly."""
        props = self.node.properties
        simd_per_cu = max(1, props.get("simd_per_cu", 2))
        xccs = max(1, props.get("num_xcc", 1))
        cus = props.get("simd_count", 0) // simd_per_cu // xccs
        waves = cus * self.gfx.cwsr_waves_per_cu
        # the control stack's 40-byte header and 8 bytes after the waves' entries
        ctl_stack = round_up(self.gfx.ctl_stack_per_wave_B * waves + 48, PAGE_B)
        wg_data = round_up(cus * self.gfx.cwsr_per_cu_B, PAGE_B)
        debug = round_up(waves * 32, 64)
        return wg_data + ctl_stack, ctl_stack, debug, xccs

    def _create_queue(self, kind: str, ring_B: int) -> HwRing:
        if ring_B < 1024 or ring_B & (ring_B - 1):
            raise ArgumentError(f"ring size {ring_B} must be a power of two >= 1 KiB")
        ring = self.alloc(ring_B, kind=MemKind.GTT, cpu_access=True, uncached=True)
        ptrs = self.alloc(PAGE_B, kind=MemKind.GTT, cpu_access=True, uncached=True)
        mem = QueueMemory(ring, ptrs)
        self._ring_mem.append(mem)
        fields: dict[str, Any] = {}
        if kind == "pm4":
            mem.eop = self.alloc(EOP_B, kind=MemKind.VRAM)
            ctx_size, ctl_stack, debug, xccs = self._cwsr_sizes()
            mem.ctx_save = self.alloc((ctx_size + debug) * xccs, kind=MemKind.VRAM)
            fields = dict(queue_type=kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, eop_buffer_address=mem.eop.va,
                          eop_buffer_size=EOP_B, ctx_save_restore_address=mem.ctx_save.va,
                          ctx_save_restore_size=ctx_size, ctl_stack_size=ctl_stack)
        else:
            fields = dict(queue_type=kfd.KFD_IOC_QUEUE_TYPE_SDMA)
        q = self.kfd.create_queue(ring_base_address=ring.va, ring_size=ring_B,
                                  gpu_id=self.node.gpu_id,
                                  queue_percentage=kfd.KFD_MAX_QUEUE_PERCENTAGE,
                                  queue_priority=QUEUE_PRIORITY,
                                  write_pointer_address=ptrs.va + WPTR_OFFSET_B,
                                  read_pointer_address=ptrs.va + RPTR_OFFSET_B, **fields)
        base = q.doorbell_offset & ~(DOORBELL_MAP_B - 1)
        if self._doorbell_map is None:
            self._doorbell_map = self.os.mmap(None, DOORBELL_MAP_B, PROT_READ | PROT_WRITE,
                                              MAP_SHARED, self.kfd.fd, base)
        elif self._doorbell_map.offset != base:
            raise DeviceFault(self.name, f"queue doorbells in different slices ({base:#x} vs "
                                         f"{self._doorbell_map.offset:#x})")
        bell = self.os.doorbell(self._doorbell_map, q.doorbell_offset - base, 8)
        if kind == "pm4":
            gc_base, arch = self.gc_bases[0], self.gfx
            ring_obj = HwRing(self, kind, q.queue_id, mem, bell, 0,
                              lambda dws: describe_pm4(dws, gc_base, arch=arch))
        else:
            arch = self.gfx
            ring_obj = HwRing(self, kind, q.queue_id, mem, bell, self.sdma_encoding.h_nop,
                              lambda dws: describe_sdma(dws, arch=arch))
        self._rings.append(ring_obj)
        return ring_obj

    # ------------------------------------------------------------------ description
    def _read_properties(self) -> DeviceProperties:
        """From the KFD topology node (kfd_topology.c's node properties)."""
        props = self.node.properties
        simd_per_cu = max(1, props.get("simd_per_cu", 2))
        try:
            name = self.os.read_sysfs(f"{TOPOLOGY}/{self.node.node_id}/name").strip()
        except OSError:
            name = ""
        device_id = props.get("device_id", 0)
        clock_mhz = props.get("max_engine_clk_fcompute", 0)
        return DeviceProperties(
            vendor="AMD", name=f"AMD {name or self.arch} (device {device_id:#06x})",
            arch=self.arch, compute_units=props.get("simd_count", 0) // simd_per_cu,
            simd_width=props.get("wave_front_size", 32),
            # The dispatch packet's workgroup size limit (amd_hsa: 1024 work-items, all gfx9+).
            max_workgroup_size=1024,
            shared_memory_per_workgroup_B=props.get("lds_size_in_kb", 64) * 1024,
            max_clock_hz=clock_mhz * 1e6 if clock_mhz else None, timestamp_hz=self.clock_hz,
            memory_B=self._vram_total_B(), mock=not isinstance(self.os, RealOS))

    def _vram_total_B(self) -> int:
        # Frame-buffer heaps (HSA_MEM_HEAP_TYPE_FB_PUBLIC 1, FB_PRIVATE 2) of the node's memory
        # banks; older topologies only give local_mem_size.
        banks = read_mem_banks(self.os, self.node.node_id)
        total = sum(b.get("size_in_bytes", 0) for b in banks if b.get("heap_type") in (1, 2))
        return total or self.node.properties.get("local_mem_size", 0)

    def _mem_info(self) -> MemInfo:
        total = self._vram_total_B()
        free = self.kfd.available_memory(self.node.gpu_id)
        return MemInfo(min(free, total) if total else free, total)

    # ------------------------------------------------------------------ Device API
    @property
    def executes_kernels(self) -> bool:
        """Whether launched kernels really run on this GPU (a mock gfx942 checks and completes
        dispatches without executing CDNA3 code)."""
        return self.os.gpu_executes_kernels(f"/dev/dri/renderD{self.node.drm_render_minor}")

    def compute_queue(self) -> PM4Queue:
        """A new PM4 command builder for the compute ring."""
        return PM4Queue(self)

    def _stream_hw(self) -> "tuple[Callable[[], PM4Queue], Callable[[], None]]":
        """Another KFD compute queue (its own ring, doorbell, EOP and CWSR areas)."""
        ring = self._create_queue("pm4", self._ring_B)

        def release() -> None:
            if self.closed or ring not in self._rings:
                return
            self._rings.remove(ring)
            self._ring_mem.remove(ring.mem)
            try:
                self.kfd.destroy_queue(ring.queue_id)
            finally:
                for buf in (ring.mem.ring, ring.mem.pointers, ring.mem.eop, ring.mem.ctx_save):
                    if buf is not None:
                        self.free(buf)
        return (lambda: PM4Queue(self, ring)), release

    def copy_queue(self) -> SDMAQueue:
        """A new SDMA command builder for the copy ring."""
        return SDMAQueue(self, self.max_copy_B)

    def program(self, lib: bytes, name: str, *, dynamic_lds_B: int = 0) -> AMDProgram:
        """Loads kernel `name` of an AMDHSA code object (`dynamic_lds_B`: LDS beyond the
        descriptor's group segment that every launch allocates, e.g. Triton's `shared`)."""
        self.check_usable()
        return AMDProgram(self, lib, name, dynamic_lds_B=dynamic_lds_B)

    @property
    def scratch(self) -> ScratchPool:
        """The private-segment (scratch) backing memory of this device's compute queue."""
        if self._scratch is None:
            self._scratch = ScratchPool(self)
        return self._scratch

    def queue_descriptor(self) -> Buffer:
        """The compute queue's `amd_queue_t` (hsa.h), for kernels that enable the queue_ptr
        user SGPR (clang at -O0). It carries the scratch setup ROCr records there; the aperture
        fields stay 0 (gfx11 and gfx942 code reads src_shared_base / src_private_base
        instead)."""
        if self._queue_desc is None:
            self._queue_desc = self.alloc(ctypes.sizeof(hsa.amd_queue_t), kind=MemKind.GTT,
                                          cpu_access=True)
        q = hsa.amd_queue_t()
        sc = self.scratch.current
        q.compute_tmpring_size = sc.tmpring_size
        q.scratch_backing_memory_location = sc.base_va
        q.scratch_backing_memory_byte_size = sc.wave_B * sc.waves
        q.scratch_wave64_lane_byte_size = sc.per_lane_B
        self.copyin(self._queue_desc, bytes(q))
        return self._queue_desc

    @property
    def compiler(self) -> "AMDCompiler":
        """clang for this GPU's target (OpenCL C → AMDHSA code object); `Device.compiler`, typed."""
        return cast("AMDCompiler", super().compiler)

    def _make_compiler(self) -> "AMDCompiler":
        from runtime.drivers.amd.compiler import AMDCompiler
        return AMDCompiler(self.arch)

    def map_doorbells(self) -> Buffer:
        """Maps this process's doorbell slice into the GPU address space (ALLOC_MEMORY_OF_GPU with
        the DOORBELL flag), so that GPU code can ring queues. The buffer has no CPU mapping."""
        self.check_usable()
        alloc: KfdAllocator = self.allocator  # type: ignore[assignment]
        return alloc.alloc_doorbells()

    # ------------------------------------------------------------------ peers
    def _peer_access(self, other: Device) -> str | None:
        assert isinstance(other, AMDDevice)
        links = read_p2p_links(self.os, self.node.node_id)
        if other.node.node_id in links:
            return None
        return (f"the KFD topology has no P2P link from node {self.node.node_id} ({self.name}) to "
                f"node {other.node.node_id} ({other.name})")

    def _map_peer(self, buf: Buffer) -> Buffer:
        # KFD buffers have one address in every GPU VM of the process: map the same handle on
        # this GPU too (MAP_MEMORY_TO_GPU with this device's gpu id).
        mem: KfdMem = buf.handle
        self.kfd.map_memory(mem.handle, [self.node.gpu_id])
        return Buffer(self, buf.va, buf.size, buf.spec, buf.view, mem)

    def _unmap_peer(self, mapping: Buffer) -> None:
        self.kfd.unmap_memory(mapping.handle.handle, [self.node.gpu_id])

    # ------------------------------------------------------------------ waiting and faults
    def _wait_events(self, event_ids: list[int], timeout_ms: float) -> None:
        result, data = self.kfd.wait_events(event_ids, int(timeout_ms))
        if result == kfd.KFD_IOC_WAIT_RESULT_FAIL:
            raise IoctlError("AMDKFD_IOC_WAIT_EVENTS", 5, "wait_result FAIL")
        if result == kfd.KFD_IOC_WAIT_RESULT_TIMEOUT:
            return  # no event fired: none carries exception data
        by_id = {e.event_id: e for e in self._events}
        for eid, d in zip(event_ids, data):
            fault = self._fault_from(by_id[eid], d)
            if fault is not None and self._fault is None:
                self._fault = fault

    def _fault_from(self, ev: KfdEvent, d: Any) -> DeviceFault | None:
        if ev.event_type == kfd.KFD_IOC_EVENT_MEMORY:
            mem = d.memory_exception_data
            if mem.gpu_id != self.node.gpu_id:  # none, or another GPU of this process
                return None
            f = mem.failure
            flags = (("not present", f.NotPresent), ("read-only", f.ReadOnly),
                     ("no-execute", f.NoExecute), ("imprecise", f.imprecise))
            what = ", ".join(n for n, v in flags if v) or "unknown"
            msg = f"GPU memory fault at VA {mem.va:#x} ({what})"
        elif ev.event_type == kfd.KFD_IOC_EVENT_HW_EXCEPTION:
            hw = d.hw_exception_data
            if hw.gpu_id != self.node.gpu_id:
                return None
            cause = "ECC error" if hw.reset_cause == kfd.KFD_HW_EXCEPTION_ECC else "GPU hang"
            msg = f"hardware exception: {cause}, reset type {hw.reset_type}, " \
                  f"memory lost {hw.memory_lost}"
        else:
            return None
        log = self.os.kernel_log()
        report = msg + (("\nkernel log:\n  " + "\n  ".join(log)) if log else "")
        return DeviceFault(self.name, report + "\n" + self.describe_state())

    def _poll_fault(self) -> DeviceFault | None:
        if time.perf_counter() - self._events_seen_at < _EVENTS_FRESH_S:
            # A wait for every event (the exception events among them) returned just now: what
            # it saw is the answer (a wait's check right after its sleep costs no second ioctl).
            self._events_seen_at = 0.0
            return self._fault
        ids = [e.event_id for e in self._events if e is not self.signal_event]
        if ids:
            self._wait_events(ids, 0)
        return self._fault

    def sleep_for_signal(self, sig: Signal, value: int, timeout_ms: float) -> None:
        self._events_seen_at = 0.0
        self._wait_events([e.event_id for e in self._events], timeout_ms)
        self._events_seen_at = time.perf_counter()

    def _idle_wait(self, timeout_ms: float) -> None:
        """Sleeps until the GPU interrupts (any event) or `timeout_ms` passes."""
        self.sleep_for_signal(self.timeline_signal, 0, timeout_ms)

    def _describe_queues(self) -> list[str]:
        lines = [r.describe() for r in self._rings]
        # What the kernel reports about the GPU (the mock: a queue busy with a long dispatch,
        # with its waves' program counters).
        return lines + [f"kernel log: {ln}" for ln in self.os.kernel_log()[-4:]]

    def after_wait_timeout(self) -> str:
        """A wait gave up. If the compute queue is busy with anything but a wait for memory (which
        a host write can still release), say a kernel that never ends, it is reset: the work on
        it is abandoned and later submissions run."""
        ring = self.compute_ring
        if ring is None or not ring.pending_dw():
            return ""
        rptr = ring.rptr_dw()
        at = ring.ring[rptr]
        pm4p = self.gfx.pm4
        op = pm4p.CP_PACKET3_GET_OPCODE(at)
        if op == pm4p.PACKET3_WAIT_REG_MEM:
            return ""
        if op == pm4p.PACKET3_INDIRECT_BUFFER and self._ib_waits(
                [ring.ring[(rptr + i) % ring.size_dw] for i in range(1, 4)]):
            return ""  # a graph body or bound queue that waits for memory may still be released
        self.reset_compute_queue()
        return "\n  the compute queue was reset (the work still on it is abandoned; the device " \
            "stays usable)"

    def _ib_waits(self, ib: list[int]) -> bool:
        """Whether the indirect buffer (INDIRECT_BUFFER's base lo, base hi, size) is one of this
        device's bound queues and contains a WAIT_REG_MEM."""
        from runtime.drivers.amd.decode import decode_pm4
        va, n = ib[0] | ib[1] << 32, ib[2] & ((1 << 20) - 1)
        for buf in self.allocator._live.values():
            if buf.va == va and buf.view is not None and buf.size >= 4 * n:
                words = buf.view[:4 * n].cast("I").tolist()
                return any(p.name == "PACKET3_WAIT_REG_MEM"
                           for p in decode_pm4(words, arch=self.gfx))
        return False

    def reset_compute_queue(self) -> None:
        """Destroys the compute queue (KFD's DESTROY_QUEUE preempts the waves still running) and
        makes a new one. The timeline moves past everything submitted so far, since that work
        will never signal it; its results are undefined."""
        self.check_usable()
        old = self.compute_ring
        self.kfd.destroy_queue(old.queue_id)
        self._rings.remove(old)
        self._ring_mem.remove(old.mem)
        for buf in (old.mem.ring, old.mem.pointers, old.mem.eop, old.mem.ctx_save):
            if buf is not None:
                self.free(buf)
        self.compute_ring = self._create_queue("pm4", old.size_dw * 4)
        self.timeline_signal.value = self.timeline_value

    # ------------------------------------------------------------------ teardown
    def _release_hw(self) -> None:
        errors: list[BaseException] = []

        def attempt(fn: Any, *args: Any) -> None:
            try:
                fn(*args)
            except BaseException as e:  # keep tearing down; report the first problem at the end
                errors.append(e)

        for ring in reversed(self._rings):
            attempt(self.kfd.destroy_queue, ring.queue_id)
        self._rings.clear()
        for ev in reversed(self._events):
            attempt(self.kfd.destroy_event, ev.event_id)
        self._events.clear()
        self.signal_event = None
        if self._event_page is not None:
            attempt(process.leave, self, self._event_page)
            self._event_page = None
        if hasattr(self, "allocator"):
            self.allocator.cache_limit_B = 0  # release_all then frees the cache too
            while self.allocator.live_count or self.allocator.cached_B:
                before = self.allocator.live_count
                attempt(self.allocator.release_all)
                if self.allocator.live_count == before:
                    break
        if self._doorbell_map is not None:
            attempt(self.os.munmap, self._doorbell_map)
            self._doorbell_map = None
        if self.drm_fd >= 0:
            attempt(self.os.close, self.drm_fd)
            self.drm_fd = -1
        if self.kfd is not None:
            attempt(self.kfd.close)
            self.kfd = None  # type: ignore[assignment]
        if errors:
            raise errors[0]
