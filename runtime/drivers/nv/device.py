"""NVDevice: an NVIDIA GPU driven through the kernel driver's ioctls alone (RM + UVM), no libcuda.

Bring-up (the sequence tinygrad 0.14 uses, with Hopper's classes):
 1. RM client on /dev/nvidiactl; driver version; UVM (two descriptors, INITIALIZE + MM_INITIALIZE).
 2. CARD_INFO, /dev/nvidiaN registered with REGISTER_FD; GPU_GET_ID_INFO_V2 for the device instance.
 3. NV01_DEVICE_0, NV20_SUBDEVICE_0, NV01_MEMORY_VIRTUAL; GET_CLASSLIST picks the usermode, GPFIFO,
    compute and copy classes (newest first); usermode page mapped for the doorbell; PERF_BOOST.
 4. FERMI_VASPACE_A (page faulting, externally owned: UVM manages it); GID → UUID; UVM registers
    the GPU and the VA space.
 5. KEPLER_CHANNEL_GROUP_A, FERMI_CONTEXT_SHARE_A; per engine a GPFIFO channel (ring and USERD in a
    write-combined VRAM area, an error notifier in system memory), its engine object, its
    work-submit token, UVM_REGISTER_CHANNEL; GPFIFO_SCHEDULE enables the group.
 6. The compute channel gets its class, shared and local windows; the copy channel its class.

Memory: VRAM is NV01_MEMORY_LOCAL_USER; GTT/HOST (signals, staging) is anonymous host memory pinned
as NV01_MEMORY_SYSTEM_OS_DESCRIPTOR. Either is mapped to the GPU at an address this driver chooses
below 2^40 (QMDs and pushbuffers need 40-bit addresses): UVM_CREATE_EXTERNAL_RANGE,
NV_ESC_RM_MAP_MEMORY_DMA at that fixed offset, UVM_MAP_EXTERNAL_ALLOCATION. VRAM a CPU must see is
mapped with NV_ESC_RM_MAP_MEMORY + mmap of a fresh registered /dev/nvidiaN descriptor.

Teardown frees in reverse: channels (UVM unregister, engine objects, channel, notifier), context
share, channel group, every buffer newest first, VA space (UVM first), usermode, virtual memory,
subdevice, device, UVM GPU, root client, descriptors.
"""
from __future__ import annotations

import ctypes
import os
import os as os_module  # the constructor's `os` argument is the seam
import time
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

from hcq_bindings.nv import classes as cl
from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv.gpfifo import (BLOCKED, DEVICE_WORDS, DOORBELL_OFFSET_B, TIMELINE_VALUE,
                                       USERD_B, Channel)
from runtime.drivers.nv import peer
from runtime.drivers.nv.launcher import ChunkPool
from runtime.drivers.nv.generation import GENERATIONS, NVGeneration, pick_generation
from runtime.drivers.nv.methods import fval
from runtime.drivers.nv.program import NVProgram
from runtime.drivers.nv.qmd import QMD
from runtime.drivers.nv.queue import MAX_COPY_CHUNK_B, NVComputeQueue, NVCopyQueue
from runtime.drivers.nv.rm import NvRm, RmError
from runtime.drivers.nv.uvm import Uvm
from runtime.hcq import native
from runtime.hcq.device import (Device, DeviceProperties, MemInfo, SubmitLock,
                                parse_device_name)
from runtime.hcq.registry import mock_seam
from runtime.hcq.errors import (ArgumentError, DeviceFault, DeviceNotFound, HCQError,
                                HCQMemoryError, QueueError)
from runtime.hcq.memory import PAGE_B, Allocator, Buffer, BufferSpec, MemKind, round_up
from runtime.hcq.seam import (MAP_ANONYMOUS, MAP_SHARED, PROT_READ, PROT_WRITE, HostMapping,
                              OSSeam, RealOS)
from runtime.hcq.signal import Signal

if TYPE_CHECKING:
    from runtime.drivers.nv.compiler import NVCompiler

HUGE_PAGE_B = 2 << 20
USERMODE_MAP_B = 0x10000          # the usermode (doorbell) region tinygrad maps
GPFIFO_ENTRIES = 0x10000          # per channel (tinygrad)
GPFIFO_AREA_B = 0x300000          # both channels' rings and USERD pages
CHANNEL_UVM_B = 0x4000000         # VA range UVM_REGISTER_CHANNEL maps channel buffers into
NOTIFIER_B = PAGE_B               # error notifier: NV_CHANNELGPFIFO_NOTIFICATION_TYPE__SIZE_1 x 16
PUSHBUF_B = 2 << 20               # per channel
HOST_COPY_SPLIT_B = 4 << 20       # staging copies at least this large use several threads
# GPU VA heap: everything this driver maps lives in [64 GiB, 1 TiB): below 2^40 for QMD and
# pushbuffer addresses, above the low range RM may keep for itself (tinygrad starts at 64 GiB too).
VA_HEAP_BASE = 0x10_0000_0000
VA_HEAP_END = 0x100_0000_0000
# Shared and local memory windows (tinygrad's addresses; 4 GiB aligned as Hopper requires) sit far
# above the heap so no buffer lies inside them (an access to one there faults with Xid 13).
SHARED_WINDOW = 0x7294_0000_0000
LOCAL_WINDOW = 0x7293_0000_0000
# SEND_SIGNALING_PCAS2_B action: invalidate any cached copy of the QMD, prefetch, copy, schedule
# (what libcuda uses on H100); tinygrad's PREFETCH_SCHEDULE (9) also works there.
DEFAULT_PCAS_ACTION = cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE
assert all(g.compute.SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE
           == DEFAULT_PCAS_ACTION for g in GENERATIONS)
# RM robust-channel error codes (Xid, nverror.h) seen in the error notifier's info32, explained for
# reports; the numbers come from the generated ROBUST_CHANNEL_* constants, the words are ours.
_XID = {8: "GPU stopped processing (host timeout)",
        rm.ROBUST_CHANNEL_GR_EXCEPTION: "graphics engine exception (bad launch, illegal "
        "instruction or address in a kernel)",
        rm.ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT: "GPU memory page fault (MMU fault)",
        rm.ROBUST_CHANNEL_PBDMA_ERROR: "invalid or corrupted push buffer stream",
        rm.ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR: "GPU stopped processing (channel reset)",
        rm.ROBUST_CHANNEL_PREEMPTIVE_REMOVAL: "preemptive cleanup after a previous error",
        rm.ROBUST_CHANNEL_GR_CLASS_ERROR: "graphics engine class error",
        109: "context switch timeout"}


