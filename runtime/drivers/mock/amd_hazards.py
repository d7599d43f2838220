"""Ordering of the dispatches of one mock PM4 queue, and the data races a missing barrier allows.

The mock runs each dispatch to completion inside the doorbell write, so every stream "works" on
it. Real gfx11 hardware does not wait: the command processor starts the next DISPATCH_DIRECT while
the previous dispatch's waves still run, unless a barrier orders them. This module models the
dispatches of a queue as concurrent until one of these orders them:

- EVENT_WRITE CS_PARTIAL_FLUSH: every earlier dispatch has finished; its writes are in GL2, but a
  later dispatch may still hit stale lines in the per-CU caches until
- ACQUIRE_MEM with GLV_INV and GL1_INV (vector cache and GL1 invalidated), or
- WAIT_REG_MEM satisfied by a value this queue's own end-of-pipe RELEASE_MEM wrote: every dispatch
  before that release has finished (and, when the release carried the GLV/GL1 invalidations, its
  writes are visible).

Each dispatch runs against a `RecordingMemory`, which notes the byte ranges the kernel reads,
writes and updates atomically (per memory instruction: the bounds of its active lanes). A new
dispatch whose ranges meet those of a dispatch not yet ordered before it (read-after-write,
write-after-write, write-after-read, or a plain access against an atomic one) is a hazard; so is a
read of bytes a finished dispatch wrote while the caches were not invalidated since. The PM4
processor turns a hazard into the queue's fault, naming both dispatches and the bytes, so a stream
that is missing a barrier fails its test. Lanes whose addresses could not be bounded (scattered
accesses through several mappings) count as touching every byte, conservatively.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.drivers.mock.memory import MockMemory

Ranges = list[tuple[int, int]]
_EVERYTHING: Ranges = [(0, 1 << 64)]


def merge(ranges: Ranges) -> Ranges:
    """Sorted, disjoint [lo, hi) ranges covering the same bytes."""
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def overlap(a: Ranges, b: Ranges) -> tuple[int, int] | None:
    """The first common [lo, hi) of two merged range lists, or None."""
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            return lo, hi
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return None


class RecordingMemory:
    """Stands in for a `MockMemory` while one dispatch runs: forwards every call and records the
    byte ranges the kernel reads ("read"), writes ("write") and updates atomically ("atomic").
    Instruction fetches are not recorded."""

    def __init__(self, mem: MockMemory) -> None:
        self._mem = mem
        # (see MockMemory.generation_source: the wrapped memory's generation is this one's)
        self.generation_source = getattr(mem, "generation_source", mem)
        self.ranges: dict[str, Ranges] = {"read": [], "write": [], "atomic": []}
        self.unbounded = False

    def written(self) -> Ranges | None:
        """The byte ranges written so far (stores and atomics, merged), None when they are not
        bounded."""
        return None if self.unbounded else merge(self.ranges["write"] + self.ranges["atomic"])

    def compact(self) -> None:
        """Merges the ranges noted so far (a kernel that runs long notes one per access)."""
        for k, rs in self.ranges.items():
            self.ranges[k] = merge(rs)

    def _note(self, va: int, size: int, access: str) -> None:
        rs = self.ranges.get(access)
        if rs is not None and size > 0:
            rs.append((va, va + size))

    def find(self, va: int, size: int = 1, access: str = "access") -> tuple[np.ndarray, int]:
        found = self._mem.find(va, size, access)
        self._note(va, size, access)
        return found

    def view(self, va: int, size: int, access: str = "access") -> np.ndarray:
        out = self._mem.view(va, size, access)
        self._note(va, size, access)
        return out

    def read(self, va: int, size: int) -> bytes:
        self._note(va, size, "read")
        return self._mem.read(va, size)

    def write(self, va: int, payload: Any) -> None:
        self._mem.write(va, payload)
        self._note(va, len(memoryview(payload).cast("B")) if not isinstance(payload, np.ndarray)
                   else payload.nbytes, "write")

    def gather(self, addrs: np.ndarray, dtype: Any) -> np.ndarray:
        out = self._mem.gather(addrs, dtype)
        if len(addrs):
            self._note(int(addrs.min()), int(addrs.max()) - int(addrs.min())
                       + np.dtype(dtype).itemsize, "read")
        return out

    def scatter(self, addrs: np.ndarray, values: np.ndarray) -> None:
        self._mem.scatter(addrs, values)
        if len(addrs):
            self._note(int(addrs.min()), int(addrs.max()) - int(addrs.min())
                       + values.dtype.itemsize, "write")

    def mappings(self) -> list[Any]:
        self.unbounded = True  # the caller indexes the mappings itself: addresses unknown here
        return self._mem.mappings()

    @property
    def generation(self) -> int:
        """The memory's mapping generation (read by the interpreter's memory paths on every
        access: a property costs less than the forwarding below)."""
        return self._mem.generation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mem, name)


@dataclass
class DispatchAccess:
    """What one dispatch touched: merged byte ranges per access kind."""

    seq: int
    pgm: int
    where: str
    reads: Ranges
    writes: Ranges
    atomics: Ranges

    @classmethod
    def of(cls, seq: int, pgm: int, where: str, rec: RecordingMemory) -> "DispatchAccess":
        if rec.unbounded:
            return cls(seq, pgm, where, _EVERYTHING, _EVERYTHING, [])
        r = rec.ranges
        return cls(seq, pgm, where, merge(r["read"]), merge(r["write"]), merge(r["atomic"]))

    def describe(self) -> str:
        return f"dispatch #{self.seq} of the program at {self.pgm:#x} ({self.where})"


class HazardError(Exception):
    """A data race between dispatches the queue did not order; the message names both."""


@dataclass
class QueueOrdering:
    """The ordering state of one PM4 queue (see the module docstring)."""

    running: list[DispatchAccess] = field(default_factory=list)   # not known to be finished
    uncached: list[DispatchAccess] = field(default_factory=list)  # finished, caches not invalid.
    releases: dict[int, tuple[int, bool]] = field(default_factory=dict)  # addr -> (seq, inv)
    seq: int = 0

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def partial_flush(self) -> None:
        """EVENT_WRITE CS_PARTIAL_FLUSH: every dispatch so far has finished."""
        self.uncached += self.running
        self.running = []

    def invalidate(self) -> None:
        """ACQUIRE_MEM with the vector cache and GL1 invalidated."""
        self.uncached = []

    def release(self, addr: int, invalidates: bool) -> None:
        """An end-of-pipe RELEASE_MEM writing `addr` after every dispatch so far."""
        self.releases[addr] = (self.seq, invalidates)

    def waited(self, addr: int) -> None:
        """A WAIT_REG_MEM on `addr` was satisfied: if this queue's own end-of-pipe release wrote
        it, the dispatches before that release have finished."""
        rel = self.releases.get(addr)
        if rel is None:
            return
        upto, invalidates = rel
        done = [d for d in self.running if d.seq <= upto]
        self.running = [d for d in self.running if d.seq > upto]
        if invalidates:
            self.uncached = [d for d in self.uncached if d.seq > upto]
        else:
            self.uncached += done

    def dispatched(self, pgm: int, where: str, rec: RecordingMemory) -> None:
        """A dispatch of the program at `pgm` finished, having touched what `rec` recorded:
        numbered, checked against the dispatches not ordered before it (HazardError) and added
        to them. One that touched no memory cannot race with any: it is only numbered."""
        seq = self.next_seq()
        r = rec.ranges
        if rec.unbounded or r["read"] or r["write"] or r["atomic"]:
            self.check(DispatchAccess.of(seq, pgm, where, rec))

    def check(self, new: DispatchAccess) -> None:
        """Raises HazardError if `new` races with an unordered dispatch or reads stale caches;
        otherwise `new` joins the running dispatches."""
        for old in self.running:
            for what, mine, theirs in (("read-after-write", new.reads, old.writes),
                                       ("write-after-write", new.writes, old.writes),
                                       ("write-after-read", new.writes, old.reads),
                                       ("read-after-atomic", new.reads, old.atomics),
                                       ("write-after-atomic", new.writes, old.atomics),
                                       ("atomic-after-write", new.atomics, old.writes),
                                       ("atomic-after-read", new.atomics, old.reads)):
                hit = overlap(mine, theirs)
                if hit is not None:
                    raise HazardError(
                        f"{what} hazard on bytes [{hit[0]:#x}, {hit[1]:#x}): {new.describe()} "
                        f"and {old.describe()} may run at the same time: no barrier orders them "
                        "(EVENT_WRITE CS_PARTIAL_FLUSH after the first dispatch, or a WAIT_REG_MEM "
                        "on its end-of-pipe release)")
        for old in self.uncached:
            hit = overlap(new.reads, old.writes) or overlap(new.atomics, old.writes)
            if hit is not None:
                raise HazardError(
                    f"stale-cache hazard on bytes [{hit[0]:#x}, {hit[1]:#x}): {new.describe()} "
                    f"reads what {old.describe()} wrote, but the per-CU caches were not "
                    "invalidated in between (ACQUIRE_MEM with GLV_INV and GL1_INV)")
        self.running.append(new)
