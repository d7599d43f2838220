"""The mock KFD: /dev/kfd, the render nodes and the sysfs topology of AMD GPUs: gfx1100 (RDNA3, whose
kernels the RDNA3 interpreter executes) and gfx942 (MI300X, CDNA3: its queues, packets and
dispatches are checked and completed, but kernel code is not executed; see `MockPart`). One mock
machine may mix them: `MockOS.with_amd_gpus(2, archs=("gfx1100", "gfx942"))`.

It answers the ioctls the AMD driver makes (argument structs and request numbers from the generated
`kfd_ioctl` bindings) with the checks amdkfd makes (Linux 6.1 kfd_chardev.c, kfd_events.c,
amdgpu_amdkfd_gpuvm.c), plus the ones the hardware would enforce later (ring alignment, mapped queue
memory). Kernel objects are counted so tests can prove that a device released everything; objects
still alive when /dev/kfd closes are released like process exit does, and counted as leaks.
"""
from __future__ import annotations

import ctypes
import errno as E
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from hcq_bindings.linux import kfd_ioctl as kfd

from runtime.drivers.amd.arch import GFX11, GFX942, find_arch
from runtime.drivers.mock.amd_gpu import DOORBELL_SLICE_B, MockAMDGPU
from runtime.drivers.mock.amd_pm4 import PM4Processor
from runtime.drivers.mock.amd_sdma import SDMAProcessor
from runtime.drivers.mock.memory import PageFault
from runtime.drivers.mock.os import MockFile, MockOS
from runtime.hcq.device import interrupt_pending

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
# kfd_priv.h: mmap offsets carry a type in bits 63:62 and the gpu id in bits 61:46.
KFD_MMAP_TYPE_SHIFT = 62
KFD_MMAP_TYPE_DOORBELL = 3
KFD_MMAP_GPU_ID_SHIFT = 46
UNSIGNALED_EVENT_SLOT = (1 << 64) - 1   # kfd_events.c
_SLOT = struct.Struct("<Q")              # one event slot of the event page
FIRST_NONSIGNAL_EVENT_ID = 0x80000000   # kfd_events.c: KFD_FIRST_NONSIGNAL_EVENT_ID
MIN_RING_B = 1024                       # kfd_chardev.c: KFD_MIN_QUEUE_RING_SIZE
_PAGE = 4096
# longest sleep of a WAIT_EVENTS between checks for events set by another host thread and Ctrl-C
_WAIT_SLICE_S = 0.002


@dataclass(frozen=True)
class MockPart:
    """What the mock presents for one processor: its KFD topology node properties, the IP versions
    and register bases of its ip_discovery folder (hw_id -> (major, minor, revision), bases), and
    whether the mock executes its kernels (a part it does not execute still has every queue,
    packet and dispatch checked; a kernel model registered with `MockAMDGPU.register_kernel` then
    stands in for the kernel, as on the mock NVIDIA GPU). `checks_cwsr`: CREATE_QUEUE requires
    the CWSR sizes amdkfd computes for the node, as kernels from 6.12 on do (`cwsr_sizes`)."""

    name: str
    properties: dict[str, int]
    ip: dict[int, tuple[tuple[int, int, int], tuple[int, ...]]]
    executes_kernels: bool
    checks_cwsr: bool = False


