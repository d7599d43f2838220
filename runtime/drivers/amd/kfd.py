"""The KFD interface: topology from sysfs and the /dev/kfd ioctls, through the OS seam.

Every ioctl is issued as ``seam.ioctl(fd, REQ, struct)`` with the request numbers and argument
structs of the generated `kfd_ioctl` bindings; failures become `IoctlError`s that name the request,
the errno and what that errno usually means for this request (Linux 6.1 amdkfd/kfd_chardev.c).
"""
from __future__ import annotations

import ctypes
import errno as E
import os
import time
from dataclasses import dataclass, field
from typing import Any

from hcq_bindings.linux import kfd_ioctl as kfd

from runtime.hcq.errors import DeviceNotFound, IoctlError
from runtime.hcq.seam import OSSeam

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"

# What an errno means for a given request, for the error message (kfd_chardev.c,
# amdgpu_amdkfd_gpuvm.c).
_HINTS: dict[tuple[str, int], str] = {
    ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", E.ENOMEM):
        "out of GPU memory (or of the process's GTT limit)",
    ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", E.EINVAL):
        "bad size, VA or flags; CPU-visible VRAM (PUBLIC) "
        "needs a large BAR: enable Resizable BAR / Above 4G decoding in the firmware setup",
    ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", E.EFAULT): "userptr memory is not a valid user mapping",
    ("AMDKFD_IOC_MAP_MEMORY_TO_GPU", E.ENOMEM): "no memory for the GPU page tables",
    ("AMDKFD_IOC_MAP_MEMORY_TO_GPU", E.EINVAL): "unknown handle or device id",
    ("AMDKFD_IOC_ACQUIRE_VM", E.EINVAL): "the render node does not belong to this GPU",
    ("AMDKFD_IOC_ACQUIRE_VM", E.EBUSY): "the render node's VM is already owned by another process",
    ("AMDKFD_IOC_CREATE_QUEUE", E.ENOMEM): "no hardware queue slot or memory for the MQD",
    ("AMDKFD_IOC_CREATE_QUEUE", E.EINVAL):
        "ring must be a power of two >= 1 KiB with a 256-B aligned "
        "base, and every address must be mapped",
    ("AMDKFD_IOC_CREATE_QUEUE", E.ENOSPC): "all hardware queues of this type are in use",
    ("AMDKFD_IOC_CREATE_EVENT", E.ENOMEM): "the event page is full (4096 signal events)",
    ("AMDKFD_IOC_WAIT_EVENTS", E.EINTR): "interrupted by a signal",
    ("AMDKFD_IOC_ALLOC_QUEUE_GWS", E.EBUSY):
        "another queue of this process holds the GPU's GWS (or a debugger is attached)",
    ("AMDKFD_IOC_ALLOC_QUEUE_GWS", E.ENODEV):
        "the GPU has no GWS (topology num_gws 0: MES firmware too old) or runs without HWS",
    ("AMDKFD_IOC_ALLOC_QUEUE_GWS", E.EINVAL):
        "unknown queue, or releasing GWS the process does not hold",
}


def _hint(name: str, err: int) -> str:
    if err in (E.EACCES, E.EPERM):
        return "no access to /dev/kfd: add the user to the 'render' and 'video' groups"
    return _HINTS.get((name, err), "")


@dataclass(frozen=True)
class KfdNode:
    """One GPU node of the KFD topology (`nodes/N/properties`, `gpu_id`)."""

    node_id: int
    gpu_id: int
    properties: dict[str, int] = field(repr=False)

    @property
    def gfx_target_version(self) -> int:
        """e.g. 110000 for gfx1100."""
        return self.properties.get("gfx_target_version", 0)

    @property
    def arch(self) -> str:
        """LLVM processor name, e.g. "gfx1100" (major, minor and stepping as in amdgpu's naming)."""
        v = self.gfx_target_version
        return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"

    @property
    def drm_render_minor(self) -> int:
        """The N of /dev/dri/renderDN."""
        return self.properties["drm_render_minor"]


