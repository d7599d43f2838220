"""Host writes that race the mock GPUs' kernels: the host side of a missing wait.

A host that writes a buffer through its CPU mapping after launching a kernel that uses it, but
before that kernel has finished, gets whatever the timing gives on a real GPU: the kernel may see
the old bytes, the new ones or a mix. The mock GPUs run asynchronously, so the race shows there as
a wrong value too; where the mock can see it, it is also reported, as a `HostHazard` warning
naming the allocation, the bytes and the kernel.

What the mock can see: memory that a kernel's arguments point to, from the moment the mock knows
the kernel (its queue is blocked behind a wait and the kernel's launch is already in the ring:
"queued"; or the kernel has run a time slice and has more to run: "running") until the kernel
runs on. The watched allocations (the ones its argument pointers fall into; of one larger than
`MAX_WATCH_B`, that many bytes from where the pointer points) are copied then and compared when
the kernel continues; bytes that changed although no engine of the machine ran meanwhile
(nothing but small semaphore and signal stores, which are logged and left out) were written by
the host. Both mocks record the byte ranges a watched kernel writes (the AMD mock every dispatch,
amd_hazards.RecordingMemory; the NVIDIA mock a PTX grid from when it is watched), so a write
made while a time slice ran is seen too: bytes that changed which the kernel did not write
itself. Where the GPU also knows everything the kernel touched, only changes there are
reported.

What it cannot see: a host read (a plain load leaves no trace: a read too early shows as a stale
value), writes while some other engine also ran (the comparison is skipped then rather than
guessed), bytes of a large allocation outside the watched window, memory reached only through
pointers the kernel loads from memory, and kernels that start and finish in one go without
having been queued. Nothing here runs for a real GPU: the drivers never import the mock.
A host that deliberately writes memory a running kernel polls (a flag) is reported too; filter
the warning in such a test.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Hashable, Iterable

import numpy as np

from runtime.drivers.mock.memory import MockMemory, PageFault

Ranges = list[tuple[int, int]]

#: allocations up to this size are watched whole (each watch copies what it watches); of a
#: larger one, this many bytes from where the kernel's argument points
MAX_WATCH_B = 1 << 20
#: reports kept in `HostRaces.hazards`
_KEEP = 64


class HostHazard(UserWarning):
    """The host wrote memory that a kernel queued or running on a mock GPU uses (a missing
    wait between the launch and the host's write)."""


@dataclass
class _Region:
    va: int              # where the watched bytes start
    data: np.ndarray     # their live bytes
    copy: np.ndarray     # as they were when last looked at
    alloc_va: int        # the allocation (mock mapping) that an argument points into
    alloc_B: int         # its size


@dataclass
class _Watch:
    kernel: str
    state: str           # "queued" or "running"
    regions: list[_Region]
    epoch: int
    stores: int
    changed: Ranges = field(default_factory=list)   # (lo, hi, state) found so far
    states: list[str] = field(default_factory=list)


class HostRaces:
    """One per mock machine (every engine of every mock GPU of it counts as the GPU's work).
    Called by the mock GPUs under the machine's lock."""

    def __init__(self) -> None:
        self.epoch = 0                         # bumped by every engine step that writes memory
        self._stores: Ranges = []              # small GPU stores while anything is watched
        self._watches: dict[Hashable, _Watch] = {}
        #: the reports so far (newest last, at most 64), as the warnings carried them
        self.hazards: list[str] = []

    # ------------------------------------------------------------------ what the GPUs did
    def gpu_wrote(self) -> None:
        """An engine ran a step that may write memory anywhere (a kernel slice, a copy, a fill)."""
        self.epoch += 1

    def gpu_stored(self, va: int, size: int) -> None:
        """An engine stored a few bytes (a signal, a semaphore, a timestamp)."""
        if self._watches:
            self._stores.append((va, va + size))

    # ------------------------------------------------------------------ kernels
    def watching(self, key: Hashable) -> bool:
        return key in self._watches

    def watch(self, key: Hashable, kernel: str, pointers: Iterable[int], mem: MockMemory,
              state: str, skip_va: Iterable[int] = ()) -> None:
        """Starts watching the allocations `pointers` fall into (but not those holding
        `skip_va`: the argument block itself, which the host fills for later launches) for the
        kernel `key` (a no-op if it is watched already)."""
        if key in self._watches:
            return
        skip = {self._base(mem, va) for va in skip_va}
        regions: list[_Region] = []
        seen: set[int] = set()
        for p in sorted(pointers):
            base = self._base(mem, p)
            if base is None or base in skip:
                continue
            data, off = mem.find(base, 1)
            whole = data[off:]
            # An allocation too large to copy whole: the window from where the argument points
            # (a kernel's pointer is most often where its data starts), unless an earlier
            # window of it covers that place already.
            start = base if len(whole) <= MAX_WATCH_B else p
            if start in seen or any(r.alloc_va == base and r.va <= p < r.va + len(r.data)
                                    for r in regions):
                continue
            seen.add(start)
            part = whole[start - base:start - base + MAX_WATCH_B]
            regions.append(_Region(start, part, part.copy(), base, len(whole)))
        if regions:
            self._watches[key] = _Watch(kernel, state, regions, self.epoch, len(self._stores))

    def resume(self, key: Hashable) -> None:
        """The kernel `key` is about to run (its first or next time slice): bytes of its
        allocations that changed since they were looked at, with no engine running meanwhile,
        are noted as the host's."""
        w = self._watches.get(key)
        if w is None:
            return
        if w.epoch != self.epoch:
            w.epoch = -1  # other engines ran: the copies say nothing about the host now
            return
        self._note_changes(w, [], refresh=True)
        w.stores = len(self._stores)

    def _note_changes(self, w: _Watch, written: Ranges, refresh: bool = False) -> None:
        """Notes the bytes of `w`'s allocations that differ from its copies, leaving out what
        the kernel itself wrote (`written`) and small GPU stores. With `refresh`, the copies
        become the bytes just compared: the host writes without the machine's lock, so a copy
        taken after the comparison could swallow a write made in between."""
        stores = self._stores[w.stores:]
        for r in w.regions:
            now = r.data.copy() if refresh else r.data
            diff = now != r.copy
            if refresh:
                r.copy = now
            for lo, hi in written:
                a, b = max(lo - r.va, 0), min(hi - r.va, len(diff))
                if a < b:
                    diff[a:b] = False
            pos = np.flatnonzero(diff)
            if not len(pos):
                continue
            lo, hi = r.va + int(pos[0]), r.va + int(pos[-1]) + 1
            if any(s_lo < hi and lo < s_hi for s_lo, s_hi in stores):
                continue  # a signal the GPU wrote lies in there: not the host's for certain
            w.changed.append((lo, hi))
            w.states.append(w.state)

    def _slice_ran(self, w: _Watch, written: Ranges | None, refresh: bool = False) -> None:
        """After a time slice of the kernel: when the kernel's own step was the only engine
        work since `resume` and its writes are known, the other changes are the host's (made
        while the slice ran). With `refresh`, the copies are taken again either way."""
        if written is not None and w.epoch >= 0 and self.epoch == w.epoch + 1:
            self._note_changes(w, written, refresh)
        elif refresh:
            for r in w.regions:
                r.copy = r.data.copy()

    def paused(self, key: Hashable, kernel: str, pointers: Iterable[int], mem: MockMemory,
               skip_va: Iterable[int] = (), written: Ranges | None = None) -> None:
        """The kernel ran a time slice (having written `written`, when known) and has more to
        run: its allocations are looked at again (its own writes are not the host's)."""
        w = self._watches.get(key)
        if w is None:
            self.watch(key, kernel, pointers, mem, "running", skip_va)
            return
        # The name a running kernel is known by now (a queued launch read ahead of its program
        # upload is named by its address only).
        w.state, w.kernel = "running", kernel
        self._slice_ran(w, written, refresh=True)
        w.epoch, w.stores = self.epoch, len(self._stores)

    def finished(self, key: Hashable, touched: Ranges | None = None,
                 written: Ranges | None = None) -> None:
        """The kernel is done: what the host wrote meanwhile is reported (only bytes within
        `touched`, the ranges the kernel read or wrote, when the GPU knows them; `written`, the
        ones it wrote, lets writes during its last slice be seen too)."""
        w = self._watches.pop(key, None)
        if not self._watches:
            self._stores.clear()
        if w is None:
            return
        self._slice_ran(w, written)
        for (lo, hi), state in zip(w.changed, w.states):
            if touched is not None:
                hit = [(max(lo, t_lo), min(hi, t_hi)) for t_lo, t_hi in touched
                       if t_lo < hi and lo < t_hi]
                if not hit:
                    continue
                lo, hi = min(h[0] for h in hit), max(h[1] for h in hit)
            region = next(r for r in w.regions if r.va <= lo < r.va + len(r.data))
            self._report(f"the host wrote bytes [{lo:#x}, {hi:#x}) of the allocation at "
                         f"{region.alloc_va:#x} (+{region.alloc_B:#x}) while {w.kernel}, which "
                         f"uses it, was {state}: wait for the kernel (synchronize, or the launch's "
                         "event) before writing its memory")

    def forget(self, key: Hashable) -> None:
        """The kernel will not run (its queue faulted or was destroyed)."""
        self._watches.pop(key, None)
        if not self._watches:
            self._stores.clear()

    # ------------------------------------------------------------------ helpers
    def _report(self, msg: str) -> None:
        self.hazards.append(msg)
        del self.hazards[:-_KEEP]
        warnings.warn(HostHazard(msg), stacklevel=3)

    @staticmethod
    def _base(mem: MockMemory, va: int) -> int | None:
        """The start of the allocation holding `va`, or None."""
        try:
            _, off = mem.find(va, 1)
        except PageFault:
            return None
        return va - off


def pointers_in(mem: MockMemory, blocks: Iterable[tuple[int, int]]) -> list[int]:
    """The aligned 64-bit values of the (va, size) blocks of GPU memory that are mapped GPU
    addresses: the buffer arguments among a kernel's argument bytes."""
    out: list[int] = []
    for va, size in blocks:
        try:
            data, off = mem.find(va, 1)
        except PageFault:
            continue
        n = min(size, len(data) - off) // 8
        if n > 0:
            out += pointers_among(mem, data[off:off + 8 * n].tobytes())
    return out


def pointers_among(mem: MockMemory, raw: bytes) -> list[int]:
    """The aligned 64-bit values of `raw` that are mapped GPU addresses."""
    out: list[int] = []
    for q in np.frombuffer(raw[:len(raw) // 8 * 8], np.uint64).tolist():
        if q >= 1 << 16:
            try:
                mem.find(q, 1)
            except PageFault:
                continue
            out.append(q)
    return out
