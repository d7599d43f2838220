"""GPU virtual memory of a mock device.

A set of non-overlapping mappings, each a GPU virtual address range backed by a numpy uint8 array.
The CPU side of the mock (the seam's mmap) hands out views of the same arrays, so a CPU store is
immediately visible to the mock GPU, as with coherent host memory. Accesses outside every mapping
raise `PageFault`, which the
mock GPUs turn into the device fault a real GPU would report.
"""
from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np


_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_PAGES_KEPT = 1024  # pages whose mapping `MockMemory.find` remembers


class PageFault(Exception):
    """A GPU access to an address that no mapping covers (or that runs past the end of one)."""

    def __init__(self, va: int, size: int, access: str, detail: str = "") -> None:
        self.va, self.size, self.access = va, size, access
        msg = f"GPU page fault: {access} of {size} B at VA {va:#x} is not mapped"
        super().__init__(msg + (f" ({detail})" if detail else ""))


@dataclass
class Mapping:
    va: int
    data: np.ndarray  # uint8, len == size
    end: int = field(init=False)  # one past the last address (the data is never replaced)

    def __post_init__(self) -> None:
        self.end = self.va + len(self.data)


class MockMemory:
    """Non-overlapping VA → numpy-backed mappings with scalar and vectorised (per-lane) access."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._maps: list[Mapping] = []
        #: the machine's host-race watch (host_races.HostRaces), told of every store made here
        self.races: Any = None
        #: changes whenever a mapping is added or removed: what was checked against the mappings
        #: may be remembered under it
        self.generation = 0
        #: the object whose `generation` attribute is this memory's (a wrapper that forwards
        #: to a MockMemory names the MockMemory: one attribute read instead of a property)
        self.generation_source = self
        # the mapping the last look-up found, and those look-ups found by the 4 KiB page of the
        # address looked up: the command processors' look-ups go to a few mappings (rings,
        # signals, argument blocks, code) again and again, often to one several times in a row
        # (droppable caches, emptied when the mappings change)
        self._last: Mapping | None = None
        self._pages: dict[int, Mapping] = {}

    # -- mapping management
    def map(self, va: int, size: int, data: np.ndarray | None = None) -> np.ndarray:
        """Maps [va, va+size); returns the backing array (zero-filled unless `data` is given)."""
        if size <= 0:
            raise ValueError(f"mapping size must be positive, got {size}")
        if data is None:
            data = np.zeros(size, dtype=np.uint8)
        elif data.dtype != np.uint8 or data.ndim != 1 or len(data) != size \
                or not data.flags.c_contiguous:
            raise ValueError("backing must be a contiguous 1-D uint8 array of the mapping's size")
        i = bisect.bisect_right(self._bases, va)
        if i > 0 and self._maps[i - 1].end > va:
            raise ValueError(f"mapping at {va:#x} overlaps the one at {self._maps[i - 1].va:#x}")
        if i < len(self._maps) and va + size > self._maps[i].va:
            raise ValueError(f"mapping at {va:#x} overlaps the one at {self._maps[i].va:#x}")
        self._bases.insert(i, va)
        self._maps.insert(i, Mapping(va, data))
        self.generation += 1
        self._last = None
        self._pages.clear()
        return data

    def unmap(self, va: int) -> None:
        i = bisect.bisect_left(self._bases, va)
        if i == len(self._bases) or self._bases[i] != va:
            raise ValueError(f"no mapping starts at {va:#x}")
        del self._bases[i], self._maps[i]
        self.generation += 1
        self._last = None
        self._pages.clear()

    def mappings(self) -> list[Mapping]:
        return list(self._maps)

    def find(self, va: int, size: int = 1, access: str = "access") -> tuple[np.ndarray, int]:
        """(backing array, offset) of [va, va+size); PageFault unless it lies inside one mapping."""
        m = self._last
        if m is not None and m.va <= va and va + size <= m.end:
            return m.data, va - m.va
        m = self._pages.get(va >> 12)
        if m is not None and m.va <= va and va + size <= m.end:
            self._last = m
            return m.data, va - m.va
        i = bisect.bisect_right(self._bases, va) - 1
        if i < 0:
            raise PageFault(va, size, access)
        m = self._maps[i]
        if va + size > m.end:
            detail = f"runs {va + size - m.end} B past the mapping at {m.va:#x}+{len(m.data):#x}" \
                if va < m.end else ""
            raise PageFault(va, size, access, detail)
        if len(self._pages) >= _PAGES_KEPT:
            self._pages.clear()
        self._pages[va >> 12] = self._last = m
        return m.data, va - m.va

    # -- scalar access
    def view(self, va: int, size: int, access: str = "access") -> np.ndarray:
        data, off = self.find(va, size, access)
        return data[off:off + size]

    def read(self, va: int, size: int) -> bytes:
        return self.view(va, size, "read").tobytes()

    def write(self, va: int, payload: bytes | bytearray | memoryview | np.ndarray) -> None:
        src = np.frombuffer(payload, dtype=np.uint8) if not isinstance(payload, np.ndarray) \
            else payload.view(np.uint8).reshape(-1)
        self.view(va, len(src), "write")[:] = src
        if self.races is not None:
            self.races.gpu_wrote()

    # struct reads and writes the backing buffer in place: several times cheaper than numpy
    # scalar views, and the command processors do several per packet. (numpy arrays have the buffer
    # protocol; numpy's stubs do not say so before Python 3.12, hence the arg-type ignores.)
    def read_u32(self, va: int) -> int:
        data, off = self.find(va, 4, "read")
        return _U32.unpack_from(data, off)[0]  # type: ignore[arg-type,no-any-return]

    def read_u64(self, va: int) -> int:
        data, off = self.find(va, 8, "read")
        return _U64.unpack_from(data, off)[0]  # type: ignore[arg-type,no-any-return]

    def write_u32(self, va: int, value: int) -> None:
        data, off = self.find(va, 4, "write")
        _U32.pack_into(data, off, value & 0xFFFFFFFF)  # type: ignore[arg-type]
        if self.races is not None:
            self.races.gpu_stored(va, 4)

    def write_u64(self, va: int, value: int) -> None:
        data, off = self.find(va, 8, "write")
        _U64.pack_into(data, off, value & 0xFFFFFFFFFFFFFFFF)  # type: ignore[arg-type]
        if self.races is not None:
            self.races.gpu_stored(va, 8)

    # -- vectorised access: one address per lane
    def _locate(self, addrs: np.ndarray, nbytes: int, access: str) -> tuple[np.ndarray, np.ndarray]:
        """Mapping index and offset for each address; raises PageFault naming the first bad lane."""
        addrs = addrs.astype(np.uint64, copy=False)
        bases = np.asarray(self._bases, dtype=np.uint64)
        idx = np.searchsorted(bases, addrs, side="right").astype(np.int64) - 1
        ends = np.asarray([m.end for m in self._maps], dtype=np.uint64)
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        if len(bases):
            ok &= (addrs + np.uint64(nbytes)) <= ends[safe]
        else:
            ok[:] = False
        if not ok.all():
            bad = int(np.argmin(ok))
            raise PageFault(int(addrs[bad]), nbytes, access, f"lane {bad} of {len(addrs)}")
        return safe, (addrs - bases[safe]).astype(np.int64)

    def gather(self, addrs: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
        """Loads one element of `dtype` from each address (any alignment)."""
        dt = np.dtype(dtype)
        out = np.empty(len(addrs), dtype=dt)
        if len(addrs) == 0:
            return out
        idx, offs = self._locate(addrs, dt.itemsize, "read")
        raw = out.view(np.uint8).reshape(-1, dt.itemsize)
        lanes = np.arange(dt.itemsize, dtype=np.int64)
        for mi in np.unique(idx):
            sel = idx == mi
            data = self._maps[int(mi)].data
            raw[sel] = data[offs[sel][:, None] + lanes]
        return out

    def scatter(self, addrs: np.ndarray, values: np.ndarray) -> None:
        """Stores values[i] at addrs[i]; on overlap the later lane wins, as in hardware lane order."""
        if len(addrs) == 0:
            return
        values = np.ascontiguousarray(values)
        size = values.dtype.itemsize
        idx, offs = self._locate(addrs, size, "write")
        raw = values.view(np.uint8).reshape(-1, size)
        lanes = np.arange(size, dtype=np.int64)
        for mi in np.unique(idx):
            sel = idx == mi
            self._maps[int(mi)].data[offs[sel][:, None] + lanes] = raw[sel]
