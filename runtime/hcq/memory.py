"""Device memory: buffers, the allocator contract, and small sub-allocators (signals, kernel
arguments).

A `Buffer` is a GPU virtual address range with an optional CPU mapping. Drivers implement the two
hooks of `Allocator` (`_alloc`, `_free`); the base class keeps the set of live buffers so that
`Device.close` can release every one, in reverse order of allocation.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.hcq.errors import DeviceClosed, HCQError, HCQMemoryError

if TYPE_CHECKING:
    from runtime.hcq.device import Device

PAGE_B = 4096


def round_up(x: int, align: int) -> int:
    """`x` rounded up to a multiple of `align` (a positive integer)."""
    return (x + align - 1) // align * align


class MemKind(enum.Enum):
    """Where a buffer lives. VRAM: device memory. GTT: system memory the GPU reaches over the bus,
    mapped uncached (rings, signals, staging). HOST: existing host memory registered with the
    GPU."""

    VRAM = "vram"
    GTT = "gtt"
    HOST = "host"


@dataclass(frozen=True)
class BufferSpec:
    """What kind of memory to allocate. `cpu_access`: the CPU needs a mapping (for VRAM: a BAR
    mapping). `uncached`: coherent and uncached (for memory both sides poll). `executable`: code."""

    kind: MemKind = MemKind.VRAM
    cpu_access: bool = False
    uncached: bool = False
    executable: bool = False


@dataclass(eq=False)
class Buffer:
    """A GPU virtual address range. `view` is the CPU mapping, when there is one.

    Sub-buffers made with `slice` share the parent's memory and are not freed on their own.
    """

    device: "Device" = field(repr=False)
    va: int
    size: int
    spec: BufferSpec = BufferSpec()
    view: memoryview | None = field(default=None, repr=False)
    handle: Any = field(default=None, repr=False)  # driver object (KFD handle, RM memory, ...)
    base: "Buffer | None" = field(default=None, repr=False)
    freed: bool = False
    #: for a peer mapping (`Device.map_peer`): the other device's buffer this one shows
    peer_of: "Buffer | None" = field(default=None, repr=False)
    #: this buffer's peer mappings on other devices (unmapped when it is freed)
    mappings: "list[Buffer]" = field(default_factory=list, repr=False)

    def slice(self, offset: int, size: int | None = None) -> "Buffer":
        """The sub-range [offset, offset+size) as a buffer sharing this one's memory."""
        if size is None:
            size = self.size - offset
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(f"slice [{offset:#x}, +{size:#x}) is outside a "
                             f"{self.size:#x}-B buffer")
        view = self.view[offset:offset + size] if self.view is not None else None
        return Buffer(self.device, self.va + offset, size, self.spec, view, self.handle,
                      self.base or self)

    def cpu_view(self) -> memoryview:
        """The CPU mapping; raises if the buffer has none (allocate with cpu_access=True)."""
        self._check_live()
        if self.view is None:
            raise HCQError(f"{self!r} has no CPU mapping (allocate it with cpu_access=True)")
        return self.view

    def _check_live(self) -> None:
        if self.freed or (self.base is not None and self.base.freed):
            raise HCQError(f"use of freed buffer {self!r}")

    def __repr__(self) -> str:
        return f"Buffer(va={self.va:#x}, size={self.size:#x}, {self.spec.kind.value}, " \
               f"{self.device.name})"


class Allocator:
    """Device-memory allocator contract. Subclasses implement `_alloc` and `_free`; this class
    tracks live buffers for `release_all`, rejects double frees, and counts bytes in use."""

    def __init__(self, device: "Device") -> None:
        self.device = device
        self._live: dict[int, Buffer] = {}  # id(buffer) -> buffer, insertion-ordered
        self.bytes_in_use = 0

    def alloc(self, size: int, spec: BufferSpec = BufferSpec()) -> Buffer:
        """Allocates at least `size` bytes (rounded up to a page)."""
        if self.device.closed:
            raise DeviceClosed(f"{self.device.name} is closed")
        if size <= 0:
            raise ValueError(f"allocation size must be positive, got {size}")
        buf = self._alloc(round_up(size, PAGE_B), spec)
        # Callers see what they asked for; the driver keeps the rounded size in its handle.
        buf.size = size
        if buf.view is not None:
            buf.view = buf.view[:size]
        self._live[id(buf)] = buf
        self.bytes_in_use += size
        return buf

    def free(self, buf: Buffer) -> None:
        """Releases a buffer from `alloc`; freeing twice or freeing a sub-buffer is an error."""
        if buf.base is not None:
            raise HCQError(f"{buf!r} is a slice; free the buffer it was sliced from")
        if buf.freed or id(buf) not in self._live:
            raise HCQError(f"double free (or foreign buffer) {buf!r}")
        for m in list(buf.mappings):  # peers stop seeing it before it goes away
            m.device.unmap_peer(m)
        del self._live[id(buf)]
        self.bytes_in_use -= buf.size
        buf.freed = True
        self._free(buf)

    def release_all(self) -> None:
        """Frees every live buffer, newest first (used by Device.close)."""
        for buf in reversed(list(self._live.values())):
            self.free(buf)

    @property
    def live_count(self) -> int:
        """Number of buffers allocated and not yet freed."""
        return len(self._live)

    def _alloc(self, size: int, spec: BufferSpec) -> Buffer:
        raise NotImplementedError(f"{type(self).__name__} must implement _alloc")

    def _free(self, buf: Buffer) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _free")


class SlotPool:
    """Fixed-size slots carved out of one CPU-visible buffer (signals: 16 B each)."""

    def __init__(self, buf: Buffer, slot_B: int) -> None:
        self.buf, self.slot_B = buf, slot_B
        self._free = list(range(buf.size // slot_B - 1, -1, -1))

    def take(self) -> int:
        """Byte offset of a free slot; raises HCQMemoryError when the pool is exhausted."""
        if not self._free:
            raise HCQMemoryError(f"slot pool of {self.buf.size // self.slot_B} slots is exhausted")
        return self._free.pop() * self.slot_B

    def give(self, offset: int) -> None:
        """Returns a slot from `take`."""
        self._free.append(offset // self.slot_B)

    @property
    def free_count(self) -> int:
        """Slots available."""
        return len(self._free)


class RingArena:
    """Bump allocation from a CPU-visible buffer for per-submission data (kernel arguments).

    When the arena wraps, memory from the previous lap may still be read by the GPU, so the device
    is synchronized first; with a large arena this happens once every few thousand launches.
    """

    def __init__(self, buf: Buffer) -> None:
        self.buf = buf
        self._off = 0

    def take(self, size: int, align: int = 16) -> tuple[int, memoryview]:
        """(GPU address, CPU view) of `size` fresh bytes aligned to `align`."""
        off = round_up(self._off, align)
        if off + size > self.buf.size:
            if size > self.buf.size:
                raise HCQMemoryError(f"{size} B does not fit a {self.buf.size}-B argument arena")
            self.buf.device.synchronize()
            off = 0
        self._off = off + size
        return self.buf.va + off, self.buf.cpu_view()[off:off + size]
