"""The NVIDIA resource manager (RM) interface: /dev/nvidiactl and /dev/nvidiaN escapes (seam).

Every RM object (client, device, subdevice, memory, VA space, channel group, channel, engine object)
is made with NV_ESC_RM_ALLOC, driven with NV_ESC_RM_CONTROL and destroyed with NV_ESC_RM_FREE;
memory is made visible to the CPU with NV_ESC_RM_MAP_MEMORY + mmap of a registered /dev/nvidiaN
descriptor and to the GPU with NV_ESC_RM_MAP_MEMORY_DMA. Structs and numbers come from
`hcq_bindings.nv.rm_580` (nvos.h, nv_escape.h, nv-ioctl.h, nv-ioctl-numbers.h).

Two failure layers: the ioctl itself (an errno: the request was malformed or the device is gone) and
the NV status RM writes into the parameter block (the request was understood and refused). Both
become `RmError`, which names the escape, the class or control command and the decoded status.

`NvRm` remembers every object it allocated (handle, parent, class) in allocation order, so a device
can free them newest first and a test can check that none is left.
"""
from __future__ import annotations

import ctypes
import errno as E
import os
from dataclasses import dataclass
from typing import Any, Iterable

from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv.status import describe_status, status_name
from runtime.hcq.errors import DeviceNotFound, HCQMemoryError, IoctlError
from runtime.hcq.seam import OSSeam

NV_IOCTL_MAGIC = rm.NV_IOCTL_MAGIC  # 'F'
_IOC_READ_WRITE = 3                 # asm-generic/ioctl.h: _IOC_READ | _IOC_WRITE
MAX_CARDS = 64                      # nv-ioctl.h: NV_ESC_CARD_INFO fills up to 64 entries

# Names of the classes and controls this driver uses, for messages (the generated module is lazy, so
# a value -> name table over all of RM would materialise tens of thousands of definitions).
_CLASS_NAMES = (
    "NV01_ROOT_CLIENT", "NV01_DEVICE_0", "NV20_SUBDEVICE_0", "NV01_MEMORY_VIRTUAL",
    "NV01_MEMORY_LOCAL_USER", "NV01_MEMORY_SYSTEM", "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR",
    "FERMI_VASPACE_A", "KEPLER_CHANNEL_GROUP_A", "FERMI_CONTEXT_SHARE_A", "GT200_DEBUGGER",
    "NV50_P2P",
)  # and the classes of every generation record (runtime/drivers/nv/generation.py)
_CONTROL_NAMES = (
    "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2", "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2",
    "NV0080_CTRL_CMD_GPU_GET_CLASSLIST", "NV2080_CTRL_CMD_GPU_GET_GID_INFO",
    "NV2080_CTRL_CMD_GR_GET_INFO", "NV2080_CTRL_CMD_PERF_BOOST",
    "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN", "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE",
    "NV83DE_CTRL_CMD_DEBUG_READ_ALL_SM_ERROR_STATES", "NV2080_CTRL_CMD_TIMER_GET_TIME",
    "NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS",
)


def _reverse(names: Iterable[str]) -> dict[int, str]:
    out: dict[int, str] = {}
    for n in names:
        v = getattr(rm, n, None)
        if isinstance(v, int):
            out.setdefault(v, n)
    return out


_class_names: dict[int, str] | None = None
_control_names: dict[int, str] | None = None


def class_name(hclass: int) -> str:
    """"HOPPER_COMPUTE_A" for 0xcbc0 (for the classes this driver uses), else the number."""
    global _class_names
    if _class_names is None:
        from runtime.drivers.nv.generation import class_names  # on first use: cheap imports
        _class_names = {**class_names(), **_reverse(_CLASS_NAMES)}
    return _class_names.get(hclass, f"class {hclass:#06x}")


def control_name(cmd: int) -> str:
    """The C name of a control command this driver issues, else the number."""
    global _control_names
    if _control_names is None:
        _control_names = _reverse(_CONTROL_NAMES)
    return _control_names.get(cmd, f"control {cmd:#010x}")


