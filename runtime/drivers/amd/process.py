"""amdkfd's per-process event page, shared by every AMDDevice of one kernel.

KFD keeps one event page per process: the second CREATE_EVENT that names a page fails with EINVAL
(kfd_chardev.c, kfd_ioctl_create_event: "Event page is already set"), and a GPU signals an event by
writing its slot in that one page before raising the interrupt. So the first AMD device of a
process allocates the page and registers it; every later device maps the same page on its own GPU
(MAP_MEMORY_TO_GPU with its gpu id) and creates its events without one. The page is freed when the
last device of that kernel leaves.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runtime.hcq.memory import Buffer, BufferSpec, MemKind

if TYPE_CHECKING:
    from runtime.drivers.amd.device import AMDDevice, KfdAllocator

EVENT_PAGE_B = 0x8000  # KFD_SIGNAL_EVENT_LIMIT (4096) slots of 8 B


@dataclass
class EventPage:
    """The process's event page: its buffer (made by the first device, tracked by no allocator)
    and the GPUs it is mapped on."""

    buf: Buffer
    gpus: set[int] = field(default_factory=set)


_pages: dict[int, EventPage] = {}  # id(OSSeam.kernel) -> its page (devices keep the kernel alive)
_lock = threading.Lock()


def join(dev: "AMDDevice") -> tuple[EventPage, bool]:
    """The kernel's event page mapped on `dev`'s GPU; True when `dev` made it (and must name it in
    its first CREATE_EVENT)."""
    with _lock:
        page = _pages.get(id(dev.os.kernel))
        if page is None:
            spec = BufferSpec(MemKind.GTT, cpu_access=True, uncached=True)
            page = EventPage(dev.allocator._alloc(EVENT_PAGE_B, spec), {dev.node.gpu_id})
            _pages[id(dev.os.kernel)] = page
            return page, True
        dev.kfd.map_memory(page.buf.handle.handle, [dev.node.gpu_id])
        page.gpus.add(dev.node.gpu_id)
        return page, False


def leave(dev: "AMDDevice", page: EventPage) -> None:
    """Unmaps the page from `dev`'s GPU; the last device to leave frees it (with its own /dev/kfd:
    buffer handles belong to the process, not to a descriptor)."""
    with _lock:
        gpu = dev.node.gpu_id
        if gpu in page.gpus:
            page.gpus.discard(gpu)
            dev.kfd.unmap_memory(page.buf.handle.handle, [gpu])
        if not page.gpus:
            if _pages.get(id(dev.os.kernel)) is page:
                del _pages[id(dev.os.kernel)]
            alloc: "KfdAllocator" = dev.allocator  # type: ignore[assignment]
            alloc._undo(page.buf.handle)