# NVOS32 allocation flags every RM memory allocation of this driver uses (tinygrad's set).
_ALLOC_FLAGS = rm.NVOS32_ALLOC_FLAGS_MAP_NOT_REQUIRED \
    | rm.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED | rm.NVOS32_ALLOC_FLAGS_ALIGNMENT_FORCE \
    | rm.NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT


class VaHeap:
    """First-fit GPU virtual-address allocator over [base, end), with alignment."""

    def __init__(self, base: int, end: int) -> None:
        self.free: list[tuple[int, int]] = [(base, end)]   # sorted, non-adjacent

    def alloc(self, size: int, align: int) -> int:
        for i, (lo, hi) in enumerate(self.free):
            start = round_up(lo, align)
            if start + size <= hi:
                pieces = [(a, b) for a, b in ((lo, start), (start + size, hi)) if b > a]
                self.free[i:i + 1] = pieces
                return start
        raise HCQMemoryError(f"GPU virtual address space exhausted ({size:#x} B, align {align:#x})")

    def release(self, va: int, size: int) -> None:
        import bisect
        i = bisect.bisect_left(self.free, (va, va + size))
        self.free.insert(i, (va, va + size))
        # merge with neighbours
        if i + 1 < len(self.free) and self.free[i][1] == self.free[i + 1][0]:
            self.free[i:i + 2] = [(self.free[i][0], self.free[i + 1][1])]
        if i > 0 and self.free[i - 1][1] == self.free[i][0]:
            self.free[i - 1:i + 1] = [(self.free[i - 1][0], self.free[i][1])]


@dataclass
class NvMem:
    """What the driver keeps per allocation to undo it."""

    handle: int
    size: int            # rounded size mapped on the GPU
    va: int
    cpu: HostMapping | None
    host: HostMapping | None   # the pinned anonymous memory behind an OS descriptor


class NVAllocator(Allocator):
    """Device memory: RM objects mapped into the UVM-owned VA space at driver-chosen addresses."""

    device: "NVDevice"

    def _alloc(self, size: int, spec: BufferSpec) -> Buffer:
        if spec.kind is MemKind.VRAM:
            return self.alloc_vram(size, spec)
        return self.alloc_host(size, spec)

    def alloc_vram(self, size: int, spec: BufferSpec, contiguous: bool = False,
                   map_flags: int = 0) -> Buffer:
        """VRAM (NV1_MEMORY_USER), with a CPU mapping through BAR1 when `spec.cpu_access`."""
        dev = self.device
        page = HUGE_PAGE_B if size >= 8 << 20 and not contiguous else PAGE_B
        size = round_up(size, page)
        # tinygrad's attributes (ops_nv.py NVKIface.alloc): image type, 4 KiB or 2 MiB pages.
        attr = fval(rm.NVOS32_ATTR_PHYSICALITY, rm.NVOS32_ATTR_PHYSICALITY_CONTIGUOUS if contiguous
                    else rm.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS)
        attr2 = fval(rm.NVOS32_ATTR2_GPU_CACHEABLE, rm.NVOS32_ATTR2_GPU_CACHEABLE_YES) \
            | rm.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC
        if page > PAGE_B:
            attr |= fval(rm.NVOS32_ATTR_PAGE_SIZE, rm.NVOS32_ATTR_PAGE_SIZE_HUGE)
            attr2 |= fval(rm.NVOS32_ATTR2_PAGE_SIZE_HUGE, rm.NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB)
        flags = _ALLOC_FLAGS | rm.NVOS32_ALLOC_FLAGS_PERSISTENT_VIDMEM
        params = rm.NV_MEMORY_ALLOCATION_PARAMS(
            owner=dev.rm.root, type=rm.NVOS32_TYPE_IMAGE, flags=flags, attr=attr, attr2=attr2,
            format=6, size=size, alignment=page, offset=0, limit=size - 1)
        try:
            handle = dev.rm.alloc(dev.nvdevice, rm.NV1_MEMORY_USER, params)
        except HCQMemoryError as e:
            raise HCQMemoryError(f"{dev.name}: cannot allocate {size:#x} B of VRAM: {e}") from e
        mem = NvMem(handle, size, 0, None, None)
        try:
            if spec.cpu_access:
                mem.cpu = dev.map_to_cpu(handle, size, map_flags)
            mem.va = dev.map_to_gpu(handle, size, page)
        except BaseException:
            self._undo(mem)
            raise
        return Buffer(dev, mem.va, size, spec, mem.cpu.view if mem.cpu else None, mem)

    def alloc_sysmem(self, size: int) -> Buffer:
        """RM-owned system memory (NV1_MEMORY_SYSTEM, uncached for the GPU) with a CPU mapping when
        RM grants one: the channels' error notifiers, which RM itself writes."""
        dev = self.device
        size = round_up(size, PAGE_B)
        attr = fval(rm.NVOS32_ATTR_PHYSICALITY, rm.NVOS32_ATTR_PHYSICALITY_ALLOW_NONCONTIGUOUS) \
            | fval(rm.NVOS32_ATTR_LOCATION, rm.NVOS32_ATTR_LOCATION_PCI)
        attr2 = fval(rm.NVOS32_ATTR2_GPU_CACHEABLE, rm.NVOS32_ATTR2_GPU_CACHEABLE_NO) \
            | rm.NVOS32_ATTR2_ZBC_PREFER_NO_ZBC
        flags = _ALLOC_FLAGS
        params = rm.NV_MEMORY_ALLOCATION_PARAMS(
            owner=dev.rm.root, type=rm.NVOS32_TYPE_NOTIFIER, flags=flags, attr=attr, attr2=attr2,
            format=6, size=size, alignment=PAGE_B, offset=0, limit=size - 1)
        handle = dev.rm.alloc(dev.nvdevice, rm.NV1_MEMORY_SYSTEM, params)
        mem = NvMem(handle, size, 0, None, None)
        try:
            try:
                mem.cpu = dev.map_to_cpu(handle, size, 0, ctl=True)
            except (RmError, OSError):
                mem.cpu = None  # fault reports then rely on timeouts alone
            mem.va = dev.map_to_gpu(handle, size, PAGE_B)
        except BaseException:
            self._undo(mem)
            raise
        spec = BufferSpec(MemKind.GTT, mem.cpu is not None, True)
        return self.track(Buffer(dev, mem.va, size, spec, mem.cpu.view if mem.cpu else None, mem))

    def track(self, buf: Buffer) -> Buffer:
        """Registers a buffer made by one of the special allocation paths as live (freed with the
        others by `release_all`)."""
        self._live[id(buf)] = buf
        self.bytes_in_use += buf.size
        return buf

    def alloc_host(self, size: int, spec: BufferSpec) -> Buffer:
        """Anonymous host memory pinned as an OS descriptor: CPU-cached, snooped by the GPU."""
        dev = self.device
        size = round_up(size, PAGE_B)
        host = dev.os.mmap(None, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS)
        flags = fval(rm.NVOS02_FLAGS_PHYSICALITY, rm.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS) \
            | fval(rm.NVOS02_FLAGS_COHERENCY, rm.NVOS02_FLAGS_COHERENCY_CACHED) \
            | fval(rm.NVOS02_FLAGS_MAPPING, rm.NVOS02_FLAGS_MAPPING_NO_MAP)
        try:
            handle = dev.rm.alloc_os_descriptor(dev.fd_dev, dev.nvdevice, host.addr, size, flags)
        except BaseException:
            dev.os.munmap(host)
            raise
        mem = NvMem(handle, size, 0, None, host)
        try:
            mem.va = dev.map_to_gpu(handle, size, PAGE_B)
        except BaseException:
            self._undo(mem)
            raise
        return Buffer(dev, mem.va, size, spec, host.view, mem)

    def _free(self, buf: Buffer) -> None:
        mem: NvMem = buf.handle
        try:
            if mem.va:
                self.device.uvm.free(mem.va, mem.size)
                self.device.va_heap.release(mem.va, mem.size)
                mem.va = 0
        finally:
            self._undo(mem)

    def _undo(self, mem: NvMem) -> None:
        dev = self.device
        try:
            if mem.va:
                dev.uvm.free(mem.va, mem.size)
                dev.va_heap.release(mem.va, mem.size)
                mem.va = 0
        finally:
            try:
                if mem.cpu is not None:
                    dev.os.munmap(mem.cpu)
                    mem.cpu = None
            finally:
                try:
                    if mem.handle in dev.rm.objects:
                        dev.rm.free(mem.handle)
                finally:
                    if mem.host is not None:
                        dev.os.munmap(mem.host)
                        mem.host = None