def escape_request(nr: int, size: int) -> int:
    """The ioctl request for RM escape `nr` with a `size`-byte argument: _IOWR('F', nr, size)
    (nv-ioctl-numbers.h; the kernel takes the escape from _IOC_NR and the size from _IOC_SIZE)."""
    if size >= 1 << 14:
        raise ValueError(f"an RM escape argument of {size} B does not fit _IOC_SIZE (14 bits)")
    return (_IOC_READ_WRITE << 30) | (size << 16) | (NV_IOCTL_MAGIC << 8) | (nr & 0xFF)


# Which escape an RM request number belongs to, for MockOS (injection by name) and for messages.
ESCAPE_NAMES = {
    rm.NV_ESC_RM_ALLOC: "NV_ESC_RM_ALLOC", rm.NV_ESC_RM_CONTROL: "NV_ESC_RM_CONTROL",
    rm.NV_ESC_RM_FREE: "NV_ESC_RM_FREE", rm.NV_ESC_RM_MAP_MEMORY: "NV_ESC_RM_MAP_MEMORY",
    rm.NV_ESC_RM_UNMAP_MEMORY: "NV_ESC_RM_UNMAP_MEMORY",
    rm.NV_ESC_RM_ALLOC_MEMORY: "NV_ESC_RM_ALLOC_MEMORY",
    rm.NV_ESC_RM_MAP_MEMORY_DMA: "NV_ESC_RM_MAP_MEMORY_DMA",
    rm.NV_ESC_RM_UNMAP_MEMORY_DMA: "NV_ESC_RM_UNMAP_MEMORY_DMA",
    rm.NV_ESC_CARD_INFO: "NV_ESC_CARD_INFO", rm.NV_ESC_REGISTER_FD: "NV_ESC_REGISTER_FD",
    rm.NV_ESC_RM_DUP_OBJECT: "NV_ESC_RM_DUP_OBJECT",
}


