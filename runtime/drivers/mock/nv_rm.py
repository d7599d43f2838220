"""The mock NVIDIA kernel driver: /dev/nvidiactl, /dev/nvidiaN and /dev/nvidia-uvm over `MockOS`.

It answers the escapes and UVM requests the NVIDIA driver makes, with the checks RM and UVM make
(open-gpu-kernel-modules 580: resserv's parent/child rules, nv-ioctl argument sizes, RM memory and
channel parameters, UVM range bookkeeping) and the ones a driver discipline test needs: an object
freed while it still has children, memory freed while UVM still maps it, or a channel freed while
UVM still has it registered are counted as violations (`live_objects()["nv_violations"]`), and
whatever is left when nvidiactl closes is released as process exit would, and counted as leaked.

Structures and numbers come from `hcq_bindings.nv.rm_580`; the GPUs are `runtime.drivers.mock.nv_gpu`.
`NvMockOS.with_nv_gpus(n)` builds a mock machine; `NVDevice("mock-nv:0")` makes its own.
"""
from __future__ import annotations

import ctypes
import errno as E
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.mock.nv_gpu import MockChannel, MockNVGPU
from runtime.drivers.nv.generation import GENERATIONS, NVGeneration, generation_named
from runtime.drivers.mock.os import MockFile, MockOS, _ioc_size, host_entry
from runtime.drivers.nv.rm import ESCAPE_NAMES, class_name, control_name, escape_request
from runtime.drivers.nv.uvm import UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC, uvm_name

_PAGE = 4096
NV_OK = rm.NV_OK
USERD_B = 0x200
NOTIFIER_MIN_B = 3 * 16   # NV_CHANNELGPFIFO_NOTIFICATION_TYPE__SIZE_1 NvNotifications
DRIVER_VERSION = b"580.159.04"