@dataclass(frozen=True)
class GpuInfo:
    """What GR_GET_INFO reports (litter values: the chip's full configuration)."""

    sm_version: int
    num_gpcs: int
    tpc_per_gpc: int
    sm_per_tpc: int
    max_warps_per_sm: int


# Shared memory one block may use (opt-in maximum), KiB, by SM version (CUDA programming guide,
# "Technical Specifications per Compute Capability").
_MAX_SHARED_PER_BLOCK_KiB = {80: 163, 86: 99, 87: 163, 89: 99, 90: 227, 100: 227, 103: 227,
                             120: 99}
# FP32 cores per SM by SM version (CUDA programming guide, "Arithmetic Instructions": 32-bit
# floating-point add/multiply results per clock per SM).
_CORES_PER_SM = {80: 64, 86: 128, 87: 128, 89: 128, 90: 128, 100: 128, 103: 128, 120: 128}


class NVDevice(Device):
    """An NVIDIA GPU through RM and UVM. Names: "nv:N" (a real GPU), "mock-nv:N" (the mock GPU), or
    any name with an explicit `os` seam (a `NvMockOS` a test prepared).

    `pcas_action`: the SEND_SIGNALING_PCAS2_B action launches use (see DEFAULT_PCAS_ACTION);
    `pushbuf_B` and `gpfifo_entries` size each channel's rings (small ones exercise wrap-around)."""

    def __init__(self, name: str = "nv:0", *, os: OSSeam | None = None,
                 pcas_action: int = DEFAULT_PCAS_ACTION, pushbuf_B: int = PUSHBUF_B,
                 gpfifo_entries: int = GPFIFO_ENTRIES, **kwargs: Any) -> None:
        parsed = parse_device_name(name, "nv")
        index = parsed.index
        release = None
        if os is None:
            if parsed.mock:
                os, release = mock_seam("nv")  # the core's registry leases the mock machine
            else:
                os = RealOS()
        # The words every submission route shares (gpfifo.DEVICE_WORDS; _nvlaunch.c reads them):
        # made first, because the base class sets `timeline_value`, `closed` and `_fault`.
        self.words = array("Q", [0] * len(DEVICE_WORDS))
        self._fault_error: DeviceFault | None = None
        self._closed = False
        # 16 MiB of launch blocks (tinygrad's kernarg size): ~13,000 launches between wraps, each
        # of which synchronizes; 16 MiB staging halves the per-chunk overhead of large copies.
        kwargs.setdefault("kernarg_arena_B", 16 << 20)
        kwargs.setdefault("staging_B", 16 << 20)
        super().__init__(name, **kwargs)
        # The native launch declines while another thread builds a submission (SubmitLock).
        self._submit.flags, self._submit.flag_index = self.words, BLOCKED
        self._release_lease = release
        self.os = os
        self.pcas_action = pcas_action
        if gpfifo_entries & (gpfifo_entries - 1) or not 16 <= gpfifo_entries <= GPFIFO_ENTRIES:
            raise ArgumentError(f"gpfifo_entries must be a power of two in 16..{GPFIFO_ENTRIES}")
        self.pushbuf_B, self.gpfifo_entries = pushbuf_B, gpfifo_entries
        self.clock_hz = 1e9  # semaphore timestamps are the GPU's nanosecond timer
        self.rm: NvRm = None  # type: ignore[assignment]
        self.uvm: Uvm = None  # type: ignore[assignment]
        self.fd_dev = -1
        self.nvdevice = self.subdevice = self.virtmem = self.vaspace = 0
        self.usermode = self.channel_group = self.ctxshare = 0
        self.usermode_map: HostMapping | None = None
        self.uuid = b""
        self.gpu_id = self.device_instance = 0
        self._peer_links: dict[int, peer.PeerLink] = {}   # id(other device) -> link (peer.py)
        self._p2p_caps: dict[int, str | None] = {}       # id(other device) -> GET_P2P_CAPS verdict
        self._uvm_gpu = self._uvm_vaspace = False
        self.va_heap = VaHeap(VA_HEAP_BASE, VA_HEAP_END)
        self.channels: list[Channel] = []
        self._channel_objects: list[tuple[int, list[int], bool]] = []  # (channel, engine objs, uvm)
        self._channel_uvm: dict[int, int] = {}  # channel -> base of its UVM_REGISTER_CHANNEL range
        self.compute_channel: Channel = None  # type: ignore[assignment]
        self.copy_channel: Channel = None  # type: ignore[assignment]
        self.shared_window, self.local_window = SHARED_WINDOW, LOCAL_WINDOW
        self.gen: NVGeneration = None  # type: ignore[assignment]  # picked in _open
        self.slm_per_thread = 0
        self._slm: Buffer | None = None
        self._slm_tpc_B = 0
        self._stream_channels: list[Channel] = []       # made for streams, kept until close
        self._idle_stream_channels: list[Channel] = []  # of closed streams, for the next one
        self._debugger = 0
        self.driver_version = ""
        self._copy_pool: Any = None
        self._copy_threads = max(1, min(8, (os_module.cpu_count() or 1) // 2))
        # The launch hot path's slot memory.
        self._copy_template: tuple[Any, tuple[int, ...]] | None = None
        self.launch_chunks = ChunkPool(self)
        #: launches go through the native helper (runtime/hcq/native.py) when it can be built
        self.launch_native = native.enabled()
        try:
            self._claim()
            self._open(index)
        except BaseException:
            try:
                self._release_hw()
            finally:
                self.closed = True
                self._give_back_lease()
            raise

    # ------------------------------------------------------------------ shared words
    # The timeline value and whether the device may submit live in `words`, where the native
    # launch helper reads them (gpfifo.DEVICE_WORDS); these properties keep the core's names.
    @property  # type: ignore[override]
    def timeline_value(self) -> int:
        """The last timeline value handed out by next_timeline()."""
        return self.words[TIMELINE_VALUE]

    @timeline_value.setter
    def timeline_value(self, value: int) -> None:
        self.words[TIMELINE_VALUE] = value

    @property  # type: ignore[override]
    def _fault(self) -> DeviceFault | None:
        return self._fault_error

    @_fault.setter
    def _fault(self, fault: DeviceFault | None) -> None:
        self._fault_error = fault
        self.words[BLOCKED] = (self.words[BLOCKED] & SubmitLock.HELD) | \
            int(fault is not None or self._closed)

    @property  # type: ignore[override]
    def closed(self) -> bool:
        """True once close() ran (or bring-up failed)."""
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self._closed = value
        self.words[BLOCKED] = (self.words[BLOCKED] & SubmitLock.HELD) | \
            int(value or self._fault_error is not None)

    @property
    def may_submit(self) -> bool:
        """Whether the device takes work (not faulted, not closed): one word the launch paths
        read (`words`)."""
        return not self.words[BLOCKED] & 1

    # ------------------------------------------------------------------ bring-up
    def _open(self, index: int) -> None:
        self.rm = NvRm(self.os)
        ver = self.rm.control(self.rm.root, rm.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
                              rm.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS())
        raw = bytes(ver.driverVersionBuffer).split(b"\0")[0]
        self.driver_version = raw.decode(errors="replace")
        self.uvm = Uvm(self.os, self.rm.fd_ctl)
        cards = self.rm.card_info()
        if index >= len(cards):
            raise DeviceNotFound(f"{self.name}: only {len(cards)} NVIDIA GPU(s) present")
        card = cards[index]
        self.gpu_id = card.gpu_id
        self.minor = card.minor_number
        self.fd_dev = self.rm.open_gpu_fd(self.minor)
        info = self.rm.control(self.rm.root, rm.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
                               rm.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS(gpuId=card.gpu_id))
        r = self.rm
        self.device_instance = info.deviceInstance
        self.nvdevice = r.alloc(r.root, rm.NV01_DEVICE_0, rm.NV0080_ALLOC_PARAMETERS(
            deviceId=info.deviceInstance, hClientShare=r.root,
            vaMode=rm.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES))
        self.subdevice = r.alloc(self.nvdevice, rm.NV20_SUBDEVICE_0, rm.NV2080_ALLOC_PARAMETERS())
        self.virtmem = r.alloc(self.nvdevice, rm.NV01_MEMORY_VIRTUAL,
                               rm.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS(limit=0x1FFFFFFFFFFFF))
        # The generation is chosen once, from the classes RM offers; everything that differs
        # between generations is read from its record from here on.
        gen = self.gen = pick_generation(self._class_list(), self.name)
        self.usermode_class, self.gpfifo_class = gen.usermode_class, gen.gpfifo_class
        self.compute_class, self.dma_class = gen.compute_class, gen.copy_class
        self.qmd_class: type[QMD] = gen.qmd
        self.usermode = r.alloc(self.subdevice, self.usermode_class)
        self.usermode_map = self._map_fd_memory(self.usermode, USERMODE_MAP_B, 0, ctl=False)
        try:  # clocks to maximum for compute, as CUDA and tinygrad ask; refusal is harmless
            boost = fval(rm.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA,
                         rm.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES) \
                | fval(rm.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY,
                       rm.NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH) \
                | rm.NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX
            r.control(self.subdevice, rm.NV2080_CTRL_CMD_PERF_BOOST,
                      rm.NV2080_CTRL_PERF_BOOST_PARAMS(duration=0xFFFFFFFF, flags=boost))
        except RmError:
            pass
        vas = rm.NV_VASPACE_ALLOCATION_PARAMETERS(
            vaBase=0x1000, vaSize=0x1FFFFFB000000,
            flags=rm.NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING
            | rm.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED)
        self.vaspace = r.alloc(self.nvdevice, rm.FERMI_VASPACE_A, vas)
        gid = r.control(self.subdevice, rm.NV2080_CTRL_CMD_GPU_GET_GID_INFO,
                        rm.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(
                            flags=rm.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY, length=16))
        self.uuid = bytes(gid.data[:16])
        self.uvm.register_gpu(self.uuid)
        self._uvm_gpu = True
        self.uvm.register_gpu_vaspace(self.uuid, r.root, self.vaspace)
        self._uvm_vaspace = True
        self.gpu = self._gr_info()
        self.sm = decode_sm_version(self.gpu.sm_version)
        self.arch = f"sm_{self.sm}"
        self.sass_version = ((self.gpu.sm_version & 0xF00) >> 4) | (self.gpu.sm_version & 0xF)
        if self.sm not in gen.sm:
            raise DeviceNotFound(f"{self.name}: sm_{self.sm} with the {gen.name} classes "
                                 f"(that generation's record describes sm {gen.sm})")
        self.default_param_base = gen.param_base
        # -- memory is usable from here on
        alloc = NVAllocator(self)
        self.allocator = alloc
        self.channel_group = r.alloc(self.nvdevice, rm.KEPLER_CHANNEL_GROUP_A,
                                     rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(
                                         engineType=rm.NV2080_ENGINE_TYPE_GRAPHICS))
        # GPFIFO rings and USERD: contiguous VRAM, write-combined for the CPU (tinygrad's choice).
        self.gpfifo_area = alloc.track(alloc.alloc_vram(
            GPFIFO_AREA_B, BufferSpec(MemKind.VRAM, cpu_access=True), contiguous=True,
            map_flags=fval(rm.NVOS33_FLAGS_CACHING_TYPE,
                           rm.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED)))
        self.ctxshare = r.alloc(self.channel_group, rm.FERMI_CONTEXT_SHARE_A,
                                rm.NV_CTXSHARE_ALLOCATION_PARAMETERS(
                                    hVASpace=self.vaspace,
                                    flags=rm.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC))
        # Signals need the core's pool, which needs the allocator: set up the core now.
        self._init_core(alloc)
        self.compute_channel = self._new_channel("compute", 0, self.compute_class, 1)
        self.copy_channel = self._new_channel("copy", 0x100000, self.dma_class, 4)
        r.control(self.channel_group, rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
                  rm.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))
        v = self.next_timeline()
        NVComputeQueue(self).setup(compute_class=self.compute_class,
                                   shared_window=self.shared_window,
                                   local_window=self.local_window).signal(self.timeline_signal, v) \
            .submit()
        v = self.next_timeline()
        NVCopyQueue(self).wait(self.timeline_signal, v - 1).setup(copy_class=self.dma_class) \
            .signal(self.timeline_signal, v).submit()
        self.synchronize()

    def _class_list(self) -> set[int]:
        r = self.rm
        n = r.control(self.nvdevice, rm.NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
                      rm.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(numClasses=0)).numClasses
        buf = (ctypes.c_uint32 * max(n, 1))()
        p = r.control(self.nvdevice, rm.NV0080_CTRL_CMD_GPU_GET_CLASSLIST,
                      rm.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS(numClasses=n,
                                                              classList=ctypes.addressof(buf)))
        return set(buf[:p.numClasses])

    def _gr_info(self) -> GpuInfo:
        idx = (rm.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION,
               rm.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
               rm.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
               rm.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
               rm.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM)
        infos = (rm.NV2080_CTRL_GR_INFO * len(idx))(*[rm.NV2080_CTRL_GR_INFO(index=i) for i in idx])
        self.rm.control(self.subdevice, rm.NV2080_CTRL_CMD_GR_GET_INFO,
                        rm.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=len(idx),
                                                          grInfoList=ctypes.addressof(infos)))
        return GpuInfo(*(x.data for x in infos))

    # ------------------------------------------------------------------ description
    def _read_properties(self) -> DeviceProperties:
        """From RM: the name string, GR info (CUDA cores per SM and in all, warp size) and the FB
        size; the per-block shared memory limit by SM version (CUDA programming guide)."""
        name = rm.NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS(
            gpuNameStringFlags=rm.NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII)
        self.rm.control(self.subdevice, rm.NV2080_CTRL_CMD_GPU_GET_NAME_STRING, name)
        text = ctypes.string_at(ctypes.addressof(name.gpuNameString),
                                ctypes.sizeof(name.gpuNameString)).split(b"\0")[0]
        cores, sp_per_sm, warp = self._gr_values(rm.NV2080_CTRL_GR_INFO_INDEX_GPU_CORE_COUNT,
                                                 rm.NV2080_CTRL_GR_INFO_INDEX_MAX_SP_PER_SM,
                                                 rm.NV2080_CTRL_GR_INFO_INDEX_MAX_THREADS_PER_WARP)
        # RM 580 on an H200 reports MAX_SP_PER_SM as 0 (and 16896 cores): the cores per SM then
        # come from the SM version. The litter values are the full chip's, not the enabled SMs.
        per_sm = sp_per_sm or _CORES_PER_SM.get(self.sm, 0)
        sms = cores // per_sm if cores and per_sm else \
            self.gpu.num_gpcs * self.gpu.tpc_per_gpc * self.gpu.sm_per_tpc
        return DeviceProperties(
            vendor="NVIDIA", name=text.decode(errors="replace") or f"NVIDIA {self.arch}",
            arch=self.arch, compute_units=sms, simd_width=warp or 32,
            max_workgroup_size=self.gen.limits.max_block_threads,
            shared_memory_per_workgroup_B=_MAX_SHARED_PER_BLOCK_KiB.get(self.sm, 48) * 1024,
            # RM's clock controls are not among the generated bindings.
            max_clock_hz=None, timestamp_hz=self.clock_hz,
            memory_B=self._fb_values(rm.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE)[0] << 10,
            mock=not isinstance(self.os, RealOS))

    def _gr_values(self, *indices: int) -> list[int]:
        infos = (rm.NV2080_CTRL_GR_INFO * len(indices))(
            *[rm.NV2080_CTRL_GR_INFO(index=i) for i in indices])
        self.rm.control(self.subdevice, rm.NV2080_CTRL_CMD_GR_GET_INFO,
                        rm.NV2080_CTRL_GR_GET_INFO_PARAMS(grInfoListSize=len(indices),
                                                          grInfoList=ctypes.addressof(infos)))
        return [int(x.data) for x in infos]

    def _fb_values(self, *indices: int) -> list[int]:
        p = rm.NV2080_CTRL_FB_GET_INFO_V2_PARAMS(fbInfoListSize=len(indices))
        for i, index in enumerate(indices):
            p.fbInfoList[i].index = index
        self.rm.control(self.subdevice, rm.NV2080_CTRL_CMD_FB_GET_INFO_V2, p)
        return [int(p.fbInfoList[i].data) for i in range(len(indices))]

    def _mem_info(self) -> MemInfo:
        """RM's FB info: the heap's free KiB and the total RAM size."""
        free_kib, total_kib = self._fb_values(rm.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE,
                                              rm.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE)
        return MemInfo(free_kib << 10, total_kib << 10)

    def _new_channel(self, name: str, offset: int, engine_class: int, subc: int,
                     area: Buffer | None = None) -> Channel:
        r, area = self.rm, area or self.gpfifo_area
        alloc: NVAllocator = self.allocator  # type: ignore[assignment]
        notifier = alloc.alloc_sysmem(NOTIFIER_B)
        entries = self.gpfifo_entries
        userd_off = offset + round_up(entries * 8, USERD_B)  # USERD is 512-byte aligned
        area_mem = area.handle
        params = rm.NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS(
            gpFifoOffset=area.va + offset, gpFifoEntries=entries,
            hContextShare=self.ctxshare, hObjectError=notifier.handle.handle,
            hObjectBuffer=area_mem.handle)
        params.hUserdMemory[0] = area_mem.handle
        params.userdOffset[0] = userd_off
        handle = r.alloc(self.channel_group, self.gpfifo_class, params)
        objs: list[int] = []
        entry = (handle, objs, False)
        self._channel_objects.append(entry)
        objs.append(r.alloc(handle, engine_class))
        token = r.control(handle, rm.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
                          rm.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS(
                              workSubmitToken=0xFFFFFFFF)).workSubmitToken
        uvm_base = self.va_heap.alloc(CHANNEL_UVM_B, HUGE_PAGE_B)
        try:
            self.uvm.register_channel(self.uuid, r.root, handle, uvm_base, CHANNEL_UVM_B)
        except BaseException:
            self.va_heap.release(uvm_base, CHANNEL_UVM_B)
            raise
        self._channel_objects[-1] = (handle, objs, True)
        self._channel_uvm[handle] = uvm_base
        view = area.cpu_view()
        pushbuf = self.alloc(self.pushbuf_B, kind=MemKind.VRAM, cpu_access=True)
        progress = self.new_signal(0)
        assert self.usermode_map is not None
        bell = self.os.doorbell(self.usermode_map, DOORBELL_OFFSET_B, 4)
        ch = Channel(self, name, handle, engine_class, subc, view[offset:offset + entries * 8],
                     entries, view[userd_off:userd_off + USERD_B], token, bell, pushbuf, progress)
        ch.notifier = notifier
        if notifier.view is not None:
            ch.error_notifier = notifier.view[:16]
        self.channels.append(ch)
        return ch

    # ------------------------------------------------------------------ mappings
    def _map_fd_memory(self, memory: int, size: int, flags: int, ctl: bool) -> HostMapping:
        """NV_ESC_RM_MAP_MEMORY into a fresh descriptor (registered /dev/nvidiaN, or /dev/nvidiactl
        for RM system memory), then mmap of it; the descriptor is closed after the mmap."""
        if ctl:
            fd = self.os.open("/dev/nvidiactl", os.O_RDWR)
        else:
            fd = self.rm.open_gpu_fd(self.minor)
        try:
            self.rm.map_memory_cpu(self.nvdevice, memory, size, fd, flags)
            return self.os.mmap(None, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        finally:
            self.os.close(fd)

    def map_to_cpu(self, memory: int, size: int, flags: int = 0, ctl: bool = False) -> HostMapping:
        """A CPU mapping of RM memory `memory` (BAR1 for VRAM)."""
        return self._map_fd_memory(memory, size, flags, ctl)

    def map_to_gpu(self, memory: int, size: int, page: int, peer: bool = False) -> int:
        """Maps RM memory at a fresh GPU address: UVM range, RM DMA mapping, UVM mapping. `peer`:
        the memory is another GPU's VRAM (peer.py), mapped through the P2P aperture."""
        va = self.va_heap.alloc(size, max(page, PAGE_B))
        try:
            self.uvm.create_external_range(va, size)
        except BaseException:
            self.va_heap.release(va, size)
            raise
        try:
            flags = fval(rm.NVOS46_FLAGS_PAGE_SIZE, rm.NVOS46_FLAGS_PAGE_SIZE_4KB) \
                | fval(rm.NVOS46_FLAGS_CACHE_SNOOP, rm.NVOS46_FLAGS_CACHE_SNOOP_ENABLE) \
                | fval(rm.NVOS46_FLAGS_DMA_OFFSET_FIXED, rm.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE)
            if peer:
                flags |= fval(rm.NVOS46_FLAGS_P2P_ENABLE, rm.NVOS46_FLAGS_P2P_ENABLE_NOSLI)
            self.rm.map_memory_dma(self.nvdevice, self.virtmem, memory, size, va, flags)
            self.uvm.map_external_allocation(va, size, self.rm.root, memory, self.uuid)
        except BaseException:
            self.uvm.free(va, size)
            self.va_heap.release(va, size)
            raise
        return va

    # ------------------------------------------------------------------ peers (peer.py)
    def _peer_access(self, other: Device) -> str | None:
        assert isinstance(other, NVDevice)
        key = id(other)
        if key not in self._p2p_caps:
            self._p2p_caps[key] = peer.p2p_caps(self, other)
        return self._p2p_caps[key]

    def _map_peer(self, buf: Buffer) -> Buffer:
        other = buf.device
        assert isinstance(other, NVDevice)
        mem: NvMem = buf.handle
        if mem.host is not None:  # host pages: describe them to this device's RM as well
            flags = fval(rm.NVOS02_FLAGS_PHYSICALITY, rm.NVOS02_FLAGS_PHYSICALITY_NONCONTIGUOUS) \
                | fval(rm.NVOS02_FLAGS_COHERENCY, rm.NVOS02_FLAGS_COHERENCY_CACHED) \
                | fval(rm.NVOS02_FLAGS_MAPPING, rm.NVOS02_FLAGS_MAPPING_NO_MAP)
            handle = self.rm.alloc_os_descriptor(self.fd_dev, self.nvdevice, mem.host.addr,
                                                 mem.size, flags)
            page, is_peer = PAGE_B, False
        elif buf.spec.kind is MemKind.VRAM:
            link = self._peer_links.get(id(other))
            if link is None:
                link = self._peer_links[id(other)] = peer.PeerLink(self, other)
            handle = self.rm.dup_object(link.remote_device, other.rm.root, mem.handle)
            page = HUGE_PAGE_B if mem.size % HUGE_PAGE_B == 0 and mem.size >= 8 << 20 else PAGE_B
            is_peer = True
        else:
            raise HCQMemoryError(f"{buf!r} is RM-owned system memory, which {self.name} does not "
                                 "map from another device")
        mapped = NvMem(handle, mem.size, 0, None, None)
        try:
            mapped.va = self.map_to_gpu(handle, mem.size, page, peer=is_peer)
        except BaseException:
            self.rm.free(handle)
            raise
        return Buffer(self, mapped.va, buf.size, buf.spec, buf.view, mapped)

    def _unmap_peer(self, mapping: Buffer) -> None:
        alloc: NVAllocator = self.allocator  # type: ignore[assignment]
        alloc._undo(mapping.handle)  # UVM range, VA, and the RM handle (never the owner's pages)

    def _close_peer_links(self) -> list[BaseException]:
        errors: list[BaseException] = []
        for link in reversed(list(self._peer_links.values())):
            try:
                link.close()
            except BaseException as e:
                errors.append(e)
        self._peer_links.clear()
        return errors

    # ------------------------------------------------------------------ Device API
    def compute_queue(self) -> NVComputeQueue:
        """A new command builder for the compute channel."""
        return NVComputeQueue(self)

    def copy_queue(self) -> NVCopyQueue:
        """A new command builder for the copy channel."""
        return NVCopyQueue(self)

    def _submit_copy(self, dst_va: int, src_va: int, size: int) -> int:
        """A timeline copy from the copy queue's own words for it, built once, with the addresses,
        length and timeline values patched in (what `Device._submit_copy` submits, without
        building a queue per copy)."""
        with self._submit:
            if self.tracer is not None:
                return self.tracer.copy(dst_va, src_va, size)
            return self._submit_copy_locked(dst_va, src_va, size)

    def _submit_copy_locked(self, dst_va: int, src_va: int, size: int) -> int:
        if size > MAX_COPY_CHUNK_B or self.timeline_value + 1 > 0xFFFFFFFF:
            return super()._submit_copy(dst_va, src_va, size)
        t = self._copy_template or self._make_copy_template()
        words, (acq, shi, slo, dhi, dlo, length, rel) = t
        v = self.timeline_value + 1  # taken only once the copy is submitted
        w = words[:]
        w[acq], w[rel], w[length] = v - 1, v, size
        w[shi], w[slo], w[dhi], w[dlo] = src_va >> 32, src_va & 0xFFFFFFFF, dst_va >> 32, \
            dst_va & 0xFFFFFFFF
        try:
            self.copy_channel.submit_one(w)
        except Exception as e:
            self.note_submit_error(e)  # a fault noticed while submitting poisons the device
            raise
        self.timeline_value = v
        return v

    def _make_copy_template(self) -> tuple[Any, tuple[int, ...]]:
        # Build the words with distinct marker values and find where each one landed.
        marks = (0x1A1A1, 0x2B2B, 0x3C3C3C3C, 0x4D4D, 0x5E5E5E5E, 0x6F6F6, 0x7A7A7)
        tl = self.timeline_signal
        q = self.copy_queue().wait(tl, marks[0]).copy((marks[3] << 32) | marks[4],
                                                      (marks[1] << 32) | marks[2], marks[5]) \
            .signal(tl, marks[6])
        words = q.words
        pos = tuple(words.index(m) for m in marks)
        if any(words.count(m) != 1 for m in marks):
            raise QueueError("copy template: a marker value occurs twice")
        self._copy_template = (words, pos)
        return self._copy_template

    def program(self, lib: bytes, name: str, dynamic_smem_B: int = 0) -> NVProgram:
        """Loads kernel `name` of a cubin (`dynamic_smem_B`: dynamic shared memory per launch)."""
        self.check_usable()
        return NVProgram(self, lib, name, dynamic_smem_B)

    @property
    def compiler(self) -> "NVCompiler":
        """NVRTC for this GPU's architecture (CUDA C++ → cubin); `Device.compiler`, typed."""
        return cast("NVCompiler", super().compiler)

    def _make_compiler(self) -> "NVCompiler":
        from runtime.drivers.nv.compiler import NVCompiler
        return NVCompiler(self.arch, output=self.code_format)

    @property
    def code_format(self) -> str:
        """What this GPU's programs are: "cubin" (SASS), or "ptx" where the GPU executes PTX (the
        mock, which says so through its OS seam); `compiler` and the Triton loader follow it."""
        return str(getattr(self.os, "nv_code_format", "cubin"))

    def alloc_kernargs(self, size: int) -> Buffer:
        """Launch blocks (constant bank 0 and the QMD) live in VRAM the CPU writes through BAR1, as
        tinygrad keeps its kernel arguments: the GPU reads them without crossing the bus (each
        QMD or constant-bank fetch from system memory costs about a microsecond)."""
        return self.alloc(size, kind=MemKind.VRAM, cpu_access=True)

    def ensure_local_memory(self, per_thread_B: int) -> None:
        """Makes the shader local memory (SLM) cover `per_thread_B` bytes per thread for every
        thread the GPU can hold (tinygrad's sizing: per TPC, rounded to 32 KiB)."""
        if per_thread_B <= self.slm_per_thread:
            return
        g = self.gpu
        per_thread = round_up(per_thread_B, 32)
        bytes_per_tpc = round_up(round_up(per_thread * 32, 0x200) * g.max_warps_per_sm
                                 * g.sm_per_tpc, 0x8000)
        total = round_up(bytes_per_tpc * g.tpc_per_gpc * g.num_gpcs, 0x20000)
        new = self.alloc(total, kind=MemKind.VRAM)
        with self._submit:
            v = self.timeline_value + 1
            self.submit_timeline(NVComputeQueue(self).wait(self.timeline_signal, v - 1)
                                 .set_local_memory(new.va, bytes_per_tpc, 0xFF)
                                 .signal(self.timeline_signal, v), v)
        self.synchronize()
        for ch in self._stream_channels:  # local memory is per channel state
            sig = self.new_signal(0)
            NVComputeQueue(self, ch).set_local_memory(new.va, bytes_per_tpc, 0xFF) \
                .signal(sig, 1).submit()
            sig.wait(1)
            sig.release()
        old, self._slm, self.slm_per_thread = self._slm, new, per_thread
        self._slm_tpc_B = bytes_per_tpc
        if old is not None:
            self.free(old)

    def _stream_hw(self) -> "tuple[Callable[[], NVComputeQueue], Callable[[], None]]":
        """A compute channel of its own in the device's channel group (its GPFIFO ring and USERD
        in a fresh write-combined VRAM area), with the compute class, the shared and local
        windows and the local memory bound. Channels of closed streams are reused."""
        if self._idle_stream_channels:
            ch = self._idle_stream_channels.pop()
        else:
            alloc: NVAllocator = self.allocator  # type: ignore[assignment]
            area_B = round_up(round_up(self.gpfifo_entries * 8, USERD_B) + USERD_B, PAGE_B)
            area = alloc.track(alloc.alloc_vram(
                area_B, BufferSpec(MemKind.VRAM, cpu_access=True), contiguous=True,
                map_flags=fval(rm.NVOS33_FLAGS_CACHING_TYPE,
                               rm.NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED)))
            ch = self._new_channel(f"stream {len(self._stream_channels) + 1}", 0,
                                   self.compute_class, 1, area)
            try:  # channels added after the group was scheduled: schedule again (idempotent)
                self.rm.control(self.channel_group, rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
                                rm.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))
            except RmError:
                pass
            q = NVComputeQueue(self, ch).setup(compute_class=self.compute_class,
                                               shared_window=self.shared_window,
                                               local_window=self.local_window)
            if self._slm is not None:
                q.set_local_memory(self._slm.va, self._slm_tpc_B, 0xFF)
            sig = self.new_signal(0)
            q.signal(sig, 1).submit()
            sig.wait(1)
            sig.release()
            self._stream_channels.append(ch)

        def release() -> None:
            if not self.closed:
                self._idle_stream_channels.append(ch)
        return (lambda: NVComputeQueue(self, ch)), release

    # ------------------------------------------------------------------ waiting and faults
    def sleep_for_signal(self, sig: Signal, value: int, timeout_ms: float) -> None:
        # No interrupt-driven wait yet: poll the signal for up to a millisecond (completions are
        # seen within a poll, which matters for latency and for copies of a few MiB); the core
        # checks for faults between calls. The poll keeps the GIL throughout: CPython then hands
        # it to a waiting thread at every switch interval. Releasing it briefly here (a zero
        # sleep) would do the opposite: the waiting thread wakes, finds it taken again and
        # starts its interval over, so a long wait would starve every other thread.
        u64 = sig.value_view
        sleep = getattr(self.os, "sleep_for_gpu", None)
        if sleep is not None:  # a mock GPU running on a thread of this process: it wakes us
            sleep(min(timeout_ms, 1.0) / 1000.0, lambda: u64[0] >= value)
            return
        end = time.perf_counter() + min(timeout_ms, 1.0) / 1000.0
        while time.perf_counter() < end:
            if u64[0] >= value:
                return

    def _host_copy(self, dst: memoryview, src: memoryview) -> None:
        # Staging copies of pageable memory are bound by one core's memcpy; numpy releases the GIL
        # while copying, so large chunks are split across a few threads.
        n = len(dst)
        if n < HOST_COPY_SPLIT_B or self._copy_threads == 1:
            dst[:] = src
            return
        import numpy as np
        if self._copy_pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._copy_pool = ThreadPoolExecutor(self._copy_threads, "nv-host-copy")
        d, s = np.frombuffer(dst, np.uint8), np.frombuffer(src, np.uint8)
        step = round_up(-(-n // self._copy_threads), PAGE_B)
        futures = [self._copy_pool.submit(np.copyto, d[i:i + step], s[i:i + step])
                   for i in range(0, n, step)]
        for f in futures:
            f.result()

    def _poll_fault(self) -> DeviceFault | None:
        for ch in self.channels:
            err = ch.error()
            if err is None:
                continue
            info32, info16, status = err
            what = _XID.get(info32, "unknown error")
            report = [f"{ch.name} channel: RM error notifier: Xid {info32} ({what}), "
                      f"info16 {info16:#x}, status {status:#x}"]
            report += self._sm_errors()
            log = self.os.kernel_log()
            if log:
                report.append("kernel log:\n  " + "\n  ".join(log[-20:]))
            report.append(self.describe_state())
            return DeviceFault(self.name, "\n".join(report))
        return None

    def _sm_errors(self) -> list[str]:
        """SM error states through a GT200_DEBUGGER object (made on first use), best effort."""
        try:
            if not self._debugger:
                self._debugger = self.rm.alloc(self.nvdevice, rm.GT200_DEBUGGER,
                                               rm.NV83DE_ALLOC_PARAMETERS(
                                                   hAppClient=self.rm.root,
                                                   hClass3dObject=self._channel_objects[0][1][0]))
            p = self.rm.control(self._debugger, rm.NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES,
                                rm.NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS(
                                    hTargetChannel=self.compute_channel.handle, numSMsToRead=100))
        except (HCQError, IndexError, AttributeError) as e:
            return [f"(SM error states unavailable: {e})"]
        out = []
        for i, st in enumerate(p.smErrorStateArray):
            if st.hwwGlobalEsr or st.hwwWarpEsr:
                out.append(f"SM {i}: global esr {st.hwwGlobalEsr:#x}, warp esr "
                           f"{st.hwwWarpEsr:#x}, pc {st.hwwWarpEsrPc64:#x}")
        return out

    def _describe_queues(self) -> list[str]:
        # What the kernel reports about the GPU (the mock: a channel busy with a long grid, with
        # its warps' positions).
        return [ch.describe() for ch in self.channels] + [
            f"kernel log: {ln}" for ln in self.os.kernel_log()[-4:]]

    # ------------------------------------------------------------------ teardown
    def _release_hw(self) -> None:
        """Frees every RM object this device made in exactly the reverse order of creation; each
        object's companions are undone just before it (a buffer's UVM range and CPU mapping, a
        channel's UVM registration, the VA space's UVM registration and the UVM GPU)."""
        errors: list[BaseException] = []

        def attempt(fn: Callable[..., Any], *args: Any) -> None:
            try:
                fn(*args)
            except BaseException as e:  # keep tearing down; report the first problem at the end
                errors.append(e)

        if self._copy_pool is not None:
            self._copy_pool.shutdown(wait=True)
            self._copy_pool = None
        errors += self._close_peer_links()
        r = self.rm
        if r is not None:
            alloc = getattr(self, "allocator", None)
            buffers = {b.handle.handle: b for b in alloc._live.values()} if alloc else {}
            # Memory the caching allocator holds is released in the same creation order.
            cached = {b.handle.handle: b for b in alloc.drain_cache()} if alloc else {}
            channels = {h for h, _, _ in self._channel_objects}
            for obj in reversed(r.live()):
                h = obj.handle
                if h == r.root:
                    continue
                if h in buffers:
                    attempt(alloc.free, buffers[h])  # type: ignore[union-attr]
                    continue
                if h in cached:
                    attempt(alloc._free, cached[h])  # type: ignore[union-attr]
                    continue
                if h in channels and h in self._channel_uvm:
                    attempt(self.uvm.unregister_channel, self.uuid, r.root, h)
                    self.va_heap.release(self._channel_uvm.pop(h), CHANNEL_UVM_B)
                if h == self.vaspace:
                    if self._uvm_vaspace:
                        attempt(self.uvm.unregister_gpu_vaspace, self.uuid)
                        self._uvm_vaspace = False
                    if self._uvm_gpu:
                        attempt(self.uvm.unregister_gpu, self.uuid)
                        self._uvm_gpu = False
                if h == self.usermode and self.usermode_map is not None:
                    attempt(self.os.munmap, self.usermode_map)
                    self.usermode_map = None
                attempt(r.free, h)
            self._channel_objects.clear()
            self.channels.clear()
            self._stream_channels.clear()
            self._idle_stream_channels.clear()
            self._debugger = 0
            self.nvdevice = self.subdevice = self.virtmem = self.vaspace = 0
            self.usermode = self.channel_group = self.ctxshare = 0
            if self._uvm_gpu:
                attempt(self.uvm.unregister_gpu, self.uuid)
                self._uvm_gpu = False
            if self.fd_dev >= 0:
                attempt(self.os.close, self.fd_dev)
                self.fd_dev = -1
            attempt(r.close)
            self.rm = None  # type: ignore[assignment]
        if self.uvm is not None:
            attempt(self.uvm.close)
            self.uvm = None  # type: ignore[assignment]
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"NVDevice({self.name!r}, {self.arch}, driver {self.driver_version or '?'})"


def decode_sm_version(sm_version: int) -> int:
    """GR_INFO SM_VERSION (0x900) → 90."""
    return ((sm_version >> 8) & 0xFF) * 10 + (sm_version & 0xF)

