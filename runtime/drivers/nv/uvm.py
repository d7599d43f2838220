"""The NVIDIA unified-memory driver (/dev/nvidia-uvm): the process's GPU VA space.

RM allocates memory and channels; UVM owns the GPU page tables of a VA space created with
`IS_EXTERNALLY_OWNED`, so buffers become GPU-visible through UVM: register the GPU and the RM VA
space, reserve an external range, and map an RM memory handle into it (uvm_ioctl.h). UVM requests
are plain numbers (`UVM_INITIALIZE` = 0x30000001, `UVM_REGISTER_GPU` = 37, ...), not _IOWR codes,
and report failure through the `rmStatus` field of their parameter block.
"""
from __future__ import annotations

import ctypes
import errno as E
import os
from typing import Any

from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv.rm import RmError, RmMemoryError
from runtime.hcq.errors import DeviceNotFound, IoctlError
from runtime.hcq.seam import OSSeam

# nv_uvm_user_types.h (580.142) UvmGpuMappingType: the enum lives in a header the nv spec does not
# read (nv_uvm_user_types.h is reached only through uvm_types.h's include, outside the kept files).
UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC = 1
_UVM_NAMES = {
    rm.UVM_INITIALIZE: "UVM_INITIALIZE", rm.UVM_MM_INITIALIZE: "UVM_MM_INITIALIZE",
    rm.UVM_REGISTER_GPU: "UVM_REGISTER_GPU", rm.UVM_UNREGISTER_GPU: "UVM_UNREGISTER_GPU",
    rm.UVM_REGISTER_GPU_VASPACE: "UVM_REGISTER_GPU_VASPACE",
    rm.UVM_UNREGISTER_GPU_VASPACE: "UVM_UNREGISTER_GPU_VASPACE",
    rm.UVM_REGISTER_CHANNEL: "UVM_REGISTER_CHANNEL", rm.UVM_UNREGISTER_CHANNEL:
        "UVM_UNREGISTER_CHANNEL",
    rm.UVM_CREATE_EXTERNAL_RANGE: "UVM_CREATE_EXTERNAL_RANGE",
    rm.UVM_MAP_EXTERNAL_ALLOCATION: "UVM_MAP_EXTERNAL_ALLOCATION", rm.UVM_FREE: "UVM_FREE",
    rm.UVM_ENABLE_PEER_ACCESS: "UVM_ENABLE_PEER_ACCESS",
    rm.UVM_DISABLE_PEER_ACCESS: "UVM_DISABLE_PEER_ACCESS",
}


def uvm_name(request: int) -> str:
    """The C name of a UVM request this driver issues."""
    return _UVM_NAMES.get(request, f"UVM request {request:#x}")