# Escape -> parameter struct (the size the ioctl must encode).
_ESCAPE_STRUCT = {
    rm.NV_ESC_RM_ALLOC: rm.NVOS21_PARAMETERS, rm.NV_ESC_RM_CONTROL: rm.NVOS54_PARAMETERS,
    rm.NV_ESC_RM_FREE: rm.NVOS00_PARAMETERS,
    rm.NV_ESC_RM_MAP_MEMORY: rm.nv_ioctl_nvos33_parameters_with_fd,
    rm.NV_ESC_RM_MAP_MEMORY_DMA: rm.NVOS46_PARAMETERS,
    rm.NV_ESC_RM_ALLOC_MEMORY: rm.nv_ioctl_nvos02_parameters_with_fd,
    rm.NV_ESC_REGISTER_FD: rm.nv_ioctl_register_fd_t,
    rm.NV_ESC_RM_DUP_OBJECT: rm.NVOS55_PARAMETERS,
}
_UVM_STRUCT = {
    rm.UVM_INITIALIZE: rm.UVM_INITIALIZE_PARAMS, rm.UVM_MM_INITIALIZE: rm.UVM_MM_INITIALIZE_PARAMS,
    rm.UVM_REGISTER_GPU: rm.UVM_REGISTER_GPU_PARAMS,
    rm.UVM_UNREGISTER_GPU: rm.UVM_UNREGISTER_GPU_PARAMS,
    rm.UVM_REGISTER_GPU_VASPACE: rm.UVM_REGISTER_GPU_VASPACE_PARAMS,
    rm.UVM_UNREGISTER_GPU_VASPACE: rm.UVM_UNREGISTER_GPU_VASPACE_PARAMS,
    rm.UVM_REGISTER_CHANNEL: rm.UVM_REGISTER_CHANNEL_PARAMS,
    rm.UVM_UNREGISTER_CHANNEL: rm.UVM_UNREGISTER_CHANNEL_PARAMS,
    rm.UVM_CREATE_EXTERNAL_RANGE: rm.UVM_CREATE_EXTERNAL_RANGE_PARAMS,
    rm.UVM_MAP_EXTERNAL_ALLOCATION: rm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS,
    rm.UVM_FREE: rm.UVM_FREE_PARAMS,
    rm.UVM_ENABLE_PEER_ACCESS: rm.UVM_ENABLE_PEER_ACCESS_PARAMS,
    rm.UVM_DISABLE_PEER_ACCESS: rm.UVM_DISABLE_PEER_ACCESS_PARAMS,
}
_MEMORY_CLASSES = (rm.NV1_MEMORY_USER, rm.NV1_MEMORY_SYSTEM, rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
# The classes of every described generation (which of them a GPU offers is its record's).
_USERMODE_CLASSES = tuple(sorted({g.usermode_class for g in GENERATIONS}))
_GPFIFO_CLASSES = tuple(sorted({g.gpfifo_class for g in GENERATIONS}))
_COMPUTE_CLASSES = tuple(sorted({g.compute_class for g in GENERATIONS}))
_COPY_CLASSES = tuple(sorted({g.copy_class for g in GENERATIONS}))


class RmFail(Exception):
    """An RM call refused with an NV status."""

    def __init__(self, status: int, msg: str) -> None:
        super().__init__(msg)
        self.status = status


@dataclass
class MObj:
    """An RM object: handle, parent, class, owning GPU, and class-specific state."""

    handle: int
    parent: int
    hclass: int
    gpu: MockNVGPU | None = None
    backing: np.ndarray | None = None      # memory objects, usermode
    size: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    children: list[int] = field(default_factory=list)


@dataclass
class _Range:
    base: int
    length: int
    # (va, length, memory handle, GPU whose page tables map it)
    mapped: list[tuple[int, int, int, MockNVGPU]] = field(default_factory=list)
    kind: str = "external"


@dataclass
class UvmVaSpace:
    """One UVM VA space: what an open of /dev/nvidia-uvm holds after UVM_INITIALIZE (uvm_va_space.c;
    every descriptor is its own VA space). The mock keeps one GPU VA space per GPU machine-wide:
    each mock GPU has one page table (`MockNVGPU.mem`)."""

    initialized: bool = False
    gpus: set[bytes] = field(default_factory=set)             # registered GPU UUIDs
    vaspaces: dict[bytes, int] = field(default_factory=dict)  # GPU UUID -> RM VA space handle
    channels: dict[int, _Range] = field(default_factory=dict)
    ranges: dict[int, _Range] = field(default_factory=dict)
    peers: set[frozenset[bytes]] = field(default_factory=set)  # UVM_ENABLE_PEER_ACCESS pairs


class NvMockOS(MockOS):
    """MockOS plus what NVIDIA's device nodes need: UVM requests carry no size in their number."""

    # The mock NVIDIA GPU executes PTX, not SASS: NVDevice's compiler emits PTX for it, and the
    # mock runs launches of PTX images through its interpreter (runtime.drivers.mock.ptx).
    executes_kernels = True
    nv_code_format = "ptx"

    @classmethod
    def with_nv_gpus(cls, count: int = 1, **gpu_kwargs: Any) -> "NvMockOS":
        """A mock machine with `count` NVIDIA GPUs (Hopper unless `gpu_kwargs` say otherwise)."""
        mos = cls()
        mos.drivers.append(MockNVDriver(mos, count, **gpu_kwargs))
        return mos

    @property
    def nv(self) -> "MockNVDriver":
        """The mock NVIDIA driver installed into this machine."""
        return next(d for d in self.drivers if isinstance(d, MockNVDriver))

    @host_entry
    def _ioctl(self, fd: int, request: int,
               arg: ctypes.Structure | ctypes.Array | int | None) -> int:
        req = int(request)
        with self.lock:
            if not isinstance(self._fds.get(fd), UvmFile):
                return super()._ioctl(fd, req, arg)
            # UVM: the request number is the command (its "size" bits mean nothing); the argument
            # size is the command's struct, which the UVM file checks.
            self.ioctl_count += 1
            f = self.file(fd)
            self._fail_if_injected(req)
            return f.ioctl(req, arg)

    def inject_status(self, request: str, status: int, count: int = 1) -> None:
        """Makes the next `count` RM/UVM calls named `request` (an escape, control, UVM request or
        class name) return NV status `status` instead of succeeding."""
        self.nv.status_injections.append([request, status, count])



class MockNVDriver:
    """nvidia.ko + nvidia-uvm.ko for `count` GPUs, installed into a `NvMockOS`."""

    def __init__(self, os: MockOS, count: int = 1, *, vram_B: int = 80 << 30,
                 generation: NVGeneration | str = "hopper", sm_version: int = 0,
                 classes: tuple[int, ...] | None = None, p2p: bool = True) -> None:
        self.os = os
        #: every GPU pair supports P2P reads and writes over PCIe (False: none does, as behind a
        #: PCIe switch or IOMMU that blocks it; GET_P2P_CAPS then says GPU_NOT_SUPPORTED)
        self.p2p = p2p
        gen = generation_named(generation) if isinstance(generation, str) else generation
        self.gpus = [MockNVGPU(self, i, vram_B, gen, sm_version) for i in range(count)]
        # What RM's class list for the chip names: the generation's own classes, the ones every
        # GPU has, and (`classes`) whatever a test wants offered instead.
        self.classes = classes or (
            *gen.classes, rm.KEPLER_CHANNEL_GROUP_A, rm.FERMI_CONTEXT_SHARE_A, rm.FERMI_VASPACE_A,
            rm.GT200_DEBUGGER, rm.NV01_MEMORY_VIRTUAL, rm.NV50_P2P)
        self.objects: dict[int, MObj] = {}   # every client's objects (handles are global here)
        self.clients: list[int] = []
        self._next = 0xCAF0_0001
        self.ctl_opens = 0
        self.violations: list[str] = []
        self.alloc_log: list[int] = []   # handles in creation order
        self.free_log: list[int] = []    # handles in the order the driver freed them
        self.leaked_at_close = 0
        self.status_injections: list[list[Any]] = []
        self.next_chid = 0x10
        # UVM: a VA space per open descriptor; GPU VA spaces registered machine-wide by GPU
        self.va_spaces: list[UvmVaSpace] = []
        self.gpu_vaspace_owner: dict[bytes, UvmVaSpace] = {}
        os.add_device("/dev/nvidiactl", self._open_ctl)
        os.add_device("/dev/nvidia-uvm", self._open_uvm)
        for g in self.gpus:
            os.add_device(f"/dev/nvidia{g.index}", self._gpu_opener(g))
        names: dict[int, str] = {}
        for nr, st in _ESCAPE_STRUCT.items():
            names[escape_request(nr, ctypes.sizeof(st))] = ESCAPE_NAMES[nr]
        names[escape_request(rm.NV_ESC_CARD_INFO, ctypes.sizeof(rm.nv_ioctl_card_info_t) * 64)] = \
            "NV_ESC_CARD_INFO"
        for req in _UVM_STRUCT:
            names[req] = uvm_name(req)
        os.name_requests(names)
        os.add_counter(self.live_objects)
        self._controls: dict[int, Callable[[MObj, Any], None]] = {
            rm.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: self._ctl_build_version,
            rm.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: self._ctl_id_info,
            rm.NV0080_CTRL_CMD_GPU_GET_CLASSLIST: self._ctl_classlist,
            rm.NV2080_CTRL_CMD_GPU_GET_GID_INFO: self._ctl_gid,
            rm.NV2080_CTRL_CMD_GR_GET_INFO: self._ctl_gr_info,
            rm.NV2080_CTRL_CMD_PERF_BOOST: lambda o, p: None,
            rm.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: self._ctl_token,
            rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: self._ctl_schedule,
            rm.NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES: lambda o, p: None,
            rm.NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS: self._ctl_p2p_caps,
            rm.NV2080_CTRL_CMD_FB_GET_INFO_V2: self._ctl_fb_info,
            rm.NV2080_CTRL_CMD_GPU_GET_NAME_STRING: self._ctl_name_string,
        }
        self._control_types = {
            rm.NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2:
                rm.NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS,
            rm.NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: rm.NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS,
            rm.NV0080_CTRL_CMD_GPU_GET_CLASSLIST: rm.NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS,
            rm.NV2080_CTRL_CMD_GPU_GET_GID_INFO: rm.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS,
            rm.NV2080_CTRL_CMD_GR_GET_INFO: rm.NV2080_CTRL_GR_GET_INFO_PARAMS,
            rm.NV2080_CTRL_CMD_PERF_BOOST: rm.NV2080_CTRL_PERF_BOOST_PARAMS,
            rm.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN:
                rm.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS,
            rm.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: rm.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS,
            rm.NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES:
                rm.NV83DE_CTRL_DEBUG_READ_ALL_SM_ERROR_STATES_PARAMS,
            rm.NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS: rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_PARAMS,
            rm.NV2080_CTRL_CMD_FB_GET_INFO_V2: rm.NV2080_CTRL_FB_GET_INFO_V2_PARAMS,
            rm.NV2080_CTRL_CMD_GPU_GET_NAME_STRING: rm.NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS,
        }

    # ------------------------------------------------------------------ device nodes
    def _open_ctl(self, flags: int) -> MockFile:
        return CtlFile(self)

    def _open_uvm(self, flags: int) -> MockFile:
        return UvmFile(self)

    def _gpu_opener(self, gpu: MockNVGPU) -> Callable[[int], MockFile]:
        return lambda flags: GpuFile(self, gpu)

    # ------------------------------------------------------------------ bookkeeping
    def live_objects(self) -> dict[str, int]:
        """Kernel objects the process holds (for leak checks)."""
        vs = self.va_spaces
        return {"nv_rm_objects": len(self.objects),
                "nv_uvm_ranges": sum(len(v.ranges) for v in vs),
                "nv_uvm_gpus": sum(len(v.gpus) for v in vs),
                "nv_uvm_vaspaces": sum(len(v.vaspaces) for v in vs),
                "nv_uvm_channels": sum(len(v.channels) for v in vs),
                "nv_uvm_peers": sum(len(v.peers) for v in vs),
                "nv_channels": sum(len(g.channels) for g in self.gpus),
                "nv_violations": len(self.violations), "nv_leaked_at_close": self.leaked_at_close}

    def _violation(self, msg: str) -> None:
        self.violations.append(msg)
        self.os.log_kernel(f"mock nvidia: driver discipline: {msg}")

    def _injected(self, name: str) -> int:
        for inj in self.status_injections:
            if inj[0] == name and inj[2] > 0:
                inj[2] -= 1
                return int(inj[1])
        return NV_OK

    def obj(self, handle: int, want: tuple[int, ...] | None = None, what: str = "object") -> MObj:
        o = self.objects.get(handle)
        if o is None:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_HANDLE, f"{what} {handle:#x} does not exist")
        if want is not None and o.hclass not in want:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_HANDLE, f"{what} {handle:#x} is class "
                         f"{o.hclass:#x}, expected one of {[hex(w) for w in want]}")
        return o

    def _new_handle(self) -> int:
        h = self._next
        self._next += 1
        return h

    def _add(self, o: MObj) -> None:
        if o.handle in self.objects:
            raise RmFail(rm.NV_ERR_INSERT_DUPLICATE_NAME, f"handle {o.handle:#x} is in use")
        self.objects[o.handle] = o
        self.alloc_log.append(o.handle)
        if o.parent in self.objects:
            self.objects[o.parent].children.append(o.handle)

    def _free_obj(self, handle: int, implicit: bool = False) -> None:
        o = self.objects[handle]
        for ch in list(o.children):
            if ch in self.objects:
                if not implicit:
                    self._violation(f"{o.hclass:#x} {handle:#x} freed while its child "
                                    f"{self.objects[ch].hclass:#x} {ch:#x} is alive")
                self._free_obj(ch, implicit)
        if o.hclass in _MEMORY_CLASSES and not implicit:
            for r in (r for v in self.va_spaces for r in v.ranges.values()):
                if any(m[2] == handle for m in r.mapped):
                    self._violation(f"memory {handle:#x} freed while UVM maps it at {r.base:#x}")
            if o.data.get("cpu_maps"):
                pass
        if o.hclass in _GPFIFO_CLASSES:
            for v in self.va_spaces:
                if handle in v.channels and not implicit:
                    self._violation(f"channel {handle:#x} freed while registered with UVM")
                v.channels.pop(handle, None)
            assert o.gpu is not None
            o.gpu.channels.pop(o.data["token"], None)
        if o.hclass == rm.NV1_MEMORY_USER and o.gpu is not None and "dup_of" not in o.data:
            o.gpu.vram_used -= o.size
        if o.parent in self.objects and handle in self.objects[o.parent].children:
            self.objects[o.parent].children.remove(handle)
        del self.objects[handle]
        if handle in self.clients:
            self.clients.remove(handle)

    def ctl_closed(self) -> None:
        """Last nvidiactl close: free every client (process exit), count what was left."""
        self.ctl_opens -= 1
        if self.ctl_opens:
            return
        left = len(self.objects)
        if left:
            self.leaked_at_close += left
            self.os.log_kernel(f"mock nvidia: process exit freed {left} RM objects")
        for c in list(self.clients):
            if c in self.objects:
                self._free_obj(c, implicit=True)
        self.objects.clear()
        for g in self.gpus:
            g.engine.retire()

    def uvm_closed(self, vas: UvmVaSpace) -> None:
        """Close of an initialized UVM descriptor: its VA space goes away with its ranges."""
        if vas.ranges or vas.gpus:
            self.leaked_at_close += len(vas.ranges) + len(vas.gpus)
        for r in list(vas.ranges.values()):
            self._unmap_range(r)
        for uuid, owner in list(self.gpu_vaspace_owner.items()):
            if owner is vas:
                del self.gpu_vaspace_owner[uuid]
        if vas in self.va_spaces:
            self.va_spaces.remove(vas)

    # ------------------------------------------------------------------ escapes
    def escape(self, file: "NvFile", request: int, arg: Any) -> int:
        nr = request & 0xFF
        st = _ESCAPE_STRUCT.get(nr)
        if nr == rm.NV_ESC_CARD_INFO:
            return self._card_info(arg)
        if st is None:
            raise OSError(E.EINVAL, f"nvidia: escape {nr:#x} is not modelled by the mock")
        if _ioc_size(request) != ctypes.sizeof(st):
            raise OSError(E.EINVAL, f"{ESCAPE_NAMES[nr]}: size {_ioc_size(request)} != "
                                    f"{ctypes.sizeof(st)}")
        p = st.from_buffer(arg)
        if nr == rm.NV_ESC_REGISTER_FD:
            if not isinstance(file, GpuFile):
                raise OSError(E.EINVAL, "NV_ESC_REGISTER_FD on nvidiactl")
            ctl = self.os.file(p.ctl_fd)
            if not isinstance(ctl, CtlFile):
                raise OSError(E.EINVAL, f"REGISTER_FD: fd {p.ctl_fd} is not nvidiactl")
            file.registered = True
            return 0
        if nr == rm.NV_ESC_RM_ALLOC_MEMORY:
            if not isinstance(file, GpuFile) or not file.registered:
                raise OSError(E.EINVAL, "NV_ESC_RM_ALLOC_MEMORY needs a registered /dev/nvidiaN")
            self._status(p.params, "NV_ESC_RM_ALLOC_MEMORY",
                         lambda: self._alloc_memory(file, p.params))
            return 0
        if not isinstance(file, CtlFile):
            raise OSError(E.EINVAL, f"{ESCAPE_NAMES[nr]} must be issued on nvidiactl")
        handler = {rm.NV_ESC_RM_ALLOC: self._alloc, rm.NV_ESC_RM_CONTROL: self._control,
                   rm.NV_ESC_RM_FREE: self._free, rm.NV_ESC_RM_MAP_MEMORY_DMA: self._map_dma,
                   rm.NV_ESC_RM_DUP_OBJECT: self._dup}
        if nr == rm.NV_ESC_RM_MAP_MEMORY:
            self._status(p.params, "NV_ESC_RM_MAP_MEMORY", lambda: self._map_memory(p))
        else:
            self._status(p, ESCAPE_NAMES[nr], lambda: handler[nr](p))
        return 0

    def _status(self, p: Any, name: str, fn: Callable[[], None]) -> None:
        st = self._injected(name)
        if st == NV_OK:
            try:
                fn()
            except RmFail as e:
                self.os.log_kernel(f"mock NVRM: {name}: {e}")
                st = e.status
        p.status = st

    def _card_info(self, arg: Any) -> int:
        cards = (rm.nv_ioctl_card_info_t * (ctypes.sizeof(arg) // ctypes.sizeof(
            rm.nv_ioctl_card_info_t))).from_buffer(arg)
        for i, g in enumerate(self.gpus[:len(cards)]):
            c = cards[i]
            c.valid, c.gpu_id, c.minor_number = 1, 0x100 * (g.index + 1), g.index
            c.pci_info.vendor_id, c.pci_info.device_id = 0x10DE, 0x2335
        return 0

    # ------------------------------------------------------------------ RM_ALLOC
    def _alloc(self, p: Any) -> None:
        st = self._injected(class_name(p.hClass))
        if st:
            raise RmFail(st, "injected")
        cls = p.hClass
        if cls == rm.NV01_ROOT_CLIENT:
            if p.hObjectParent:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "a client has no parent")
            h = p.hObjectNew or self._new_handle()
            self._add(MObj(h, 0, cls))
            self.clients.append(h)
            p.hObjectNew = h
            return
        if p.hRoot not in self.clients:
            raise RmFail(rm.NV_ERR_INVALID_CLIENT, f"client {p.hRoot:#x} does not exist")
        parent = self.obj(p.hObjectParent, what="parent")
        params = ctypes.cast(p.pAllocParms, ctypes.c_void_p).value

        def args(t: Any) -> Any:
            if not params or p.paramsSize != ctypes.sizeof(t):
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"class {cls:#x} takes {t.__name__} "
                             f"({ctypes.sizeof(t)} B), got {p.paramsSize} B")
            return t.from_address(params)

        o = MObj(p.hObjectNew or self._new_handle(), parent.handle, cls, parent.gpu)
        if cls == rm.NV01_DEVICE_0:
            a = args(rm.NV0080_ALLOC_PARAMETERS)
            if parent.hclass != rm.NV01_ROOT_CLIENT or a.deviceId >= len(self.gpus):
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT,
                             f"device {a.deviceId} under {parent.handle:#x}")
            o.gpu = self.gpus[a.deviceId]
        elif cls == rm.NV20_SUBDEVICE_0:
            args(rm.NV2080_ALLOC_PARAMETERS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
        elif cls == rm.NV01_MEMORY_VIRTUAL:
            args(rm.NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
        elif cls in _USERMODE_CLASSES:
            self._parent_is(parent, (rm.NV20_SUBDEVICE_0,), cls)
            self._class_ok(cls)
            assert o.gpu is not None
            o.backing, o.size = o.gpu.usermode, len(o.gpu.usermode)
        elif cls == rm.FERMI_VASPACE_A:
            a = args(rm.NV_VASPACE_ALLOCATION_PARAMETERS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
            o.data["flags"] = a.flags
        elif cls == rm.KEPLER_CHANNEL_GROUP_A:
            a = args(rm.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
            if a.engineType != rm.NV2080_ENGINE_TYPE_GRAPHICS:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"channel group engine {a.engineType}")
        elif cls == rm.FERMI_CONTEXT_SHARE_A:
            a = args(rm.NV_CTXSHARE_ALLOCATION_PARAMETERS)
            self._parent_is(parent, (rm.KEPLER_CHANNEL_GROUP_A,), cls)
            self.obj(a.hVASpace, (rm.FERMI_VASPACE_A,), "hVASpace")
        elif cls in (rm.NV1_MEMORY_USER, rm.NV1_MEMORY_SYSTEM):
            a = args(rm.NV_MEMORY_ALLOCATION_PARAMS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
            self._memory(o, a)
        elif cls in _GPFIFO_CLASSES:
            a = args(rm.NV_CHANNELGPFIFO_ALLOCATION_PARAMETERS)
            self._parent_is(parent, (rm.KEPLER_CHANNEL_GROUP_A,), cls)
            self._class_ok(cls)
            self._channel(o, a)
        elif cls in _COMPUTE_CLASSES or cls in _COPY_CLASSES:
            self._parent_is(parent, _GPFIFO_CLASSES, cls)
            self._class_ok(cls)
            ch: MockChannel = parent.data["channel"]
            if ch.engine_class:
                raise RmFail(rm.NV_ERR_INVALID_STATE, f"channel {parent.handle:#x} already has an "
                             f"engine object ({ch.engine_class:#x})")
            ch.engine_class = cls
        elif cls == rm.NV50_P2P:
            self._p2p_object(o, parent, args(rm.NV503B_ALLOC_PARAMETERS))
        elif cls == rm.GT200_DEBUGGER:
            a = args(rm.NV83DE_ALLOC_PARAMETERS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
            target = self.obj(a.hClass3dObject, what="hClass3dObject")
            if target.hclass not in _COMPUTE_CLASSES:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the debugger needs a compute object")
        else:
            raise RmFail(rm.NV_ERR_INVALID_CLASS, f"class {cls:#x} is not modelled")
        self._add(o)
        p.hObjectNew = o.handle

    def client_of(self, handle: int) -> int:
        """The client an object belongs to (the root of its parent chain)."""
        o = self.objects[handle]
        while o.parent:
            o = self.objects[o.parent]
        return o.handle

    def _p2p_object(self, o: MObj, parent: MObj, a: Any) -> None:
        """NV50_P2P (p2p_api.c, p2papiConstruct): a child of the client; both subdevices must be
        the client's own (else INVALID_ARGUMENT) and the pair must support P2P reads or writes
        (else NOT_SUPPORTED: "P2P is Disabled, cannot create mappings")."""
        if parent.hclass != rm.NV01_ROOT_CLIENT:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_PARENT, "NV50_P2P lives under the client")
        subs = []
        for h in (a.hSubDevice, a.hPeerSubDevice):
            sub = self.objects.get(h)
            if sub is None or sub.hclass != rm.NV20_SUBDEVICE_0 or \
                    self.client_of(h) != parent.handle:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"{h:#x} is not a subdevice of client "
                             f"{parent.handle:#x}")
            subs.append(sub)
        local, remote = subs[0].gpu, subs[1].gpu
        assert local is not None and remote is not None
        if local is not remote and not self.p2p:
            raise RmFail(rm.NV_ERR_NOT_SUPPORTED, f"P2P between GPUs {local.index} and "
                         f"{remote.index} is disabled")
        o.gpu = local
        o.data["peers"] = frozenset((local.index, remote.index))

    def _p2p_between(self, client: int, a: MockNVGPU, b: MockNVGPU) -> bool:
        pair = frozenset((a.index, b.index))
        return any(o.hclass == rm.NV50_P2P and o.parent == client and o.data["peers"] == pair
                   for o in self.objects.values())

    def _parent_is(self, parent: MObj, classes: tuple[int, ...], cls: int) -> None:
        if parent.hclass not in classes:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_PARENT, f"class {cls:#x} cannot live under class "
                         f"{parent.hclass:#x}")

    def _class_ok(self, cls: int) -> None:
        if cls not in self.classes:
            raise RmFail(rm.NV_ERR_INVALID_CLASS, f"class {cls:#x} is not offered by this GPU")

    def _memory(self, o: MObj, a: Any) -> None:
        size = a.size
        if size == 0 or a.limit != size - 1:
            raise RmFail(rm.NV_ERR_INVALID_LIMIT, f"size {size:#x} with limit {a.limit:#x}")
        if a.alignment & (a.alignment - 1) or size % max(a.alignment, _PAGE):
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"size {size:#x} / alignment {a.alignment:#x}")
        if not a.flags & rm.NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT,
                         "NVOS32_ALLOC_FLAGS_MEMORY_HANDLE_PROVIDED missing")
        gpu = o.gpu
        assert gpu is not None
        if o.hclass == rm.NV1_MEMORY_USER:
            if gpu.vram_used + size > gpu.vram_B:
                raise RmFail(rm.NV_ERR_NO_MEMORY, f"VRAM exhausted ({gpu.vram_used:#x} of "
                             f"{gpu.vram_B:#x} used)")
            gpu.vram_used += size
        o.backing, o.size = np.zeros(size, np.uint8), size

    def _channel(self, o: MObj, a: Any) -> None:
        gpu = o.gpu
        assert gpu is not None
        n = a.gpFifoEntries
        if n == 0 or n & (n - 1):
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"gpFifoEntries {n} is not a power of two")
        self.obj(a.hContextShare, (rm.FERMI_CONTEXT_SHARE_A,), "hContextShare")
        err = self.obj(a.hObjectError, _MEMORY_CLASSES, "hObjectError")
        if err.size < NOTIFIER_MIN_B:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "error notifier smaller than 3 notifications")
        userd = self.obj(a.hUserdMemory[0], _MEMORY_CLASSES, "hUserdMemory[0]")
        if a.userdOffset[0] % USERD_B or a.userdOffset[0] + USERD_B > userd.size:
            raise RmFail(rm.NV_ERR_INVALID_OFFSET, f"userdOffset {a.userdOffset[0]:#x}")
        try:
            ring_arr, ring_off = gpu.mem.find(a.gpFifoOffset, n * 8, "GPFIFO ring")
        except Exception:
            raise RmFail(rm.NV_ERR_INVALID_ADDRESS, f"GPFIFO ring at {a.gpFifoOffset:#x} is not "
                         "mapped in the GPU VA space") from None
        ring = ring_arr[ring_off:ring_off + n * 8]
        assert userd.backing is not None and err.backing is not None
        chid = self.next_chid
        self.next_chid += 1
        ch = MockChannel(gpu, chid, o.handle, ring, n,
                         userd.backing[a.userdOffset[0]:a.userdOffset[0] + USERD_B],
                         err.backing[:NOTIFIER_MIN_B])
        o.data.update(channel=ch, token=chid, group=o.parent)
        gpu.channels[chid] = ch

    # ------------------------------------------------------------------ other escapes
    def _free(self, p: Any) -> None:
        o = self.obj(p.hObjectOld)
        if o.hclass != rm.NV01_ROOT_CLIENT and p.hRoot not in self.clients:
            raise RmFail(rm.NV_ERR_INVALID_CLIENT, f"client {p.hRoot:#x}")
        self.free_log.append(o.handle)
        self._free_obj(o.handle)

    def _map_memory(self, p: Any) -> None:
        a = p.params
        mem = self.obj(a.hMemory, _MEMORY_CLASSES + _USERMODE_CLASSES, "hMemory")
        if mem.hclass == rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "OS descriptors are already CPU memory")
        if a.length == 0 or a.offset + a.length > mem.size:
            raise RmFail(rm.NV_ERR_INVALID_LIMIT, f"map [{a.offset:#x}, +{a.length:#x}) of "
                         f"{mem.size:#x} B")
        try:
            f = self.os.file(p.fd)
        except OSError:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"fd {p.fd} is not open") from None
        if isinstance(f, GpuFile):
            if not f.registered:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "map into an unregistered /dev/nvidiaN fd")
            if mem.hclass == rm.NV1_MEMORY_SYSTEM:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "system memory maps through nvidiactl")
        elif isinstance(f, CtlFile):
            if mem.hclass != rm.NV1_MEMORY_SYSTEM:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT,
                             "only system memory maps through nvidiactl")
        else:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"fd {p.fd} is not an NVIDIA device")
        if f.pending is not None:
            raise RmFail(rm.NV_ERR_STATE_IN_USE, "the fd already has a mapping prepared")
        f.pending = (mem, a.offset, a.length)

    def _map_dma(self, p: Any) -> None:
        dma = self.obj(p.hDma, (rm.NV01_MEMORY_VIRTUAL,), "hDma")
        mem = self.obj(p.hMemory, _MEMORY_CLASSES, "hMemory")
        if self.client_of(mem.handle) != p.hClient or self.client_of(dma.handle) != p.hClient:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_HANDLE, "hMemory and hDma must belong to hClient "
                         "(dup another client's memory with NV_ESC_RM_DUP_OBJECT first)")
        assert dma.gpu is not None and mem.gpu is not None
        if mem.hclass == rm.NV1_MEMORY_USER and mem.gpu is not dma.gpu:
            # Another GPU's video memory is a peer mapping (virt_mem_allocator_gm107.c): without
            # the P2P flag or without an NV50_P2P object there is no peer id to put in the PTEs.
            p2p = (p.flags >> rm.NVOS46_FLAGS_P2P_ENABLE[1]) & 3
            if p2p != rm.NVOS46_FLAGS_P2P_ENABLE_NOSLI or \
                    not self._p2p_between(p.hClient, dma.gpu, mem.gpu):
                raise RmFail(rm.NV_ERR_INVALID_STATE, f"GPU {mem.gpu.index}'s memory mapped for GPU "
                             f"{dma.gpu.index} needs NVOS46_FLAGS_P2P_ENABLE_NOSLI and an NV50_P2P "
                             "object between them")
        if not (p.flags >> rm.NVOS46_FLAGS_DMA_OFFSET_FIXED[1]) & 1:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the mock only models fixed-offset mappings")
        if p.dmaOffset % _PAGE or p.length == 0 or p.offset + p.length > mem.size:
            raise RmFail(rm.NV_ERR_INVALID_OFFSET, f"DMA map [{p.dmaOffset:#x}, +{p.length:#x}) of "
                         f"{mem.size:#x} B")
        mem.data.setdefault("dma", []).append((p.dmaOffset, p.length))

    def _dup(self, p: Any) -> None:
        """NV_ESC_RM_DUP_OBJECT of memory (mem.c, memCopyConstruct): the copy shares the source's
        pages and lives under a device of the destination client."""
        if p.hClient not in self.clients or p.hClientSrc not in self.clients:
            raise RmFail(rm.NV_ERR_INVALID_CLIENT, f"client {p.hClient:#x} or {p.hClientSrc:#x}")
        src = self.obj(p.hObjectSrc, _MEMORY_CLASSES, "hObjectSrc")
        if self.client_of(src.handle) != p.hClientSrc:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_HANDLE, f"{src.handle:#x} is not an object of "
                         f"client {p.hClientSrc:#x}")
        parent = self.obj(p.hParent, (rm.NV01_DEVICE_0,), "hParent")
        if self.client_of(parent.handle) != p.hClient:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT_PARENT, "hParent is not the client's device")
        o = MObj(p.hObject or self._new_handle(), parent.handle, src.hclass, src.gpu, src.backing,
                 src.size, {"dup_of": src.handle})
        self._add(o)
        p.hObject = o.handle

    def _ctl_p2p_caps(self, o: MObj, a: Any) -> None:
        """NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS (client_resource.c): the caps every pair of the
        listed GPUs shares; all PCIe reads, writes and atomics on this machine, or none."""
        if o.hclass != rm.NV01_ROOT_CLIENT:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT, "GET_P2P_CAPS is a client control")
        if a.gpuCount == 0 or a.gpuCount > 32:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"gpuCount {a.gpuCount}")
        for i in range(a.gpuCount):
            if not 0 <= a.gpuIds[i] // 0x100 - 1 < len(self.gpus) or a.gpuIds[i] % 0x100:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"gpuId {a.gpuIds[i]:#x}")
        ok = self.p2p or a.gpuCount == 1
        caps = 0
        if ok:
            for field_, value in ((rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_READS_SUPPORTED, 1),
                                  (rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_WRITES_SUPPORTED, 1),
                                  (rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_ATOMICS_SUPPORTED, 1),
                                  (rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_PCI_SUPPORTED, 1)):
                caps |= value << field_[1]
        a.p2pCaps = caps
        status = rm.NV0000_P2P_CAPS_STATUS_OK if ok else rm.NV0000_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED
        for i in range(rm.NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE):
            a.p2pCapsStatus[i] = status
        for i in (rm.NV0000_CTRL_P2P_CAPS_INDEX_NVLINK, rm.NV0000_CTRL_P2P_CAPS_INDEX_C2C,
                  rm.NV0000_CTRL_P2P_CAPS_INDEX_PCI_BAR1, rm.NV0000_CTRL_P2P_CAPS_INDEX_LOOPBACK,
                  rm.NV0000_CTRL_P2P_CAPS_INDEX_PROP):
            a.p2pCapsStatus[i] = rm.NV0000_P2P_CAPS_STATUS_NOT_SUPPORTED

    def _alloc_memory(self, file: "GpuFile", p: Any) -> None:
        if p.hClass != rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
            raise RmFail(rm.NV_ERR_INVALID_CLASS, f"ALLOC_MEMORY of class {p.hClass:#x}")
        parent = self.obj(p.hObjectParent, (rm.NV01_DEVICE_0,), "parent")
        size = p.limit + 1
        if p.pMemory % _PAGE or size % _PAGE:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"[{p.pMemory:#x}, +{size:#x}) is not page "
                         "aligned")
        if (p.flags >> rm.NVOS02_FLAGS_COHERENCY[1]) & 0xF != rm.NVOS02_FLAGS_COHERENCY_CACHED:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "OS descriptors of pageable memory are cached")
        try:
            backing = self.os.host_region(p.pMemory, size)
        except OSError as e:
            raise RmFail(rm.NV_ERR_INVALID_ADDRESS, str(e)) from None
        o = MObj(p.hObjectNew, parent.handle, p.hClass, parent.gpu, backing, size)
        self._add(o)

    # ------------------------------------------------------------------ controls
    def _control(self, p: Any) -> None:
        st = self._injected(control_name(p.cmd))
        if st:
            raise RmFail(st, "injected")
        o = self.obj(p.hObject)
        fn = self._controls.get(p.cmd)
        t = self._control_types.get(p.cmd)
        if fn is None or t is None:
            raise RmFail(rm.NV_ERR_NOT_SUPPORTED, f"control {p.cmd:#x} is not modelled")
        if p.paramsSize != ctypes.sizeof(t) or not p.params:
            raise RmFail(rm.NV_ERR_INVALID_PARAM_STRUCT, f"control {p.cmd:#x}: {p.paramsSize} B, "
                         f"expected {ctypes.sizeof(t)}")
        fn(o, t.from_address(p.params))

    def _ctl_build_version(self, o: MObj, a: Any) -> None:
        off = type(a).driverVersionBuffer.offset
        ctypes.memmove(ctypes.addressof(a) + off, DRIVER_VERSION, len(DRIVER_VERSION))

    def _ctl_id_info(self, o: MObj, a: Any) -> None:
        idx = a.gpuId // 0x100 - 1
        if not 0 <= idx < len(self.gpus):
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"gpuId {a.gpuId:#x}")
        a.deviceInstance = idx

    def _ctl_classlist(self, o: MObj, a: Any) -> None:
        if o.hclass != rm.NV01_DEVICE_0:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT, "GET_CLASSLIST is a device control")
        if a.numClasses == 0:
            a.numClasses = len(self.classes)
            return
        if a.numClasses < len(self.classes) or not a.classList:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "class list buffer too small")
        arr = (ctypes.c_uint32 * len(self.classes)).from_address(a.classList)
        arr[:] = list(self.classes)
        a.numClasses = len(self.classes)

    def _ctl_gid(self, o: MObj, a: Any) -> None:
        assert o.gpu is not None
        if a.flags != rm.NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "only the binary GID format is modelled")
        a.data[:16] = list(o.gpu.uuid)
        a.length = 16

    def _ctl_gr_info(self, o: MObj, a: Any) -> None:
        g = o.gpu
        assert g is not None
        values = {rm.NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: g.sm_version,
                  rm.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS: g.num_gpcs,
                  rm.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC: g.tpc_per_gpc,
                  rm.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC: g.sm_per_tpc,
                  rm.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: g.max_warps_per_sm,
                  rm.NV2080_CTRL_GR_INFO_INDEX_MAX_THREADS_PER_WARP: 32,
                  # RM 580 answers 0 here on an H200 (and the CUDA cores in all below)
                  rm.NV2080_CTRL_GR_INFO_INDEX_MAX_SP_PER_SM: 0,
                  rm.NV2080_CTRL_GR_INFO_INDEX_GPU_CORE_COUNT: g.sm_count * g.sp_per_sm}
        infos = (rm.NV2080_CTRL_GR_INFO * a.grInfoListSize).from_address(a.grInfoList)
        for info in infos:
            if info.index not in values:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"GR info index {info.index}")
            info.data = values[info.index]

    def _ctl_fb_info(self, o: MObj, a: Any) -> None:
        # ctrl2080fb.h: sizes in KiB; the heap is what allocations come from.
        g = o.gpu
        if g is None:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT, "FB_GET_INFO_V2 is a subdevice control")
        values = {rm.NV2080_CTRL_FB_INFO_INDEX_TOTAL_RAM_SIZE: g.vram_B >> 10,
                  rm.NV2080_CTRL_FB_INFO_INDEX_HEAP_SIZE: g.vram_B >> 10,
                  rm.NV2080_CTRL_FB_INFO_INDEX_HEAP_FREE: (g.vram_B - g.vram_used) >> 10}
        if not 0 < a.fbInfoListSize <= len(a.fbInfoList):
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"fbInfoListSize {a.fbInfoListSize}")
        for info in a.fbInfoList[:a.fbInfoListSize]:
            if info.index not in values:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"FB info index {info.index}")
            info.data = values[info.index]

    def _ctl_name_string(self, o: MObj, a: Any) -> None:
        g = o.gpu
        if g is None:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT, "GET_NAME_STRING is a subdevice control")
        if a.gpuNameStringFlags != rm.NV2080_CTRL_GPU_GET_NAME_STRING_FLAGS_TYPE_ASCII:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "only the ASCII name is modelled")
        name = f"Mock NVIDIA {g.generation.name} GPU".encode()
        ctypes.memmove(ctypes.addressof(a.gpuNameString), name + b"\0", len(name) + 1)

    def _ctl_token(self, o: MObj, a: Any) -> None:
        if o.hclass not in _GPFIFO_CLASSES:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT, "work-submit token of a non-channel")
        a.workSubmitToken = o.data["token"]

    def _ctl_schedule(self, o: MObj, a: Any) -> None:
        if o.hclass != rm.KEPLER_CHANNEL_GROUP_A:
            raise RmFail(rm.NV_ERR_INVALID_OBJECT, "GPFIFO_SCHEDULE is a channel-group control")
        for h in o.children:
            child = self.objects[h]
            if child.hclass in _GPFIFO_CLASSES:
                ch: MockChannel = child.data["channel"]
                if a.bEnable and not ch.engine_class:
                    raise RmFail(rm.NV_ERR_INVALID_STATE, f"channel {h:#x} has no engine object")
                ch.scheduled = bool(a.bEnable)
        assert o.gpu is not None
        o.gpu.run()

    # ------------------------------------------------------------------ UVM
    def uvm(self, file: "UvmFile", request: int, arg: Any) -> int:
        t = _UVM_STRUCT.get(request)
        if t is None:
            raise OSError(E.ENOTTY, f"nvidia-uvm: request {request:#x} is not modelled")
        if ctypes.sizeof(arg) != ctypes.sizeof(t):
            raise OSError(E.EINVAL, f"{uvm_name(request)}: {ctypes.sizeof(arg)} B, expected "
                                    f"{ctypes.sizeof(t)}")
        p = t.from_buffer(arg)
        st = self._injected(uvm_name(request))
        if st == NV_OK:
            try:
                self._uvm(file, request, p)
            except RmFail as e:
                self.os.log_kernel(f"mock nvidia-uvm: {uvm_name(request)}: {e}")
                st = e.status
        p.rmStatus = st
        return 0

    def _gpu_by_uuid(self, raw: Any) -> MockNVGPU:
        u = bytes(raw.uuid)
        for g in self.gpus:
            if g.uuid == u:
                return g
        raise RmFail(rm.NV_ERR_GPU_UUID_NOT_FOUND, f"GPU {u.hex()}")

    def _uvm(self, file: "UvmFile", req: int, p: Any) -> None:
        vas = file.vas
        if req == rm.UVM_INITIALIZE:
            if vas.initialized:
                raise RmFail(rm.NV_ERR_INVALID_STATE, "the VA space is already initialized")
            vas.initialized = True
            self.va_spaces.append(vas)
            return
        if req == rm.UVM_MM_INITIALIZE:
            other = self.os.file(p.uvmFd)
            if not isinstance(other, UvmFile) or not other.vas.initialized:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "uvmFd is not an initialized UVM file")
            return
        if not vas.initialized:
            raise RmFail(rm.NV_ERR_ILLEGAL_ACTION, f"{uvm_name(req)} before UVM_INITIALIZE")
        if req == rm.UVM_REGISTER_GPU:
            g = self._gpu_by_uuid(p.gpu_uuid)
            if g.uuid in vas.gpus:
                raise RmFail(rm.NV_ERR_IN_USE, "GPU already registered")
            vas.gpus.add(g.uuid)
        elif req == rm.UVM_UNREGISTER_GPU:
            g = self._gpu_by_uuid(p.gpu_uuid)
            if g.uuid in vas.vaspaces:
                self._violation("UVM_UNREGISTER_GPU with its VA space still registered")
            if g.uuid not in vas.gpus:
                raise RmFail(rm.NV_ERR_INVALID_DEVICE, "GPU not registered")
            vas.gpus.discard(g.uuid)
            # uvm_va_space_unregister_gpu disables the GPU's peers in this VA space
            vas.peers = {pr for pr in vas.peers if g.uuid not in pr}
        elif req in (rm.UVM_ENABLE_PEER_ACCESS, rm.UVM_DISABLE_PEER_ACCESS):
            self._peer_access(vas, req, p)
        elif req == rm.UVM_REGISTER_GPU_VASPACE:
            g = self._gpu_by_uuid(p.gpuUuid)
            if g.uuid not in vas.gpus:
                raise RmFail(rm.NV_ERR_INVALID_DEVICE, "GPU not registered")
            owner = self.gpu_vaspace_owner.get(g.uuid)
            if owner is not None and owner is not vas:
                # a limit of the mock, not of RM: one page table per mock GPU
                raise RmFail(rm.NV_ERR_NOT_SUPPORTED, f"GPU {g.index} already has a GPU VA space in "
                             "another UVM VA space (the mock models one per GPU: open each mock "
                             "GPU once per process)")
            vas_obj = self.obj(p.hVaSpace, (rm.FERMI_VASPACE_A,), "hVaSpace")
            if not vas_obj.data.get("flags", 0) & \
                    rm.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the VA space is not externally owned")
            if not isinstance(self.os.file(p.rmCtrlFd), CtlFile):
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "rmCtrlFd is not nvidiactl")
            vas.vaspaces[g.uuid] = vas_obj.handle
            self.gpu_vaspace_owner[g.uuid] = vas
        elif req == rm.UVM_UNREGISTER_GPU_VASPACE:
            g = self._gpu_by_uuid(p.gpuUuid)
            if vas.ranges:
                self._violation(f"VA space unregistered with {len(vas.ranges)} UVM ranges left")
            vas.vaspaces.pop(g.uuid, None)
            if self.gpu_vaspace_owner.get(g.uuid) is vas:
                del self.gpu_vaspace_owner[g.uuid]
        elif req == rm.UVM_REGISTER_CHANNEL:
            self._gpu_by_uuid(p.gpuUuid)
            ch = self.obj(p.hChannel, _GPFIFO_CLASSES, "hChannel")
            self._check_range(vas, p.base, p.length)
            vas.channels[ch.handle] = _Range(p.base, p.length, kind="channel")
        elif req == rm.UVM_UNREGISTER_CHANNEL:
            if vas.channels.pop(p.hChannel, None) is None:
                raise RmFail(rm.NV_ERR_INVALID_CHANNEL, f"channel {p.hChannel:#x} not registered")
        elif req == rm.UVM_CREATE_EXTERNAL_RANGE:
            self._check_range(vas, p.base, p.length)
            vas.ranges[p.base] = _Range(p.base, p.length)
        elif req == rm.UVM_MAP_EXTERNAL_ALLOCATION:
            self._map_external(vas, p)
        elif req == rm.UVM_FREE:
            r = vas.ranges.pop(p.base, None)
            if r is None:
                raise RmFail(rm.NV_ERR_INVALID_ADDRESS, f"no UVM range at {p.base:#x}")
            self._unmap_range(r)

    def _peer_access(self, vas: UvmVaSpace, req: int, p: Any) -> None:
        """UVM_ENABLE/DISABLE_PEER_ACCESS (uvm_va_space.c): both GPUs registered in this VA space
        and distinct, else NV_ERR_INVALID_DEVICE; a pair without P2P support cannot be retained
        (NV_ERR_NOT_SUPPORTED); enabling twice or disabling a disabled pair is INVALID_DEVICE."""
        a, b = self._gpu_by_uuid(p.gpuUuidA), self._gpu_by_uuid(p.gpuUuidB)
        if a is b or a.uuid not in vas.gpus or b.uuid not in vas.gpus:
            raise RmFail(rm.NV_ERR_INVALID_DEVICE, f"GPUs {a.index} and {b.index} must be two GPUs "
                         "registered in this VA space")
        pair = frozenset((a.uuid, b.uuid))
        if req == rm.UVM_DISABLE_PEER_ACCESS:
            if pair not in vas.peers:
                raise RmFail(rm.NV_ERR_INVALID_DEVICE, "peer access is not enabled")
            vas.peers.discard(pair)
            return
        if pair in vas.peers:
            raise RmFail(rm.NV_ERR_INVALID_DEVICE, "peer access is already enabled")
        if not self.p2p:
            raise RmFail(rm.NV_ERR_NOT_SUPPORTED, f"GPUs {a.index} and {b.index} are not PCIe "
                         "peers")
        vas.peers.add(pair)

    def _check_range(self, vas: UvmVaSpace, base: int, length: int) -> None:
        if base % _PAGE or length % _PAGE or length == 0 or base + length > 1 << 57:
            raise RmFail(rm.NV_ERR_INVALID_ADDRESS,
                         f"[{base:#x}, +{length:#x}) is not 4 KiB aligned")
        for r in list(vas.ranges.values()) + list(vas.channels.values()):
            if r.base < base + length and base < r.base + r.length:
                raise RmFail(rm.NV_ERR_UVM_ADDRESS_IN_USE, f"[{base:#x}, +{length:#x}) overlaps "
                             f"[{r.base:#x}, +{r.length:#x})")

    def _map_external(self, vas: UvmVaSpace, p: Any) -> None:
        r = next((r for r in vas.ranges.values()
                  if r.base <= p.base and p.base + p.length <= r.base + r.length), None)
        if r is None:
            raise RmFail(rm.NV_ERR_INVALID_ADDRESS, f"[{p.base:#x}, +{p.length:#x}) is in no "
                         "external range")
        if p.gpuAttributesCount != 1:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the mock maps on exactly one GPU")
        attr = p.perGpuAttributes[0]
        g = self._gpu_by_uuid(attr.gpuUuid)
        if g.uuid not in vas.vaspaces:
            raise RmFail(rm.NV_ERR_INVALID_DEVICE, "the GPU's VA space is not registered")
        if attr.gpuMappingType != UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"mapping type {attr.gpuMappingType}")
        mem = self.obj(p.hMemory, _MEMORY_CLASSES, "hMemory")
        if p.offset + p.length > mem.size:
            raise RmFail(rm.NV_ERR_INVALID_LIMIT,
                         f"map {p.length:#x} B of a {mem.size:#x}-B object")
        if not any(va == p.base and ln >= p.length for va, ln in mem.data.get("dma", [])):
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "RM_MAP_MEMORY_DMA at this address must come "
                         "first (the RM mapping UVM mirrors)")
        # uvm_map_external.c, set_ext_gpu_map_location: the memory's GPU (for system memory too)
        # must be registered here, and another GPU's video memory needs peer access enabled.
        owner = mem.gpu
        assert owner is not None
        if owner.uuid not in vas.gpus:
            raise RmFail(rm.NV_ERR_INVALID_DEVICE, f"the memory's GPU {owner.index} is not "
                         "registered in this VA space")
        if owner is not g and mem.hclass == rm.NV1_MEMORY_USER and \
                frozenset((owner.uuid, g.uuid)) not in vas.peers:
            raise RmFail(rm.NV_ERR_INVALID_DEVICE, f"GPU {g.index} maps GPU {owner.index}'s video "
                         "memory without UVM_ENABLE_PEER_ACCESS")
        assert mem.backing is not None
        g.mem.map(p.base, p.length, mem.backing[p.offset:p.offset + p.length])
        r.mapped.append((p.base, p.length, mem.handle, g))

    def _unmap_range(self, r: _Range) -> None:
        """Removes a range's GPU mappings (and, with them, the RM DMA mappings UVM mirrored)."""
        for va, _, h, g in r.mapped:
            mem = self.objects.get(h)
            if mem is not None:
                mem.data["dma"] = [d for d in mem.data.get("dma", []) if d[0] != va]
            g.mem.unmap(va)
        r.mapped.clear()


