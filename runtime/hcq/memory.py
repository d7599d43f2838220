"""Device memory: buffers, the allocator contract, and small sub-allocators (signals, kernel
arguments).

A `Buffer` is a GPU virtual address range with an optional CPU mapping. Drivers implement the two
hooks of `Allocator` (`_alloc`, `_free`); the base class keeps the set of live buffers so that
`Device.close` can release every one, in reverse order of allocation.
"""
from __future__ import annotations

import enum
import logging
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.hcq.errors import ArgumentError, DeviceClosed, HCQError, HCQMemoryError

if TYPE_CHECKING:
    from runtime.hcq.device import Device

_log = logging.getLogger("runtime.hcq")

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
    #: this buffer's peer mappings on other devices (unmapped when it is freed); None until the
    #: first, so that making a buffer or a slice costs no list
    mappings: "list[Buffer] | None" = field(default=None, repr=False)

    def slice(self, offset: int, size: int | None = None) -> "Buffer":
        """The sub-range [offset, offset+size) as a buffer sharing this one's memory."""
        for what, x in (("offset", offset), ("size", size)):
            if x is not None and type(x) is not int:
                try:
                    operator.index(x)
                except TypeError:
                    raise ArgumentError(f"slice: {what} must be an integer number of bytes, got "
                                        f"{type(x).__name__} {x!r}") from None
        offset = operator.index(offset)
        if size is None:
            size = self.size - offset
        size = operator.index(size)
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ArgumentError(f"slice [{offset:#x}, +{size:#x}) is outside a "
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
            raise HCQMemoryError(f"use of freed buffer {self!r}")

    def __repr__(self) -> str:
        return f"Buffer(va={self.va:#x}, size={self.size:#x}, {self.spec.kind.value}, " \
               f"{self.device.name})"


@dataclass(frozen=True)
class PoolStats:
    """What the caching allocator did: `hits` allocations served from freed memory (no ioctl),
    `misses` that went to the driver, `cached_B` bytes held for reuse now."""

    hits: int
    misses: int
    cached_B: int

    @property
    def hit_rate(self) -> float:
        """Fraction of allocations served from the cache (0.0 before the first one)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class Allocator:
    """Device-memory allocator contract. Subclasses implement `_alloc` and `_free`; this class
    tracks live buffers for `release_all`, rejects double frees, foreign buffers and bad sizes,
    counts bytes in use, and caches freed memory.

    Caching: a freed buffer's memory is kept (up to `cache_limit_B` bytes in all) and handed to the
    next allocation of the same rounded size and `BufferSpec` without a driver call, as a new
    `Buffer` object (the freed one stays unusable). `trim()` gives the cached memory back;
    an allocation the driver refuses trims and retries once. Zero-size allocations are allowed:
    they own no memory and have address 0."""

    def __init__(self, device: "Device", cache_limit_B: int = 0) -> None:
        self.device = device
        self._live: dict[int, Buffer] = {}  # id(buffer) -> buffer, insertion-ordered
        self._raw: dict[int, Buffer] = {}   # id(buffer) -> the driver buffer it was cut from
        self._zero: set[int] = set()        # ids of live zero-size buffers
        self._cache: dict[tuple[int, BufferSpec], list[Buffer]] = {}
        self.cache_limit_B = cache_limit_B
        self.cached_B = 0
        self.hits = self.misses = 0
        self.bytes_in_use = 0

    def alloc(self, size: int, spec: BufferSpec = BufferSpec()) -> Buffer:
        """Allocates at least `size` bytes (rounded up to a page); 0 gives an empty buffer."""
        if self.device.closed:
            raise DeviceClosed(f"{self.device.name} is closed")
        if type(size) is not int:
            try:
                size = operator.index(size)  # numpy integers
            except TypeError:
                raise HCQMemoryError(f"alloc: size must be an integer number of bytes, got "
                                     f"{type(size).__name__} {size!r}") from None
        if size < 0:
            raise HCQMemoryError(f"alloc: size must be >= 0, got {size}")
        if size == 0:
            buf = Buffer(self.device, 0, 0, spec, memoryview(bytearray(0)) if spec.cpu_access
                         else None)
            self._zero.add(id(buf))
            return buf
        rounded = round_up(size, PAGE_B)
        key = (rounded, spec)
        cached = self._cache.get(key)
        if cached:
            raw = cached.pop()
            self.cached_B -= rounded
            self.hits += 1
        else:
            try:
                raw = self._alloc_hcq(rounded, spec)
            except HCQMemoryError:
                if not self.cached_B:
                    raise
                self.trim()
                raw = self._alloc_hcq(rounded, spec)
            self.misses += 1
            if _log.isEnabledFor(logging.DEBUG):  # a driver call: the pool's hits are not logged
                _log.debug("%s: allocated %d B of %s at %#x from the driver", self.device.name,
                           rounded, spec.kind.value, raw.va)
        # Callers see what they asked for; the driver's buffer keeps the rounded size.
        view = raw.view[:size] if raw.view is not None else None
        buf = Buffer(self.device, raw.va, size, spec, view, raw.handle)
        self._live[id(buf)] = buf
        self._raw[id(buf)] = raw
        self.bytes_in_use += size
        return buf

    def _alloc_hcq(self, size: int, spec: BufferSpec) -> Buffer:
        """`_alloc`, with an OS error the driver did not translate (a failed mmap, say) raised as
        the HCQMemoryError it is."""
        try:
            return self._alloc(size, spec)
        except HCQError:
            raise
        except OSError as e:
            raise HCQMemoryError(f"{self.device.name}: cannot allocate {size:#x} B of "
                                 f"{spec.kind.value}: {e}") from e

    def _check_own(self, buf: Buffer) -> None:
        if not isinstance(buf, Buffer):
            raise HCQMemoryError(f"free: expected a Buffer from alloc, got {type(buf).__name__}")
        if buf.device is not self.device:
            raise HCQMemoryError(f"free: {buf!r} belongs to {buf.device.name}, not "
                                 f"{self.device.name}")
        if buf.base is not None:
            raise HCQMemoryError(f"{buf!r} is a slice; free the buffer it was sliced from")
        if buf.freed or (id(buf) not in self._live and id(buf) not in self._zero):
            raise HCQMemoryError(f"double free (or foreign buffer) {buf!r}")

    def free(self, buf: Buffer) -> None:
        """Releases a buffer from `alloc` (into the cache when it has room); freeing twice, freeing
        a slice or another device's buffer is an error. If the driver fails to release the memory,
        its error is raised and the buffer stays live (close() tries again)."""
        self._check_own(buf)
        if id(buf) in self._zero:
            self._zero.discard(id(buf))
            buf.freed = True
            return
        if buf.mappings:  # peers stop seeing it before it goes away
            for m in list(buf.mappings):
                m.device.unmap_peer(m)
        raw = self._raw.get(id(buf), buf)
        rounded = round_up(buf.size, PAGE_B)
        if self.cached_B + rounded <= self.cache_limit_B and raw is not buf:
            self._cache.setdefault((rounded, buf.spec), []).append(raw)
            self.cached_B += rounded
        else:
            self._free(raw)  # raises with the buffer still live
        del self._live[id(buf)]
        self._raw.pop(id(buf), None)
        self.bytes_in_use -= buf.size
        buf.freed = True

    def trim(self) -> None:
        """Gives every cached (freed) allocation back to the driver."""
        errors: list[BaseException] = []
        for key in list(self._cache):
            raws = self._cache[key]
            while raws:
                raw = raws.pop()
                self.cached_B -= key[0]
                try:
                    self._free(raw)
                except Exception as e:  # keep releasing; report the first problem
                    errors.append(e)
            del self._cache[key]
        if errors:
            raise errors[0]

    def drain_cache(self) -> list[Buffer]:
        """Empties the cache without freeing: the driver buffers it held, for a driver's
        teardown to release in its own order (with `_free`). Later frees are not cached."""
        self.cache_limit_B = 0
        raws = [raw for raws in self._cache.values() for raw in raws]
        self._cache.clear()
        self.cached_B = 0
        return raws

    def stats(self) -> PoolStats:
        """Cache hits, misses and bytes held (a tensor engine's pool statistics)."""
        return PoolStats(self.hits, self.misses, self.cached_B)

    def release_all(self) -> None:
        """Frees every live buffer, newest first, then the cache (used by Device.close). Keeps
        going past a buffer the driver fails to release and raises the first error at the end."""
        errors: list[BaseException] = []
        saved, self.cache_limit_B = self.cache_limit_B, 0
        try:
            for buf in reversed(list(self._live.values())):
                try:
                    self.free(buf)
                except Exception as e:
                    errors.append(e)
            try:
                self.trim()
            except Exception as e:
                errors.append(e)
        finally:
            self.cache_limit_B = saved
        self._zero.clear()
        if errors:
            raise errors[0]

    @property
    def live_count(self) -> int:
        """Number of buffers allocated and not yet freed (zero-size ones included)."""
        return len(self._live) + len(self._zero)

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

    @property
    def capacity(self) -> int:
        """Slots in the pool."""
        return self.buf.size // self.slot_B


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
            # Taken before anything of the submission is stored: a Ctrl-C during the wait is
            # raised at once and leaves the arena as it was.
            dev = self.buf.device
            dev.submit_lock.interruptible(dev.synchronize)
            off = 0
        self._off = off + size
        return self.buf.va + off, self.buf.cpu_view()[off:off + size]