def read_topology(seam: OSSeam) -> list[KfdNode]:
    """GPU nodes (gpu_id != 0) in node order."""
    try:
        names = seam.listdir(TOPOLOGY)
    except OSError as e:
        raise DeviceNotFound(f"no KFD topology at {TOPOLOGY} ({e.strerror}): is amdgpu "
                             "loaded?") from e
    nodes = []
    for name in sorted((n for n in names if n.isdigit()), key=int):
        gpu_id = int(seam.read_sysfs(f"{TOPOLOGY}/{name}/gpu_id").strip() or 0)
        if gpu_id == 0:
            continue  # a CPU node
        props = {}
        for line in seam.read_sysfs(f"{TOPOLOGY}/{name}/properties").splitlines():
            parts = line.split()
            if len(parts) == 2:
                props[parts[0]] = int(parts[1])
        nodes.append(KfdNode(int(name), gpu_id, props))
    return nodes


def read_mem_banks(seam: OSSeam, node_id: int) -> list[dict[str, int]]:
    """The properties of node `node_id`'s memory banks (`mem_banks/N/properties`: heap_type,
    size_in_bytes, width, mem_clk_max; kfd_topology.c); empty when the topology lists none."""
    base = f"{TOPOLOGY}/{node_id}/mem_banks"
    try:
        names = seam.listdir(base)
    except OSError:
        return []
    banks = []
    for name in sorted((n for n in names if n.isdigit()), key=int):
        props = {}
        for line in seam.read_sysfs(f"{base}/{name}/properties").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                props[parts[0]] = int(parts[1])
        banks.append(props)
    return banks


def read_p2p_links(seam: OSSeam, node_id: int) -> set[int]:
    """Nodes that node `node_id` reaches directly (PCIe P2P or XGMI): the `node_to` of each of its
    `p2p_links` in the KFD topology (kfd_topology.c); empty when it has none."""
    base = f"{TOPOLOGY}/{node_id}/p2p_links"
    try:
        names = seam.listdir(base)
    except OSError:
        return set()
    out = set()
    for name in names:
        for line in seam.read_sysfs(f"{base}/{name}/properties").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "node_to":
                out.add(int(parts[1]))
    return out


def read_ip_bases(seam: OSSeam, render_minor: int, hw_id: int) -> list[int]:
    """Register segment bases of IP block `hw_id` (e.g. GC = 11) from amdgpu's ip_discovery."""
    path = f"/sys/class/drm/renderD{render_minor}/device/ip_discovery/die/0/{hw_id}/0/base_addr"
    return [int(x, 0) for x in seam.read_sysfs(path).split()]