class NvFile(MockFile):
    """An open NVIDIA device node."""

    def __init__(self, driver: MockNVDriver) -> None:
        self.driver = driver
        self.pending: tuple[MObj, int, int] | None = None   # prepared by NV_ESC_RM_MAP_MEMORY

    def ioctl(self, request: int, arg: Any) -> int:
        if (request >> 8) & 0xFF != rm.NV_IOCTL_MAGIC:
            raise OSError(E.ENOTTY, f"{self.path}: request {request:#x} is not an NVIDIA escape")
        return self.driver.escape(self, request, arg)

    def mmap(self, offset: int, size: int, prot: int) -> tuple[np.ndarray, Any]:
        if self.pending is None:
            raise OSError(E.EINVAL, f"{self.path}: mmap without NV_ESC_RM_MAP_MEMORY")
        mem, off, length = self.pending
        self.pending = None
        if offset != 0 or size > length:
            raise OSError(E.EINVAL, f"{self.path}: mmap of {size:#x} B at {offset:#x}, the "
                                    f"prepared mapping is {length:#x} B at offset 0")
        assert mem.backing is not None
        target = mem.gpu if mem.hclass in _USERMODE_CLASSES else None
        return mem.backing[off:off + length], target


class CtlFile(NvFile):
    """/dev/nvidiactl."""

    path = "/dev/nvidiactl"

    def __init__(self, driver: MockNVDriver) -> None:
        super().__init__(driver)
        driver.ctl_opens += 1

    def close(self) -> None:
        self.driver.ctl_closed()


class GpuFile(NvFile):
    """/dev/nvidiaN."""

    def __init__(self, driver: MockNVDriver, gpu: MockNVGPU) -> None:
        super().__init__(driver)
        self.gpu = gpu
        self.path = f"/dev/nvidia{gpu.index}"
        self.registered = False


class UvmFile(MockFile):
    """/dev/nvidia-uvm."""

    path = "/dev/nvidia-uvm"

    def __init__(self, driver: MockNVDriver) -> None:
        self.driver = driver
        self.vas = UvmVaSpace()

    def ioctl(self, request: int, arg: Any) -> int:
        return self.driver.uvm(self, request, arg)

    def close(self) -> None:
        if self.vas.initialized:
            self.driver.uvm_closed(self.vas)