class RmError(IoctlError):
    """An RM call failed. `status` is the NV status RM returned (0 when the ioctl itself failed,
    then `errno` says why); `what` names the escape and its object, class or control command."""

    def __init__(self, what: str, status: int = 0, errno: int = E.EIO, detail: str = "") -> None:
        self.what, self.status = what, status
        self.status_name = status_name(status) if status else ""
        decoded = describe_status(status) if status else ""
        if detail:
            decoded = f"{decoded}; {detail}" if decoded else detail
        super().__init__(what, errno, decoded)
        if status:
            self.args = (errno, f"{what} failed: {decoded}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.status, self.errno, ""))


class RmMemoryError(RmError, HCQMemoryError):
    """RM is out of memory (NV_ERR_NO_MEMORY or NV_ERR_INSUFFICIENT_RESOURCES)."""


_MEMORY_STATUSES = (rm.NV_ERR_NO_MEMORY, rm.NV_ERR_INSUFFICIENT_RESOURCES)


def _check(status: int, what: str) -> None:
    if status:
        cls = RmMemoryError if status in _MEMORY_STATUSES else RmError
        raise cls(what, status)


@dataclass(frozen=True)
class RmObject:
    """An object this client allocated: its handle, its parent's handle and its class."""

    handle: int
    parent: int
    hclass: int


class NvRm:
    """One RM client: /dev/nvidiactl, the root client object, and the objects made under it."""

    def __init__(self, seam: OSSeam) -> None:
        self.os = seam
        try:
            self.fd_ctl = seam.open("/dev/nvidiactl", os.O_RDWR)
        except OSError as e:
            raise DeviceNotFound(f"cannot open /dev/nvidiactl: {e.strerror} (is the NVIDIA kernel "
                                 "driver loaded, and may this user open its device nodes?)") from e
        self.objects: dict[int, RmObject] = {}
        self._order: list[int] = []
        self._next_client_handle = 0x5C00_0001  # handles this client chooses (OS descriptors)
        self.root = 0
        try:
            self.root = self.alloc(0, rm.NV01_ROOT_CLIENT, root=0)
        except BaseException:
            seam.close(self.fd_ctl)
            raise
        # Handles this client chooses are per client in RM; they are also kept distinct between
        # this process's clients (one per device), so that the mock RM, which has one handle table
        # for all clients, accepts them too.
        self._next_client_handle = 0x5C00_0001 + ((self.root & 0xFFF) << 16)

    # ------------------------------------------------------------------ raw escapes
    def escape(self, fd: int, nr: int, arg: ctypes.Structure | ctypes.Array, what: str) -> Any:
        """Issues escape `nr` on `fd` with `arg` (read and written in place)."""
        try:
            self.os.ioctl(fd, escape_request(nr, ctypes.sizeof(arg)), arg)
        except IoctlError:
            raise
        except OSError as e:
            err = e.errno or E.EIO
            hint = "the descriptor is not registered with nvidiactl" if err == E.EINVAL and \
                nr == rm.NV_ESC_RM_ALLOC_MEMORY else ""
            esc = ESCAPE_NAMES.get(nr, f"escape {nr}")
            raise RmError(f"{esc} ({what})", 0, err, hint) from None
        return arg

    # ------------------------------------------------------------------ objects
    def alloc(self, parent: int, hclass: int, params: ctypes.Structure | None = None,
              root: int | None = None, handle: int = 0) -> int:
        """NV_ESC_RM_ALLOC of `hclass` under `parent`; returns the new object's handle."""
        p = rm.NVOS21_PARAMETERS(hRoot=self.root if root is None else root, hObjectParent=parent,
                                 hObjectNew=handle, hClass=hclass)
        if params is not None:
            p.pAllocParms = ctypes.addressof(params)
            p.paramsSize = ctypes.sizeof(params)
        what = f"{class_name(hclass)} under {parent:#x}"
        self.escape(self.fd_ctl, rm.NV_ESC_RM_ALLOC, p, what)
        _check(p.status, f"NV_ESC_RM_ALLOC of {what}")
        self._track(p.hObjectNew, parent, hclass)
        return p.hObjectNew

    def _track(self, handle: int, parent: int, hclass: int) -> None:
        self.objects[handle] = RmObject(handle, parent, hclass)
        self._order.append(handle)

    def free(self, handle: int) -> None:
        """NV_ESC_RM_FREE of an object this client made."""
        obj = self.objects.get(handle)
        if obj is None:
            raise RmError(f"NV_ESC_RM_FREE of {handle:#x}", rm.NV_ERR_INVALID_OBJECT_HANDLE,
                          detail="not an object of this client")
        p = rm.NVOS00_PARAMETERS(hRoot=self.root, hObjectParent=obj.parent, hObjectOld=handle)
        what = f"{class_name(obj.hclass)} {handle:#x}"
        self.escape(self.fd_ctl, rm.NV_ESC_RM_FREE, p, what)
        _check(p.status, f"NV_ESC_RM_FREE of {what}")
        del self.objects[handle]
        self._order.remove(handle)

    def live(self) -> list[RmObject]:
        """Objects allocated and not freed, oldest first (the root client included)."""
        return [self.objects[h] for h in self._order]

    def control(self, obj: int, cmd: int, params: ctypes.Structure | ctypes.Array | None = None
                ) -> Any:
        """NV_ESC_RM_CONTROL `cmd` on `obj` with `params` (filled in place and returned)."""
        p = rm.NVOS54_PARAMETERS(hClient=self.root, hObject=obj, cmd=cmd)
        if params is not None:
            p.params = ctypes.addressof(params)
            p.paramsSize = ctypes.sizeof(params)
        what = f"{control_name(cmd)} on {obj:#x}"
        self.escape(self.fd_ctl, rm.NV_ESC_RM_CONTROL, p, what)
        _check(p.status, f"NV_ESC_RM_CONTROL {what}")
        return params

    # ------------------------------------------------------------------ GPUs and descriptors
    def card_info(self) -> list[Any]:
        """NV_ESC_CARD_INFO: the valid entries (pci info, gpu_id, minor number) in minor order."""
        cards = (rm.nv_ioctl_card_info_t * MAX_CARDS)()
        self.escape(self.fd_ctl, rm.NV_ESC_CARD_INFO, cards, "GPU list")
        return [c for c in cards if c.valid]

    def open_gpu_fd(self, minor: int) -> int:
        """Opens /dev/nvidia<minor> and registers it with this client's nvidiactl descriptor
        (NV_ESC_REGISTER_FD), which memory allocation and CPU mappings on it require."""
        path = f"/dev/nvidia{minor}"
        try:
            fd = self.os.open(path, os.O_RDWR)
        except OSError as e:
            raise DeviceNotFound(f"cannot open {path}: {e.strerror}") from e
        try:
            self.escape(fd, rm.NV_ESC_REGISTER_FD, rm.nv_ioctl_register_fd_t(ctl_fd=self.fd_ctl),
                        path)
        except BaseException:
            self.os.close(fd)
            raise
        return fd

    def dup_object(self, parent: int, src_client: int, src: int) -> int:
        """NV_ESC_RM_DUP_OBJECT: a handle under `parent` (a device of this client) for memory `src`
        of client `src_client` (another device's, for a peer mapping); this client chooses the
        handle."""
        handle = self._next_client_handle
        self._next_client_handle += 1
        p = rm.NVOS55_PARAMETERS(hClient=self.root, hParent=parent, hObject=handle,
                                 hClientSrc=src_client, hObjectSrc=src)
        what = f"{src:#x} of client {src_client:#x} under {parent:#x}"
        self.escape(self.fd_ctl, rm.NV_ESC_RM_DUP_OBJECT, p, what)
        _check(p.status, f"NV_ESC_RM_DUP_OBJECT of {what}")
        self._track(p.hObject, parent, rm.NV1_MEMORY_USER)
        return p.hObject

    # ------------------------------------------------------------------ memory
    def alloc_os_descriptor(self, fd_dev: int, parent: int, cpu_addr: int, size: int, flags: int
                            ) -> int:
        """NV_ESC_RM_ALLOC_MEMORY of NV01_MEMORY_SYSTEM_OS_DESCRIPTOR: pins the user pages at
        [cpu_addr, +size) and returns a memory handle (this client chooses the handle)."""
        handle = self._next_client_handle
        self._next_client_handle += 1
        p = rm.nv_ioctl_nvos02_parameters_with_fd(fd=-1, params=rm.NVOS02_PARAMETERS(
            hRoot=self.root, hObjectParent=parent, hObjectNew=handle,
            hClass=rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, flags=flags, pMemory=cpu_addr,
            limit=size - 1))
        what = f"NV01_MEMORY_SYSTEM_OS_DESCRIPTOR of {size:#x} B at {cpu_addr:#x}"
        self.escape(fd_dev, rm.NV_ESC_RM_ALLOC_MEMORY, p, what)
        _check(p.params.status, f"NV_ESC_RM_ALLOC_MEMORY {what}")
        self._track(p.params.hObjectNew, parent, rm.NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
        return p.params.hObjectNew

    def map_memory_cpu(self, device: int, memory: int, size: int, fd_map: int, flags: int = 0
                       ) -> None:
        """NV_ESC_RM_MAP_MEMORY: prepares `fd_map` (a fresh registered descriptor) so that mmap of
        it at offset 0 maps `size` bytes of `memory` into the process."""
        p = rm.nv_ioctl_nvos33_parameters_with_fd(fd=fd_map, params=rm.NVOS33_PARAMETERS(
            hClient=self.root, hDevice=device, hMemory=memory, length=size, flags=flags))
        what = f"memory {memory:#x}, {size:#x} B"
        self.escape(self.fd_ctl, rm.NV_ESC_RM_MAP_MEMORY, p, what)
        _check(p.params.status, f"NV_ESC_RM_MAP_MEMORY {what}")

    def map_memory_dma(self, device: int, dma: int, memory: int, size: int, gpu_va: int,
                       flags: int) -> int:
        """NV_ESC_RM_MAP_MEMORY_DMA of `memory` into the virtual-memory object `dma` at the fixed
        GPU address `gpu_va`; returns the address RM mapped it at (checked to be `gpu_va`)."""
        p = rm.NVOS46_PARAMETERS(hClient=self.root, hDevice=device, hDma=dma, hMemory=memory,
                                 length=size, flags=flags, dmaOffset=gpu_va)
        what = f"memory {memory:#x} at GPU VA {gpu_va:#x}, {size:#x} B"
        self.escape(self.fd_ctl, rm.NV_ESC_RM_MAP_MEMORY_DMA, p, what)
        _check(p.status, f"NV_ESC_RM_MAP_MEMORY_DMA {what}")
        if p.dmaOffset != gpu_va:
            raise RmError(f"NV_ESC_RM_MAP_MEMORY_DMA {what}", 0, E.EIO,
                          f"RM mapped it at {p.dmaOffset:#x} instead")
        return p.dmaOffset

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Frees the root client (RM then frees anything still under it) and closes nvidiactl."""
        try:
            if self.root and self.root in self.objects:
                self.free(self.root)
        finally:
            self.os.close(self.fd_ctl)
