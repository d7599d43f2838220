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

from runtime.drivers.mock.nv_gpu import COMPUTE_PREFIX, COPY_PREFIX, MockChannel, MockNVGPU
from runtime.drivers.mock.os import MockFile, MockOS, _ioc_size
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
}
_MEMORY_CLASSES = (rm.NV1_MEMORY_USER, rm.NV1_MEMORY_SYSTEM, rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
_USERMODE_CLASSES = (rm.HOPPER_USERMODE_A, rm.AMPERE_USERMODE_A)
_GPFIFO_CLASSES = (rm.HOPPER_CHANNEL_GPFIFO_A, rm.AMPERE_CHANNEL_GPFIFO_A,
                   rm.BLACKWELL_CHANNEL_GPFIFO_A)


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
    mapped: list[tuple[int, int, int]] = field(default_factory=list)  # (va, length, memory handle)
    kind: str = "external"


class NvMockOS(MockOS):
    """MockOS plus what NVIDIA's device nodes need: UVM requests carry no size in their number."""

    # The mock NVIDIA GPU does not emulate SASS: launches are decoded, checked and completed, but a
    # kernel's own loads and stores never happen (runtime.drivers.mock.nv_gpu).
    executes_kernels = False

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

    def ioctl(self, fd: int, request: int,
              arg: ctypes.Structure | ctypes.Array | int | None) -> int:
        req = int(request)
        with self.lock:
            if not isinstance(self._fds.get(fd), UvmFile):
                return super().ioctl(fd, req, arg)
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
                 sm_version: int = 0x900, compute_class: int = rm.HOPPER_COMPUTE_A,
                 classes: tuple[int, ...] | None = None) -> None:
        self.os = os
        self.gpus = [MockNVGPU(self, i, vram_B, sm_version, compute_class) for i in range(count)]
        hopper = compute_class == rm.HOPPER_COMPUTE_A
        self.classes = classes or (
            (rm.HOPPER_USERMODE_A if hopper else rm.AMPERE_USERMODE_A),
            (rm.HOPPER_CHANNEL_GPFIFO_A if hopper else rm.AMPERE_CHANNEL_GPFIFO_A),
            compute_class, (rm.HOPPER_DMA_COPY_A if hopper else rm.AMPERE_DMA_COPY_B),
            rm.KEPLER_CHANNEL_GROUP_A, rm.FERMI_CONTEXT_SHARE_A, rm.FERMI_VASPACE_A,
            rm.GT200_DEBUGGER, rm.NV01_MEMORY_VIRTUAL)
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
        # UVM (one VA space per process)
        self.uvm_initialized = False
        self.uvm_gpus: set[bytes] = set()
        self.uvm_vaspaces: dict[bytes, int] = {}
        self.uvm_channels: dict[int, _Range] = {}
        self.ranges: dict[int, _Range] = {}
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
        return {"nv_rm_objects": len(self.objects), "nv_uvm_ranges": len(self.ranges),
                "nv_uvm_gpus": len(self.uvm_gpus), "nv_uvm_vaspaces": len(self.uvm_vaspaces),
                "nv_uvm_channels": len(self.uvm_channels),
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
            for r in self.ranges.values():
                if any(m[2] == handle for m in r.mapped):
                    self._violation(f"memory {handle:#x} freed while UVM maps it at {r.base:#x}")
            if o.data.get("cpu_maps"):
                pass
        if o.hclass in _GPFIFO_CLASSES:
            if handle in self.uvm_channels and not implicit:
                self._violation(f"channel {handle:#x} freed while registered with UVM")
            self.uvm_channels.pop(handle, None)
            assert o.gpu is not None
            o.gpu.channels.pop(o.data["token"], None)
        if o.hclass == rm.NV1_MEMORY_USER and o.gpu is not None:
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

    def uvm_closed(self) -> None:
        """Last UVM close: the VA space goes away with its ranges."""
        if self.ranges or self.uvm_gpus:
            self.leaked_at_close += len(self.ranges) + len(self.uvm_gpus)
        for r in list(self.ranges.values()):
            self._unmap_range(r)
        self.ranges.clear()
        self.uvm_gpus.clear()
        self.uvm_vaspaces.clear()
        self.uvm_channels.clear()
        self.uvm_initialized = False

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
                   rm.NV_ESC_RM_FREE: self._free, rm.NV_ESC_RM_MAP_MEMORY_DMA: self._map_dma}
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
        elif cls in COMPUTE_PREFIX or cls in COPY_PREFIX:
            self._parent_is(parent, _GPFIFO_CLASSES, cls)
            self._class_ok(cls)
            ch: MockChannel = parent.data["channel"]
            if ch.engine_class:
                raise RmFail(rm.NV_ERR_INVALID_STATE, f"channel {parent.handle:#x} already has an "
                             f"engine object ({ch.engine_class:#x})")
            ch.engine_class = cls
        elif cls == rm.GT200_DEBUGGER:
            a = args(rm.NV83DE_ALLOC_PARAMETERS)
            self._parent_is(parent, (rm.NV01_DEVICE_0,), cls)
            target = self.obj(a.hClass3dObject, what="hClass3dObject")
            if target.hclass not in COMPUTE_PREFIX:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the debugger needs a compute object")
        else:
            raise RmFail(rm.NV_ERR_INVALID_CLASS, f"class {cls:#x} is not modelled")
        self._add(o)
        p.hObjectNew = o.handle

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
        self.obj(p.hDma, (rm.NV01_MEMORY_VIRTUAL,), "hDma")
        mem = self.obj(p.hMemory, _MEMORY_CLASSES, "hMemory")
        if not (p.flags >> rm.NVOS46_FLAGS_DMA_OFFSET_FIXED[1]) & 1:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the mock only models fixed-offset mappings")
        if p.dmaOffset % _PAGE or p.length == 0 or p.offset + p.length > mem.size:
            raise RmFail(rm.NV_ERR_INVALID_OFFSET, f"DMA map [{p.dmaOffset:#x}, +{p.length:#x}) of "
                         f"{mem.size:#x} B")
        mem.data.setdefault("dma", []).append((p.dmaOffset, p.length))

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
                  rm.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM: g.max_warps_per_sm}
        infos = (rm.NV2080_CTRL_GR_INFO * a.grInfoListSize).from_address(a.grInfoList)
        for info in infos:
            if info.index not in values:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, f"GR info index {info.index}")
            info.data = values[info.index]

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
        if req == rm.UVM_INITIALIZE:
            if self.uvm_initialized:
                raise RmFail(rm.NV_ERR_INVALID_STATE, "the VA space is already initialized")
            self.uvm_initialized = file.initialized = True
            return
        if req == rm.UVM_MM_INITIALIZE:
            other = self.os.file(p.uvmFd)
            if not isinstance(other, UvmFile) or not other.initialized:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "uvmFd is not an initialized UVM file")
            return
        if not file.initialized:
            raise RmFail(rm.NV_ERR_ILLEGAL_ACTION, f"{uvm_name(req)} before UVM_INITIALIZE")
        if req == rm.UVM_REGISTER_GPU:
            g = self._gpu_by_uuid(p.gpu_uuid)
            if g.uuid in self.uvm_gpus:
                raise RmFail(rm.NV_ERR_IN_USE, "GPU already registered")
            self.uvm_gpus.add(g.uuid)
        elif req == rm.UVM_UNREGISTER_GPU:
            g = self._gpu_by_uuid(p.gpu_uuid)
            if g.uuid in self.uvm_vaspaces:
                self._violation("UVM_UNREGISTER_GPU with its VA space still registered")
            self.uvm_gpus.discard(g.uuid)
        elif req == rm.UVM_REGISTER_GPU_VASPACE:
            g = self._gpu_by_uuid(p.gpuUuid)
            if g.uuid not in self.uvm_gpus:
                raise RmFail(rm.NV_ERR_INVALID_DEVICE, "GPU not registered")
            vas = self.obj(p.hVaSpace, (rm.FERMI_VASPACE_A,), "hVaSpace")
            if not vas.data.get("flags", 0) & rm.NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED:
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the VA space is not externally owned")
            if not isinstance(self.os.file(p.rmCtrlFd), CtlFile):
                raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "rmCtrlFd is not nvidiactl")
            self.uvm_vaspaces[g.uuid] = vas.handle
        elif req == rm.UVM_UNREGISTER_GPU_VASPACE:
            g = self._gpu_by_uuid(p.gpuUuid)
            if self.ranges:
                self._violation(f"VA space unregistered with {len(self.ranges)} UVM ranges left")
            self.uvm_vaspaces.pop(g.uuid, None)
        elif req == rm.UVM_REGISTER_CHANNEL:
            self._gpu_by_uuid(p.gpuUuid)
            ch = self.obj(p.hChannel, _GPFIFO_CLASSES, "hChannel")
            self._check_range(p.base, p.length)
            self.uvm_channels[ch.handle] = _Range(p.base, p.length, kind="channel")
        elif req == rm.UVM_UNREGISTER_CHANNEL:
            if self.uvm_channels.pop(p.hChannel, None) is None:
                raise RmFail(rm.NV_ERR_INVALID_CHANNEL, f"channel {p.hChannel:#x} not registered")
        elif req == rm.UVM_CREATE_EXTERNAL_RANGE:
            self._check_range(p.base, p.length)
            self.ranges[p.base] = _Range(p.base, p.length)
        elif req == rm.UVM_MAP_EXTERNAL_ALLOCATION:
            self._map_external(p)
        elif req == rm.UVM_FREE:
            r = self.ranges.pop(p.base, None)
            if r is None:
                raise RmFail(rm.NV_ERR_INVALID_ADDRESS, f"no UVM range at {p.base:#x}")
            self._unmap_range(r)

    def _check_range(self, base: int, length: int) -> None:
        if base % _PAGE or length % _PAGE or length == 0 or base + length > 1 << 57:
            raise RmFail(rm.NV_ERR_INVALID_ADDRESS,
                         f"[{base:#x}, +{length:#x}) is not 4 KiB aligned")
        for r in list(self.ranges.values()) + list(self.uvm_channels.values()):
            if r.base < base + length and base < r.base + r.length:
                raise RmFail(rm.NV_ERR_UVM_ADDRESS_IN_USE, f"[{base:#x}, +{length:#x}) overlaps "
                             f"[{r.base:#x}, +{r.length:#x})")

    def _map_external(self, p: Any) -> None:
        r = next((r for r in self.ranges.values()
                  if r.base <= p.base and p.base + p.length <= r.base + r.length), None)
        if r is None:
            raise RmFail(rm.NV_ERR_INVALID_ADDRESS, f"[{p.base:#x}, +{p.length:#x}) is in no "
                         "external range")
        if p.gpuAttributesCount != 1:
            raise RmFail(rm.NV_ERR_INVALID_ARGUMENT, "the mock maps on exactly one GPU")
        attr = p.perGpuAttributes[0]
        g = self._gpu_by_uuid(attr.gpuUuid)
        if g.uuid not in self.uvm_vaspaces:
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
        assert mem.backing is not None
        g.mem.map(p.base, p.length, mem.backing[p.offset:p.offset + p.length])
        r.mapped.append((p.base, p.length, mem.handle))

    def _unmap_range(self, r: _Range) -> None:
        """Removes a range's GPU mappings (and, with them, the RM DMA mappings UVM mirrored)."""
        for va, _, h in r.mapped:
            mem = self.objects.get(h)
            if mem is not None:
                mem.data["dma"] = [d for d in mem.data.get("dma", []) if d[0] != va]
            for g in self.gpus:
                try:
                    g.mem.unmap(va)
                    break
                except ValueError:
                    continue
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
        self.initialized = False

    def ioctl(self, request: int, arg: Any) -> int:
        return self.driver.uvm(self, request, arg)

    def close(self) -> None:
        if self.initialized:
            self.driver.uvm_closed()