def cwsr_sizes(props: dict[str, int]) -> tuple[int, int, int, int]:
    """(cwsr_size, ctl_stack_size, debug_memory_size, XCCs) of a topology node, as amdkfd's
    kfd_queue_ctx_save_restore_size computes them (Linux 6.12 kfd_queue.c), written out here
    independently of the driver so that the mock checks what the driver sends."""
    v = props["gfx_target_version"]
    xccs = max(1, props.get("num_xcc", 1))
    cus = props["simd_count"] // props["simd_per_cu"] // xccs
    if v < 100100:   # before GFX_VERSION_NAVI10
        waves = min(cus * 40, props["array_count"] // props["simd_arrays_per_engine"] * 512)
    else:
        waves = cus * 32
    if v // 100 * 100 == 90400 or v in (90010, 90008):
        vgpr = 0x80000
    elif v in (110000, 110001, 120000, 120001):
        vgpr = 0x60000
    else:
        vgpr = 0x40000
    page = _PAGE
    wg_data = -(-cus * (vgpr + 0x4000 + 0x10000 + 0x1000) // page) * page
    ctl = -(-(40 + waves * (12 if v >= 100100 else 8) + 8) // page) * page
    debug = -(-waves * 32 // 64) * 64
    return ctl + wg_data, ctl, debug, xccs


# ip_discovery hw_ids (soc15_hw_ip.h): GC 11, SDMA0 42, NBIF (NBIO) 108
_GC, _SDMA0, _NBIO = 11, 42, 108
PARTS: dict[str, MockPart] = {p.name: p for p in (
    # A Radeon RX 7900 XTX's node (kfd_topology.c properties as amdkfd reports them). GC bases:
    # the ones the generated register module records for gfx11 (sienna_cichlid_ip_offset.h's
    # GC_BASE__INST0_SEG*).
    MockPart("gfx1100", {
        "cpu_cores_count": 0, "simd_count": 192, "mem_banks_count": 1, "caches_count": 206,
        "io_links_count": 1, "p2p_links_count": 0, "cpu_core_id_base": 0,
        "simd_id_base": 2147487744, "max_waves_per_simd": 16, "lds_size_in_kb": 64,
        "gds_size_in_kb": 0, "num_gws": 64, "wave_front_size": 32, "array_count": 12,
        "simd_arrays_per_engine": 2, "cu_per_simd_array": 8, "simd_per_cu": 2,
        "max_slots_scratch_cu": 32, "gfx_target_version": 110000, "vendor_id": 4098,
        "device_id": 29772, "location_id": 768, "domain": 0, "drm_render_minor": 128,
        "hive_id": 0, "num_sdma_engines": 2, "num_sdma_xgmi_engines": 0,
        "num_sdma_queues_per_engine": 6, "num_cp_queues": 8, "max_engine_clk_fcompute": 2482,
        "local_mem_size": 0, "fw_version": 2030, "capability": 671588992, "debug_prop": 1495,
        "sdma_fw_version": 20, "unique_id": 0, "num_xcc": 1, "max_engine_clk_ccompute": 2400},
        {_GC: ((11, 0, 0), tuple(GFX11.gc.GC_SEGMENT_BASES)), _SDMA0: ((6, 0, 0), (0x1260,)),
         _NBIO: ((4, 3, 0), (0x0, 0x14, 0xD20, 0x10400))},
        executes_kernels=True),
    # An MI300X's node: 304 CUs in 8 XCCs (each XCC has its own CWSR save area), wave64, SDMA
    # 4.4.2. GC bases: vega10_ip_offset.h's layout, recorded in the gc_9_4_3 module.
    MockPart("gfx942", {
        "cpu_cores_count": 0, "simd_count": 1216, "mem_banks_count": 1, "caches_count": 0,
        "io_links_count": 1, "p2p_links_count": 0, "cpu_core_id_base": 0,
        "simd_id_base": 2147488032, "max_waves_per_simd": 8, "lds_size_in_kb": 64,
        "gds_size_in_kb": 0, "num_gws": 64, "wave_front_size": 64, "array_count": 32,
        "simd_arrays_per_engine": 1, "cu_per_simd_array": 10, "simd_per_cu": 4,
        "max_slots_scratch_cu": 32, "gfx_target_version": 90402, "vendor_id": 4098,
        "device_id": 29857, "location_id": 768, "domain": 0, "drm_render_minor": 128,
        "hive_id": 0, "num_sdma_engines": 2, "num_sdma_xgmi_engines": 14,
        "num_sdma_queues_per_engine": 8, "num_cp_queues": 24, "max_engine_clk_fcompute": 2100,
        "local_mem_size": 0, "fw_version": 177, "capability": 746400384, "debug_prop": 1495,
        "sdma_fw_version": 22, "unique_id": 0, "num_xcc": 8, "max_engine_clk_ccompute": 2100},
        {_GC: ((9, 4, 3), tuple(GFX942.gc.GC_SEGMENT_BASES)),
         _SDMA0: ((4, 4, 2), (0x1260,)), _NBIO: ((7, 9, 0), (0x0, 0x14, 0xD20, 0x10400))},
        executes_kernels=False, checks_cwsr=True),
)}


@dataclass
class MockBO:
    """A KFD buffer object."""

    handle: int
    gpu: MockAMDGPU
    va: int
    size: int
    flags: int
    backing: np.ndarray
    mmap_offset: int
    mapped_on: set[int] = field(default_factory=set)  # gpu ids whose VM maps it

    @property
    def mapped(self) -> bool:
        """Mapped on at least one GPU."""
        return bool(self.mapped_on)


@dataclass
class MockEvent:
    """A KFD event."""

    event_id: int
    event_type: int
    auto_reset: bool
    signaled: bool = False
    exception: dict[str, Any] | None = None


@dataclass
class MockQueue:
    queue_id: int
    gpu: MockAMDGPU
    doorbell_off: int
    processor: Any
    # AMDKFD_IOC_ALLOC_QUEUE_GWS given: with MES (gfx11) the queue is exclusively scheduled (a
    # cooperative launch's occupancy) and gets no GWS range: ds_gws_* still fault (ops_gds).
    gws: bool = False


@dataclass
class _Process:
    """The one process's KFD state (amdkfd keeps one per process, shared by every open)."""

    bos: dict[int, MockBO] = field(default_factory=dict)
    events: dict[int, MockEvent] = field(default_factory=dict)
    queues: dict[int, MockQueue] = field(default_factory=dict)
    vms: dict[int, int] = field(default_factory=dict)  # gpu_id -> drm fd
    gws: set[int] = field(default_factory=set)   # gpu_ids where the process holds the GWS
    event_page: np.ndarray | None = None
    next_handle: int = 1
    next_queue: int = 1
    next_nonsignal: int = FIRST_NONSIGNAL_EVENT_ID
    next_mmap: int = 0x1_0000_0000


class MockKfdDriver:
    """The mock amdkfd + amdgpu for `count` GPUs, installed into a `MockOS`. `archs` names the
    processor of each GPU (a `PARTS` key), or one for all of them; `gfx_target_version` overrides
    what the topology reports (a part no record describes, to test that the driver refuses it)."""

    def __init__(self, os: MockOS, count: int = 1, *, vram_B: int = 24 << 30,
                 max_copy_B: int = 0x400000, p2p: bool = True,
                 archs: str | Sequence[str] = "gfx1100", gfx_target_version: int | None = None,
                 gws: bool = True) -> None:
        self.os = os
        names = [archs] * count if isinstance(archs, str) else list(archs)
        if len(names) != count or any(n not in PARTS for n in names):
            raise ValueError(f"archs {archs!r}: give one of {sorted(PARTS)} per GPU ({count}) "
                             "or one for all of them")
        #: GWS entries per GPU (topology num_gws): kfd_gws_init allocates the 64 on gfx11 with MES
        #: firmware 68 or later; False models older firmware (0, and ALLOC_QUEUE_GWS is ENODEV)
        self.num_gws = 64 if gws else 0
        #: every GPU pair has a PCIe P2P link in the topology (False: none has)
        self.p2p = p2p
        self.gpus: list[MockAMDGPU] = []
        for i, name in enumerate(names):
            part = PARTS[name]
            # What the topology reports, and the architecture record the mock GPU runs by (None
            # for a part no record describes: the driver refuses it before anything runs).
            version = gfx_target_version if gfx_target_version is not None else \
                part.properties["gfx_target_version"]
            gpu = MockAMDGPU(self, node_id=i + 1, gpu_id=0x1000 + 0x111 * (i + 1),
                             render_minor=128 + i, vram_B=vram_B, max_copy_B=max_copy_B,
                             gc_bases=part.ip[_GC][1], arch=find_arch(version), part=part,
                             gfx_target_version=version)
            self.gpus.append(gpu)
        self.proc = _Process()
        self.kfd_opens = 0
        self.leaked_at_close = 0
        self._handlers: dict[int, Callable[[Any], None]] = {
            int(kfd.AMDKFD_IOC_GET_VERSION): self._get_version,
            int(kfd.AMDKFD_IOC_ACQUIRE_VM): self._acquire_vm,
            int(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU): self._alloc,
            int(kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU): self._free,
            int(kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU): self._map,
            int(kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU): self._unmap,
            int(kfd.AMDKFD_IOC_CREATE_QUEUE): self._create_queue,
            int(kfd.AMDKFD_IOC_DESTROY_QUEUE): self._destroy_queue,
            int(kfd.AMDKFD_IOC_CREATE_EVENT): self._create_event,
            int(kfd.AMDKFD_IOC_DESTROY_EVENT): self._destroy_event,
            int(kfd.AMDKFD_IOC_SET_EVENT): self._set_event,
            int(kfd.AMDKFD_IOC_WAIT_EVENTS): self._wait_events,
            int(kfd.AMDKFD_IOC_ALLOC_QUEUE_GWS): self._alloc_queue_gws,
            int(kfd.AMDKFD_IOC_AVAILABLE_MEMORY): self._available_memory,
        }
        self._arg_types = {int(r): r.arg_type for r in (
            kfd.AMDKFD_IOC_GET_VERSION, kfd.AMDKFD_IOC_ACQUIRE_VM,
            kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
            kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU, kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU,
            kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, kfd.AMDKFD_IOC_CREATE_QUEUE,
            kfd.AMDKFD_IOC_DESTROY_QUEUE, kfd.AMDKFD_IOC_CREATE_EVENT,
            kfd.AMDKFD_IOC_DESTROY_EVENT, kfd.AMDKFD_IOC_SET_EVENT, kfd.AMDKFD_IOC_WAIT_EVENTS,
            kfd.AMDKFD_IOC_ALLOC_QUEUE_GWS, kfd.AMDKFD_IOC_AVAILABLE_MEMORY)}
        # dir(), not vars(): the generated module defines its names on first use
        os.name_requests({int(v): v.name for v in (getattr(kfd, k) for k in dir(kfd)
                                                    if k.startswith("AMDKFD_IOC_"))
                          if hasattr(v, "arg_type")})
        os.add_device("/dev/kfd", self._open_kfd)
        for gpu in self.gpus:
            os.add_device(f"/dev/dri/renderD{gpu.render_minor}", self._render_opener(gpu))
            os.set_executes_kernels(f"/dev/dri/renderD{gpu.render_minor}", gpu.executes_kernels)
        os.add_counter(self.live_objects)
        self._build_sysfs()

    # ------------------------------------------------------------------ sysfs
    def _build_sysfs(self) -> None:
        fs = self.os.sysfs
        fs[f"{TOPOLOGY}/0/gpu_id"] = "0\n"
        fs[f"{TOPOLOGY}/0/name"] = "\n"
        fs[f"{TOPOLOGY}/0/properties"] = "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\n"
        for gpu in self.gpus:
            v, part = gpu.gfx_target_version, gpu.part
            assert part is not None  # every GPU this driver made has one
            props = dict(part.properties, drm_render_minor=gpu.render_minor,
                         local_mem_size=gpu.vram_B, gfx_target_version=v,
                         num_gws=self.num_gws)
            node = f"{TOPOLOGY}/{gpu.node_id}"
            fs[f"{node}/gpu_id"] = f"{gpu.gpu_id}\n"
            fs[f"{node}/name"] = f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}\n"
            # One frame-buffer bank (kfd_topology.c's mem_banks/0: HSA_MEM_HEAP_TYPE_FB_PUBLIC).
            fs[f"{node}/mem_banks/0/properties"] = (
                f"heap_type 1\nsize_in_bytes {gpu.vram_B}\nflags 0\nwidth 384\n"
                "mem_clk_max 1250\n")
            links = sorted(self.p2p_links(gpu))
            props["p2p_links_count"] = len(links)
            fs[f"{node}/properties"] = "".join(f"{k} {v}\n" for k, v in props.items())
            for i, to in enumerate(links):  # kfd_topology.c: io_link properties, type PCIe
                link = {"type": 2, "version_major": 0, "version_minor": 0,
                        "node_from": gpu.node_id, "node_to": to, "weight": 40,
                        "min_latency": 0, "max_latency": 0, "min_bandwidth": 0,
                        "max_bandwidth": 0, "recommended_transfer_size": 0, "flags": 1}
                fs[f"{node}/p2p_links/{i}/properties"] = \
                    "".join(f"{k} {v}\n" for k, v in link.items())
            ip = f"/sys/class/drm/renderD{gpu.render_minor}/device/ip_discovery/die/0"
            for hw_id, (ver, bases) in part.ip.items():
                for name, v in zip(("major", "minor", "revision"), ver):
                    fs[f"{ip}/{hw_id}/0/{name}"] = f"{v}\n"
                fs[f"{ip}/{hw_id}/0/base_addr"] = "".join(f"0x{b:08X}\n" for b in bases)

    # ------------------------------------------------------------------ files
    def _render_opener(self, gpu: MockAMDGPU) -> Callable[[int], MockFile]:
        def open_render(flags: int) -> MockFile:
            return RenderFile(self, gpu)
        return open_render

    def _open_kfd(self, flags: int) -> MockFile:
        self.kfd_opens += 1
        return KfdFile(self)

    def kfd_closed(self) -> None:
        """Last close of /dev/kfd: like process exit, release whatever the process still holds."""
        self.kfd_opens -= 1
        if self.kfd_opens:
            return
        p = self.proc
        leaked = len(p.queues) + len(p.events) + len(p.bos)
        if leaked:
            self.leaked_at_close += leaked
            self.os.log_kernel(f"mock kfd: process released {len(p.queues)} queues, "
                               f"{len(p.events)} events, {len(p.bos)} buffers at close")
        for q in list(p.queues.values()):
            q.gpu.queues.pop(q.doorbell_off, None)
        for bo in p.bos.values():
            for gid in bo.mapped_on:
                self.gpu_by_id(gid).mem.unmap(bo.va)
        self.proc = _Process()
        for gpu in self.gpus:
            gpu.engine.retire()

    def live_objects(self) -> dict[str, int]:
        """Kernel objects of the process (for leak checks)."""
        p = self.proc
        return {"kfd_bos": len(p.bos), "kfd_bos_mapped": sum(b.mapped for b in p.bos.values()),
                "kfd_queues": len(p.queues), "kfd_events": len(p.events), "kfd_vms": len(p.vms),
                "kfd_leaked_at_close": self.leaked_at_close}

    def gpu_by_id(self, gpu_id: int) -> MockAMDGPU:
        for g in self.gpus:
            if g.gpu_id == gpu_id:
                return g
        raise OSError(E.EINVAL, f"no GPU with id {gpu_id:#x}")

    def ioctl(self, request: int, arg: Any) -> int:
        handler = self._handlers.get(request)
        if handler is None:
            raise OSError(E.ENOTTY, f"kfd: ioctl {request:#x} not supported by the mock")
        handler(self._arg_types[request].from_buffer(arg))
        return 0

    # ------------------------------------------------------------------ ioctls
    def _get_version(self, a: Any) -> None:
        a.major_version, a.minor_version = kfd.KFD_IOCTL_MAJOR_VERSION, kfd.KFD_IOCTL_MINOR_VERSION

    def _acquire_vm(self, a: Any) -> None:
        gpu = self.gpu_by_id(a.gpu_id)
        try:
            f: Any = self.os.file(a.drm_fd)
        except OSError:
            f = None
        if not isinstance(f, RenderFile) or f.gpu is not gpu:
            raise OSError(E.EINVAL, f"drm fd {a.drm_fd} is not the render node of GPU "
                                    f"{gpu.gpu_id:#x}")
        have = self.proc.vms.get(gpu.gpu_id)
        if have is not None and have != a.drm_fd:
            raise OSError(E.EBUSY, "VM already acquired through another render node file")
        self.proc.vms[gpu.gpu_id] = a.drm_fd

    def _vm_gpu(self, gpu_id: int) -> MockAMDGPU:
        gpu = self.gpu_by_id(gpu_id)
        if gpu.gpu_id not in self.proc.vms:
            raise OSError(E.EINVAL, f"GPU {gpu_id:#x}: ACQUIRE_VM first")
        return gpu

    def _available_memory(self, a: Any) -> None:
        # kfd_chardev.c: the process's device data must exist (ACQUIRE_VM made it); what is left
        # of VRAM after every allocation.
        gpu = self._vm_gpu(a.gpu_id)
        a.available = gpu.vram_B - gpu.vram_used

    def _alloc(self, a: Any) -> None:
        gpu = self._vm_gpu(a.gpu_id)
        p = self.proc
        flags, size, va = a.flags, a.size, a.va_addr
        kinds = flags & (kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT
                         | kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR
                         | kfd.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL
                         | kfd.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)
        if size == 0 or size % _PAGE or va % _PAGE or kinds & (kinds - 1) or not kinds:
            raise OSError(E.EINVAL, "size and VA must be page multiples and exactly one memory "
                                    "domain flag set")
        for bo in p.bos.values():
            if bo.gpu is gpu and bo.va < va + size and va < bo.va + bo.size:
                raise OSError(E.EINVAL, f"VA [{va:#x}, +{size:#x}) overlaps buffer at {bo.va:#x}")
        if kinds == kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM:
            if gpu.vram_used + size > gpu.vram_B:
                raise OSError(E.ENOMEM, f"VRAM exhausted ({gpu.vram_used:#x} of "
                                        f"{gpu.vram_B:#x} used)")
            gpu.vram_used += size
            backing = np.zeros(size, np.uint8)
        elif kinds == kfd.KFD_IOC_ALLOC_MEM_FLAGS_GTT:
            backing = np.zeros(size, np.uint8)
        elif kinds == kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
            backing = self.os.host_region(a.mmap_offset, size)
        elif kinds == kfd.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL:
            if size != DOORBELL_SLICE_B:
                raise OSError(E.EINVAL, f"doorbell BO must be the {DOORBELL_SLICE_B:#x}-B slice")
            backing = gpu.doorbells
        else:
            raise OSError(E.EINVAL, "MMIO_REMAP is not modelled by the mock")
        handle = gpu.gpu_id << 32 | p.next_handle
        p.next_handle += 1
        mmap_offset = p.next_mmap
        p.next_mmap += size
        p.bos[handle] = MockBO(handle, gpu, va, size, flags, backing, mmap_offset)
        a.handle = handle
        if kinds != kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
            a.mmap_offset = mmap_offset

    def _bo(self, handle: int) -> MockBO:
        bo = self.proc.bos.get(handle)
        if bo is None:
            raise OSError(E.EINVAL, f"unknown buffer handle {handle:#x}")
        return bo

    def _free(self, a: Any) -> None:
        bo = self._bo(a.handle)
        if bo.mapped:
            raise OSError(E.EBUSY, f"buffer {bo.va:#x} is still mapped to the GPU")
        if bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM:
            bo.gpu.vram_used -= bo.size
        if self.proc.event_page is not None and bo.backing is self.proc.event_page:
            self.proc.event_page = None
        del self.proc.bos[a.handle]

    def _device_ids(self, a: Any) -> list[int]:
        if a.n_devices == 0 or a.n_devices > len(self.gpus):
            raise OSError(E.EINVAL, f"n_devices {a.n_devices}")
        return list((ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr))

    def _map(self, a: Any) -> None:
        """MAP_MEMORY_TO_GPU on each listed GPU, from n_success on (kfd_chardev.c: a GPU the
        process has no VM on is EINVAL). The buffer gets the same address in every GPU's VM. A
        peer GPU maps another GPU's VRAM only over a P2P link of the topology: without one, real
        amdgpu would migrate the buffer to system memory behind the process's back, which the
        mock refuses instead (EINVAL, logged) so that a runtime relying on it is caught."""
        bo = self._bo(a.handle)
        ids = self._device_ids(a)
        for gid in ids[a.n_success:]:
            gpu = self._vm_gpu(gid)
            if gid != bo.gpu.gpu_id:
                if bo.flags & (kfd.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL
                               | kfd.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP):
                    raise OSError(E.EINVAL, "doorbell and MMIO buffers map only on their GPU")
                if bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_VRAM and \
                        gpu.node_id not in self.p2p_links(bo.gpu):
                    self.os.log_kernel(f"mock kfd: VRAM of GPU {bo.gpu.gpu_id:#x} mapped on GPU "
                                       f"{gid:#x} without a P2P link: refused")
                    raise OSError(E.EINVAL, f"no P2P link from GPU {bo.gpu.gpu_id:#x} to {gid:#x}")
            if gid not in bo.mapped_on:
                gpu.mem.map(bo.va, bo.size, bo.backing)
                bo.mapped_on.add(gid)
            a.n_success += 1

    def _unmap(self, a: Any) -> None:
        bo = self._bo(a.handle)
        ids = self._device_ids(a)
        for gid in ids[a.n_success:]:
            if gid not in bo.mapped_on:
                raise OSError(E.EINVAL, f"buffer {bo.va:#x} is not mapped on GPU {gid:#x}")
            self.gpu_by_id(gid).mem.unmap(bo.va)
            bo.mapped_on.discard(gid)
            a.n_success += 1

    def p2p_links(self, gpu: MockAMDGPU) -> set[int]:
        """Nodes `gpu` reaches over P2P (all other GPUs of the machine, unless p2p=False)."""
        if not self.p2p:
            return set()
        return {g.node_id for g in self.gpus if g is not gpu}

    def _create_queue(self, a: Any) -> None:
        gpu = self._vm_gpu(a.gpu_id)
        ring_B = max(a.ring_size, MIN_RING_B)
        if ring_B & (ring_B - 1):
            raise OSError(E.EINVAL, f"ring size {a.ring_size} is not a power of two")
        if a.queue_percentage > kfd.KFD_MAX_QUEUE_PERCENTAGE or \
                a.queue_priority > kfd.KFD_MAX_QUEUE_PRIORITY:
            raise OSError(E.EINVAL, "queue percentage or priority out of range")
        if a.ring_base_address % 256:
            self.os.log_kernel(f"mock kfd: ring base {a.ring_base_address:#x} is not 256-B aligned")
            raise OSError(E.EINVAL, "ring base must be 256-byte aligned (CP_HQD_PQ_BASE is "
                                    "addr>>8)")
        try:
            gpu.mem.find(a.ring_base_address, ring_B, "ring")
            gpu.mem.find(a.read_pointer_address, 8, "rptr")
            gpu.mem.find(a.write_pointer_address, 8, "wptr")
            if a.queue_type == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE:
                if a.eop_buffer_address:
                    gpu.mem.find(a.eop_buffer_address, max(a.eop_buffer_size, 1), "eop")
                if a.ctx_save_restore_address:
                    gpu.mem.find(a.ctx_save_restore_address, max(a.ctx_save_restore_size, 1),
                                 "cwsr")
                    if gpu.part is not None and gpu.part.checks_cwsr:
                        self._check_cwsr(gpu, a)
        except PageFault as e:
            self.os.log_kernel(f"mock kfd: CREATE_QUEUE: {e}")
            raise OSError(E.EFAULT, str(e)) from None
        p = self.proc
        used = {q.doorbell_off for q in p.queues.values() if q.gpu is gpu}
        slot = next(i for i in range(DOORBELL_SLICE_B // 8) if i * 8 not in used)
        qid = p.next_queue
        args = (gpu, qid, a.ring_base_address, ring_B, a.read_pointer_address,
                a.write_pointer_address)
        if a.queue_type == kfd.KFD_IOC_QUEUE_TYPE_COMPUTE:
            proc: Any = PM4Processor(*args)
        elif a.queue_type in (kfd.KFD_IOC_QUEUE_TYPE_SDMA, kfd.KFD_IOC_QUEUE_TYPE_SDMA_XGMI):
            proc = SDMAProcessor(*args)
        else:
            raise OSError(E.EINVAL, f"queue type {a.queue_type} (AQL) is not modelled by the mock")
        p.next_queue += 1
        gpu.mem.write_u64(a.read_pointer_address, 0)
        p.queues[qid] = MockQueue(qid, gpu, slot * 8, proc)
        gpu.queues[slot * 8] = proc
        a.queue_id = qid
        a.doorbell_offset = (KFD_MMAP_TYPE_DOORBELL << KFD_MMAP_TYPE_SHIFT) \
            | (gpu.gpu_id << KFD_MMAP_GPU_ID_SHIFT) | slot * 8

    def _check_cwsr(self, gpu: MockAMDGPU, a: Any) -> None:
        """kfd_queue_acquire_buffers: the save area's sizes are the node's, and its buffer holds
        one save area and debug area per XCC."""
        props = dict(gpu.part.properties) if gpu.part is not None else {}
        props["gfx_target_version"] = gpu.gfx_target_version
        cwsr, ctl, debug, xccs = cwsr_sizes(props)
        if (a.ctx_save_restore_size, a.ctl_stack_size) != (cwsr, ctl):
            self.os.log_kernel(f"mock kfd: CREATE_QUEUE: ctx_save_restore_size "
                               f"{a.ctx_save_restore_size:#x} / ctl_stack_size "
                               f"{a.ctl_stack_size:#x}, the node's are {cwsr:#x} / {ctl:#x}")
            raise OSError(E.EINVAL, f"CWSR sizes {a.ctx_save_restore_size:#x}/"
                                    f"{a.ctl_stack_size:#x} are not the node's {cwsr:#x}/{ctl:#x}")
        gpu.mem.find(a.ctx_save_restore_address, (cwsr + debug) * xccs, "cwsr (every XCC)")

    def _destroy_queue(self, a: Any) -> None:
        q = self.proc.queues.pop(a.queue_id, None)
        if q is None:
            raise OSError(E.EINVAL, f"unknown queue {a.queue_id}")
        q.gpu.queues.pop(q.doorbell_off, None)
        if q.gws:   # pqm_destroy_queue: the process's GWS goes with the queue
            self.proc.gws.discard(q.gpu.gpu_id)

    def _alloc_queue_gws(self, a: Any) -> None:
        """kfd_ioctl_alloc_queue_gws + pqm_set_gws: one queue per process and GPU may hold the
        GPU's GWS (all of it, num_gws of the topology); num_gws 0 takes it from the process
        through any of its queues on that GPU. first_gws is always 0. With MES the GWS only makes
        the queue exclusively scheduled (MockQueue.gws); it gets no GWS range."""
        q = self.proc.queues.get(a.queue_id)
        if q is None:
            raise OSError(E.EINVAL, f"unknown queue {a.queue_id}")
        if not self.num_gws:
            raise OSError(E.ENODEV, f"GPU {q.gpu.gpu_id:#x} has no GWS (topology num_gws 0)")
        a.first_gws = 0
        held = q.gpu.gpu_id in self.proc.gws
        if a.num_gws and held:
            raise OSError(E.EBUSY, "another queue of this process holds the GPU's GWS")
        if not a.num_gws and not held:
            raise OSError(E.EINVAL, "the process holds no GWS on this GPU")
        q.gws = bool(a.num_gws)
        (self.proc.gws.add if a.num_gws else self.proc.gws.discard)(q.gpu.gpu_id)

    def _create_event(self, a: Any) -> None:
        p = self.proc
        if a.event_type == kfd.KFD_IOC_EVENT_SIGNAL:
            if a.event_page_offset and p.event_page is not None:
                # kfd_ioctl_create_event: "Event page is already set"
                raise OSError(E.EINVAL, "the process's event page is already set")
            if a.event_page_offset:
                bo = self._bo(a.event_page_offset)
                p.event_page = bo.backing
                p.event_page.view(np.uint64)[:] = UNSIGNALED_EVENT_SLOT
            if p.event_page is None:
                p.event_page = np.full(kfd.KFD_SIGNAL_EVENT_LIMIT * 8, 0xFF, np.uint8)
            used = {e.event_id for e in p.events.values()}
            limit = min(kfd.KFD_SIGNAL_EVENT_LIMIT, len(p.event_page) // 8)
            eid = next((i for i in range(1, limit) if i not in used), None)
            if eid is None:
                raise OSError(E.ENOMEM, "event page full")
            p.event_page.view(np.uint64)[eid] = UNSIGNALED_EVENT_SLOT
            a.event_slot_index = eid
            a.event_trigger_data = eid
        elif a.event_type in (kfd.KFD_IOC_EVENT_MEMORY, kfd.KFD_IOC_EVENT_HW_EXCEPTION,
                              kfd.KFD_IOC_EVENT_NODECHANGE, kfd.KFD_IOC_EVENT_DEVICESTATECHANGE):
            eid = p.next_nonsignal
            p.next_nonsignal += 1
        else:
            raise OSError(E.EINVAL, f"event type {a.event_type} not modelled")
        p.events[eid] = MockEvent(eid, a.event_type, bool(a.auto_reset))
        a.event_id = eid

    def _destroy_event(self, a: Any) -> None:
        if self.proc.events.pop(a.event_id, None) is None:
            raise OSError(E.EINVAL, f"unknown event {a.event_id}")

    def _set_event(self, a: Any) -> None:
        ev = self.proc.events.get(a.event_id)
        if ev is None or ev.event_type != kfd.KFD_IOC_EVENT_SIGNAL:
            raise OSError(E.EINVAL, f"no signal event {a.event_id}")
        ev.signaled = True

    def _wait_events(self, a: Any) -> None:
        n = a.num_events
        if n == 0 or n > kfd.KFD_SIGNAL_EVENT_LIMIT:
            raise OSError(E.EINVAL, f"num_events {n}")
        data = (kfd.kfd_event_data * n).from_address(a.events_ptr)
        evs = []
        for d in data:
            ev = self.proc.events.get(d.event_id)
            if ev is None:
                raise OSError(E.EINVAL, f"unknown event {d.event_id}")
            evs.append(ev)
        deadline = time.perf_counter() + a.timeout / 1000.0
        while True:
            for gpu in self.gpus:  # deterministic mode: blocked queues re-poll their waits here
                if gpu.sync:
                    gpu.run()
            fired = [ev.signaled for ev in evs]
            if (all(fired) if a.wait_for_all else any(fired)):
                for d, ev in zip(data, evs):
                    if ev.signaled:
                        self._fill_event_data(d, ev)
                        if ev.auto_reset:
                            ev.signaled = False
                a.wait_result = kfd.KFD_IOC_WAIT_RESULT_COMPLETE
                return
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                a.wait_result = kfd.KFD_IOC_WAIT_RESULT_TIMEOUT
                return
            if interrupt_pending():
                # A Ctrl-C came: the wait ends early (EINTR), and is raised as the call returns.
                a.wait_result = kfd.KFD_IOC_WAIT_RESULT_TIMEOUT
                return
            # Nothing this thread can do advances the GPU; the GPUs' threads (or, in the
            # deterministic mode, another CPU thread) might. A GPU's thread wakes this one after
            # each pass that changed something; the slice bounds how late an event set by
            # another host thread, or a Ctrl-C, is seen.
            def ready(evs: list[MockEvent] = evs, every: bool = bool(a.wait_for_all)) -> bool:
                return all(ev.signaled for ev in evs) if every else \
                    any(ev.signaled for ev in evs)
            self.os.sleep_inside_call(min(remaining, _WAIT_SLICE_S), ready)

    @staticmethod
    def _fill_event_data(d: Any, ev: MockEvent) -> None:
        x = ev.exception
        if x is None:
            return
        if ev.event_type == kfd.KFD_IOC_EVENT_MEMORY:
            m = d.memory_exception_data
            m.gpu_id, m.va = x["gpu_id"], x["va"]
            m.failure.NotPresent, m.ErrorType = 1, kfd.KFD_MEM_ERR_NO_RAS
        elif ev.event_type == kfd.KFD_IOC_EVENT_HW_EXCEPTION:
            h = d.hw_exception_data
            h.gpu_id, h.reset_type = x["gpu_id"], kfd.KFD_HW_EXCEPTION_PER_ENGINE_RESET
            h.reset_cause, h.memory_lost = kfd.KFD_HW_EXCEPTION_GPU_HANG, 0

    # ------------------------------------------------------------------ from the GPU
    def signal_event_interrupt(self, ctxid: int) -> None:
        """kfd_signal_event_interrupt: the partial id names the event if its slot was written."""
        p = self.proc
        ev = p.events.get(ctxid)
        if ev is None or ev.event_type != kfd.KFD_IOC_EVENT_SIGNAL or p.event_page is None:
            return
        # (struct on the page's bytes: a numpy view and scalar per interrupt cost more)
        page, at = p.event_page, 8 * ctxid
        if _SLOT.unpack_from(page, at)[0] != UNSIGNALED_EVENT_SLOT:  # type: ignore[arg-type]
            _SLOT.pack_into(page, at, UNSIGNALED_EVENT_SLOT)  # type: ignore[arg-type]  # ack
            ev.signaled = True

    def raise_exception(self, gpu: MockAMDGPU, va: int | None) -> None:
        """A GPU fault: memory events get the faulting VA, hardware-exception events the hang."""
        for ev in self.proc.events.values():
            if va is not None and ev.event_type == kfd.KFD_IOC_EVENT_MEMORY:
                ev.exception = {"gpu_id": gpu.gpu_id, "va": va}
                ev.signaled = True
            elif va is None and ev.event_type == kfd.KFD_IOC_EVENT_HW_EXCEPTION:
                ev.exception = {"gpu_id": gpu.gpu_id}
                ev.signaled = True


class KfdFile(MockFile):
    """An open /dev/kfd."""

    path = "/dev/kfd"

    def __init__(self, driver: MockKfdDriver) -> None:
        self.driver = driver

    def ioctl(self, request: int, arg: Any) -> int:
        return self.driver.ioctl(request, arg)

    def mmap(self, offset: int, size: int, prot: int) -> tuple[np.ndarray, Any]:
        if offset >> KFD_MMAP_TYPE_SHIFT != KFD_MMAP_TYPE_DOORBELL:
            raise OSError(E.EINVAL, f"kfd mmap offset {offset:#x}: only doorbells are modelled")
        gpu = self.driver.gpu_by_id((offset >> KFD_MMAP_GPU_ID_SHIFT) & 0xFFFF)
        if offset % DOORBELL_SLICE_B or size > DOORBELL_SLICE_B:
            raise OSError(E.EINVAL, f"doorbell mapping must be the {DOORBELL_SLICE_B:#x}-B slice")
        return gpu.doorbells, gpu

    def close(self) -> None:
        self.driver.kfd_closed()


class RenderFile(MockFile):
    """An open /dev/dri/renderD<N>: maps KFD buffers by their mmap offset."""

    def __init__(self, driver: MockKfdDriver, gpu: MockAMDGPU) -> None:
        self.driver, self.gpu = driver, gpu
        self.path = f"/dev/dri/renderD{gpu.render_minor}"

    def mmap(self, offset: int, size: int, prot: int) -> tuple[np.ndarray, Any]:
        for bo in self.driver.proc.bos.values():
            if bo.gpu is self.gpu and bo.mmap_offset == offset and not \
                    bo.flags & kfd.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR:
                if size > bo.size:
                    raise OSError(E.EINVAL, f"mapping {size:#x} B of a {bo.size:#x}-B buffer")
                return bo.backing, None
        raise OSError(E.EINVAL, f"{self.path}: no buffer at mmap offset {offset:#x}")

    def close(self) -> None:
        vms = self.driver.proc.vms
        for gid, fd in list(vms.items()):
            if gid == self.gpu.gpu_id:
                del vms[gid]