class Kfd:
    """One process's view of /dev/kfd."""

    def __init__(self, seam: OSSeam) -> None:
        self.os = seam
        try:
            self.fd = seam.open("/dev/kfd", os.O_RDWR)
        except OSError as e:
            raise DeviceNotFound(f"cannot open /dev/kfd: {e.strerror}"
                                 + (f" ({_hint('', e.errno)})" if e.errno in (E.EACCES, E.EPERM)
                                    else "")) from e

    def ioctl(self, req: Any, arg: Any = None, fd: int | None = None, **fields: Any) -> Any:
        """Issues a generated ioctl request with `arg` (or a struct built from `fields`)."""
        if arg is None:
            arg = req.arg_type(**fields)
        try:
            self.os.ioctl(self.fd if fd is None else fd, int(req), arg)
        except IoctlError:
            raise
        except OSError as e:
            err = e.errno or E.EIO
            raise IoctlError(req.name, err, _hint(req.name, err)) from None
        return arg

    def version(self) -> tuple[int, int]:
        """KFD ioctl interface version (major, minor)."""
        v = self.ioctl(kfd.AMDKFD_IOC_GET_VERSION)
        return v.major_version, v.minor_version

    def acquire_vm(self, drm_fd: int, gpu_id: int) -> None:
        """Makes the render node's GPU VM this process's KFD VM."""
        self.ioctl(kfd.AMDKFD_IOC_ACQUIRE_VM, drm_fd=drm_fd, gpu_id=gpu_id)

    def available_memory(self, gpu_id: int) -> int:
        """AMDKFD_IOC_AVAILABLE_MEMORY: bytes of VRAM this process may still allocate on the
        GPU."""
        return int(self.ioctl(kfd.AMDKFD_IOC_AVAILABLE_MEMORY, gpu_id=gpu_id).available)

    def alloc_memory(self, gpu_id: int, va: int, size: int, flags: int,
                     mmap_offset: int = 0) -> Any:
        """ALLOC_MEMORY_OF_GPU; returns the args (handle, mmap_offset)."""
        return self.ioctl(kfd.AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, va_addr=va, size=size, gpu_id=gpu_id,
                          flags=flags, mmap_offset=mmap_offset)

    def free_memory(self, handle: int) -> None:
        """FREE_MEMORY_OF_GPU."""
        self.ioctl(kfd.AMDKFD_IOC_FREE_MEMORY_OF_GPU, handle=handle)

    def map_memory(self, handle: int, gpu_ids: list[int]) -> None:
        """MAP_MEMORY_TO_GPU on every listed GPU; checks that all succeeded."""
        ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        r = self.ioctl(kfd.AMDKFD_IOC_MAP_MEMORY_TO_GPU, handle=handle,
                       device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(gpu_ids))
        if r.n_success != len(gpu_ids):
            raise IoctlError("AMDKFD_IOC_MAP_MEMORY_TO_GPU", E.EIO,
                             f"mapped on {r.n_success} of {len(gpu_ids)} GPUs")

    def unmap_memory(self, handle: int, gpu_ids: list[int]) -> None:
        """UNMAP_MEMORY_FROM_GPU."""
        ids = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
        self.ioctl(kfd.AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, handle=handle,
                   device_ids_array_ptr=ctypes.addressof(ids), n_devices=len(gpu_ids))

    def create_queue(self, **fields: Any) -> Any:
        """CREATE_QUEUE; returns the args (queue_id, doorbell_offset)."""
        return self.ioctl(kfd.AMDKFD_IOC_CREATE_QUEUE, **fields)

    def destroy_queue(self, queue_id: int) -> None:
        """DESTROY_QUEUE."""
        self.ioctl(kfd.AMDKFD_IOC_DESTROY_QUEUE, queue_id=queue_id)

    def alloc_queue_gws(self, queue_id: int, num_gws: int) -> int:
        """ALLOC_QUEUE_GWS: gives the queue the GPU's GWS (num_gws > 0; KFD assigns all of it,
        one queue per process) or takes it back (0); returns first_gws. On gfx11 (MES) this
        makes the queue exclusively scheduled, as a cooperative launch needs; the shader gets
        no GWS resources from it."""
        return int(self.ioctl(kfd.AMDKFD_IOC_ALLOC_QUEUE_GWS, queue_id=queue_id,
                              num_gws=num_gws).first_gws)

    def create_event(self, event_type: int, auto_reset: int = 1, event_page_offset: int = 0,
                     node_id: int = 0) -> Any:
        """CREATE_EVENT; returns the args (event_id, event_slot_index, event_trigger_data)."""
        return self.ioctl(kfd.AMDKFD_IOC_CREATE_EVENT, event_type=event_type, auto_reset=auto_reset,
                          event_page_offset=event_page_offset, node_id=node_id)

    def destroy_event(self, event_id: int) -> None:
        """DESTROY_EVENT."""
        self.ioctl(kfd.AMDKFD_IOC_DESTROY_EVENT, event_id=event_id)

    def set_event(self, event_id: int) -> None:
        """SET_EVENT (wakes waiters of a signal event from the CPU)."""
        self.ioctl(kfd.AMDKFD_IOC_SET_EVENT, event_id=event_id)

    def wait_events(self, event_ids: list[int], timeout_ms: int) -> tuple[int, Any]:
        """WAIT_EVENTS for any of `event_ids`; returns (wait_result, kfd_event_data array)."""
        data = (kfd.kfd_event_data * len(event_ids))()
        for d, eid in zip(data, event_ids):
            d.event_id = eid
        # An interrupted wait (EINTR: a signal handler ran; EAGAIN) is retried for the time left.
        deadline = time.monotonic() + max(0.0, timeout_ms) / 1000.0
        while True:
            left = max(0, int((deadline - time.monotonic()) * 1000.0))
            try:
                r = self.ioctl(kfd.AMDKFD_IOC_WAIT_EVENTS, events_ptr=ctypes.addressof(data),
                               num_events=len(event_ids), wait_for_all=0, timeout=left)
            except IoctlError as e:
                if e.errno in (E.EINTR, E.EAGAIN):
                    continue
                raise
            return r.wait_result, data

    def close(self) -> None:
        """Closes /dev/kfd (the kernel then tears down whatever is left)."""
        self.os.close(self.fd)