class Uvm:
    """The process's UVM VA space (two descriptors, as libcuda and tinygrad open it)."""

    def __init__(self, seam: OSSeam, fd_ctl: int) -> None:
        self.os, self.fd_ctl = seam, fd_ctl
        try:
            self.fd = seam.open("/dev/nvidia-uvm", os.O_RDWR)
        except OSError as e:
            raise DeviceNotFound(f"cannot open /dev/nvidia-uvm: {e.strerror} (is nvidia-uvm "
                                 "loaded?)") from e
        self.fd_mm = -1
        try:
            self.call(rm.UVM_INITIALIZE, rm.UVM_INITIALIZE_PARAMS())
            # UVM_MM_INITIALIZE binds the VA space to this process's mm through a second descriptor;
            # libcuda does it too and ignores failure (older drivers and some sandboxes refuse it).
            self.fd_mm = seam.open("/dev/nvidia-uvm", os.O_RDWR)
            try:
                self.call(rm.UVM_MM_INITIALIZE, rm.UVM_MM_INITIALIZE_PARAMS(uvmFd=self.fd),
                          fd=self.fd_mm)
            except RmError:
                pass
        except BaseException:
            self.close()
            raise

    def call(self, request: int, params: ctypes.Structure, fd: int | None = None) -> Any:
        """Issues a UVM request; raises `RmError` on an errno or a non-OK `rmStatus`."""
        name = uvm_name(request)
        try:
            self.os.ioctl(self.fd if fd is None else fd, request, params)
        except IoctlError:
            raise
        except OSError as e:
            raise RmError(name, 0, e.errno or E.EIO) from None
        status = params.rmStatus
        if status:
            cls = RmMemoryError if status in (rm.NV_ERR_NO_MEMORY,
                                              rm.NV_ERR_INSUFFICIENT_RESOURCES) else RmError
            raise cls(name, status)
        return params

    # ------------------------------------------------------------------ GPUs and VA spaces
    def register_gpu(self, uuid: bytes) -> None:
        """UVM_REGISTER_GPU (rmCtrlFd -1: UVM makes its own RM client for the GPU)."""
        self.call(rm.UVM_REGISTER_GPU,
                  rm.UVM_REGISTER_GPU_PARAMS(gpu_uuid=_uuid(uuid), rmCtrlFd=-1))

    def unregister_gpu(self, uuid: bytes) -> None:
        """UVM_UNREGISTER_GPU."""
        self.call(rm.UVM_UNREGISTER_GPU, rm.UVM_UNREGISTER_GPU_PARAMS(gpu_uuid=_uuid(uuid)))

    def register_gpu_vaspace(self, uuid: bytes, client: int, vaspace: int) -> None:
        """UVM_REGISTER_GPU_VASPACE: UVM takes over the RM VA space's page tables."""
        self.call(rm.UVM_REGISTER_GPU_VASPACE, rm.UVM_REGISTER_GPU_VASPACE_PARAMS(
            gpuUuid=_uuid(uuid), rmCtrlFd=self.fd_ctl, hClient=client, hVaSpace=vaspace))

    def unregister_gpu_vaspace(self, uuid: bytes) -> None:
        """UVM_UNREGISTER_GPU_VASPACE."""
        self.call(rm.UVM_UNREGISTER_GPU_VASPACE,
                  rm.UVM_UNREGISTER_GPU_VASPACE_PARAMS(gpuUuid=_uuid(uuid)))

    def register_channel(self, uuid: bytes, client: int, channel: int, base: int, length: int
                         ) -> None:
        """UVM_REGISTER_CHANNEL: UVM maps the channel's RM-private buffers in [base, +length)."""
        self.call(rm.UVM_REGISTER_CHANNEL, rm.UVM_REGISTER_CHANNEL_PARAMS(
            gpuUuid=_uuid(uuid), rmCtrlFd=self.fd_ctl, hClient=client, hChannel=channel, base=base,
            length=length))

    def unregister_channel(self, uuid: bytes, client: int, channel: int) -> None:
        """UVM_UNREGISTER_CHANNEL."""
        self.call(rm.UVM_UNREGISTER_CHANNEL, rm.UVM_UNREGISTER_CHANNEL_PARAMS(
            gpuUuid=_uuid(uuid), hClient=client, hChannel=channel))

    def enable_peer_access(self, uuid_a: bytes, uuid_b: bytes) -> None:
        """UVM_ENABLE_PEER_ACCESS: with both GPUs registered in this VA space, each may then map
        the other's video memory here (uvm_va_space.c)."""
        self.call(rm.UVM_ENABLE_PEER_ACCESS, rm.UVM_ENABLE_PEER_ACCESS_PARAMS(
            gpuUuidA=_uuid(uuid_a), gpuUuidB=_uuid(uuid_b)))

    def disable_peer_access(self, uuid_a: bytes, uuid_b: bytes) -> None:
        """UVM_DISABLE_PEER_ACCESS."""
        self.call(rm.UVM_DISABLE_PEER_ACCESS, rm.UVM_DISABLE_PEER_ACCESS_PARAMS(
            gpuUuidA=_uuid(uuid_a), gpuUuidB=_uuid(uuid_b)))

    # ------------------------------------------------------------------ mappings
    def create_external_range(self, base: int, length: int) -> None:
        """UVM_CREATE_EXTERNAL_RANGE: reserves [base, +length) of the GPU VA space."""
        self.call(rm.UVM_CREATE_EXTERNAL_RANGE,
                  rm.UVM_CREATE_EXTERNAL_RANGE_PARAMS(base=base, length=length))

    def map_external_allocation(self, base: int, length: int, client: int, memory: int,
                                uuid: bytes) -> None:
        """UVM_MAP_EXTERNAL_ALLOCATION of RM memory `memory` at `base` on one GPU (read, write and
        atomics, default caching)."""
        p = rm.UVM_MAP_EXTERNAL_ALLOCATION_PARAMS(base=base, length=length, offset=0,
                                                  gpuAttributesCount=1, rmCtrlFd=self.fd_ctl,
                                                  hClient=client, hMemory=memory)
        attr = p.perGpuAttributes[0]
        attr.gpuUuid = _uuid(uuid)
        attr.gpuMappingType = UVM_GPU_MAPPING_TYPE_READ_WRITE_ATOMIC
        self.call(rm.UVM_MAP_EXTERNAL_ALLOCATION, p)

    def free(self, base: int, length: int) -> None:
        """UVM_FREE of the range at `base`: unmaps it from every GPU and releases the range."""
        self.call(rm.UVM_FREE, rm.UVM_FREE_PARAMS(base=base, length=length))

    def close(self) -> None:
        """Closes both descriptors (UVM tears the VA space down on the last close)."""
        for attr in ("fd_mm", "fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                setattr(self, attr, -1)
                self.os.close(fd)


def _uuid(raw: bytes) -> Any:
    """A 16-byte GPU UUID as UVM parameter blocks embed it (NvProcessorUuid, struct nv_uuid)."""
    if len(raw) != 16:
        raise ValueError(f"a GPU UUID is 16 bytes, got {len(raw)}")
    u = rm.nv_uuid()
    ctypes.memmove(ctypes.addressof(u), raw, 16)
    return u
