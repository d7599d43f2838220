"""Register files of many waves, and wave sets: waves that execute in lock step.

`Machine` holds the state of every wave of a batch of workgroups: VGPRs as uint32 [nvgpr, waves,
32] (one [waves, 32] plane per register, so an instruction touches contiguous memory), SGPRs as
uint32 [128, waves], SCC as bool [waves], and the batch's LDS. A `WaveSet` is a set of waves at the
same program counter; every instruction executes once per wave set over all of its waves' lanes.

Lane masks (EXEC, VCC and any SGPR a VALU compare writes) are kept in two forms: packed in the
SGPR file (what SALU reads) and unpacked as bool [waves, 32] (what VALU needs). A wave set caches
the unpacked form and packs lazily, so `v_cmp` → `v_cndmask` or `v_add_co` → `v_add_co_ci`
never pack or unpack at all.
"""
from __future__ import annotations

import operator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from runtime.drivers.mock.memory import MockMemory, PageFault

from .decode import EXEC_LO, NULL
from .errors import KernelFault

if TYPE_CHECKING:
    from .gws import Blocked, GwsRange

ALL = slice(None)
U32 = np.uint32


def unpack_lanes(words: np.ndarray) -> np.ndarray:
    """uint32 [n] → bool [n, 32], bit i of word w → [w, i]."""
    raw = np.ascontiguousarray(words, dtype="<u4").view(np.uint8).reshape(len(words), 4)
    return np.unpackbits(raw, axis=1, bitorder="little").view(bool)


def pack_lanes(mask: np.ndarray) -> np.ndarray:
    """bool [n, 32] → uint32 [n] (inverse of unpack_lanes)."""
    mask = np.ascontiguousarray(mask, dtype=bool)
    return np.packbits(mask, axis=1, bitorder="little").view("<u4").reshape(len(mask))


# One wave's lane masks by their word, and words by their mask: a loop that narrows EXEC lane by
# lane (a compare-and-swap retry loop) unpacks and packs the same few dozen masks over and over,
# and a dictionary look-up replaces numpy's bit unpacking and packing. Droppable caches (cleared
# when full); the cached arrays are read-only.
_MASKS_OF_WORDS: dict[int, tuple[np.ndarray, int]] = {}
_WORDS_OF_MASKS: dict[bytes, int] = {}
_MASK_CACHE_MAX = 4096


def one_wave_mask(word: int) -> tuple[np.ndarray, int]:
    """(bool [1, 32] read-only, number of lanes set) of a 32-bit lane mask."""
    got = _MASKS_OF_WORDS.get(word)
    if got is None:
        if len(_MASKS_OF_WORDS) >= _MASK_CACHE_MAX:
            _MASKS_OF_WORDS.clear()
        mask = unpack_lanes(np.array([word], dtype=np.uint32))
        mask.flags.writeable = False
        got = _MASKS_OF_WORDS[word] = (mask, bin(word).count("1"))
    return got


_LANES_OF_WORDS: dict[int, tuple[tuple[int, ...], Callable[[list[int]], Sequence[int]]]] = {}


class _Pick1:
    """The value of one lane as a 1-tuple (itemgetter of one index gives the bare value); none
    for a negative lane."""

    __slots__ = ("lane",)

    def __init__(self, lane: int) -> None:
        self.lane = lane

    def __call__(self, vals: list[int]) -> tuple[int, ...]:
        return (vals[self.lane],) if self.lane >= 0 else ()


def one_wave_lanes(word: int) -> tuple[tuple[int, ...], Callable[[list[int]], Sequence[int]]]:
    """The lanes set in a 32-bit lane mask, in lane order, and a function that picks those
    lanes' values (in that order) out of a list of 32 (a tuple, or a list where the lanes are
    consecutive)."""
    got = _LANES_OF_WORDS.get(word)
    if got is None:
        if len(_LANES_OF_WORDS) >= _MASK_CACHE_MAX:
            _LANES_OF_WORDS.clear()
        lanes = tuple(i for i in range(32) if word >> i & 1)
        pick: Callable[[list[int]], Sequence[int]]
        if len(lanes) == 1:
            pick = _Pick1(lanes[0])
        elif lanes and lanes[-1] - lanes[0] + 1 == len(lanes):
            # (a retry loop's EXEC loses its lowest lanes: a slice of the list is cheaper)
            pick = operator.itemgetter(slice(lanes[0], lanes[-1] + 1))
        elif lanes:
            pick = operator.itemgetter(*lanes)
        else:
            pick = _Pick1(-1)
        got = _LANES_OF_WORDS[word] = (lanes, pick)
    return got


def one_wave_word(mask: np.ndarray) -> int:
    """The 32-bit word of a bool [1, 32] lane mask."""
    key = mask.tobytes()
    word = _WORDS_OF_MASKS.get(key)
    if word is None:
        if len(_WORDS_OF_MASKS) >= _MASK_CACHE_MAX:
            _WORDS_OF_MASKS.clear()
        word = _WORDS_OF_MASKS[key] = int(pack_lanes(mask)[0])
    return word


# Machines given back by finished dispatches, by shape (`Machine.take`): a droppable cache of
# small machines only (registers and LDS up to POOL_MACHINE_MAX_B), a few per shape.
POOL_MACHINE_MAX_B = 64 << 10
POOL_SHAPES = 32
POOL_PER_SHAPE = 4
_POOL: dict[tuple[int, int, int, int, bool], list["Machine"]] = {}


class Machine:
    """Registers, LDS and memory of one batch of workgroups."""

    _cap_waves: int
    _v_store: np.ndarray
    _s_store: np.ndarray
    _lds_store: np.ndarray

    def __init__(self, mem: MockMemory, n_waves: int, n_vgprs: int, n_wgs: int,
                 lds_bytes: int, reuse: "Machine | None" = None, wave64: bool = False) -> None:
        """`reuse`: a machine of an earlier batch whose arrays are big enough to be recycled
        (zeroed), which avoids fresh allocations for every batch of a large dispatch.

        `wave64`: every wave64 is two consecutive rows (`n_waves` counts rows): lanes 0-31 and
        32-63, as the hardware runs a wave64's VALU work in two 32-lane passes. Both rows hold the
        wave's SGPRs; a lane mask (EXEC, VCC, a compare's SGPR pair) keeps lanes 0-31 in SGPR r
        and 32-63 in r+1, so the even row reads r and the odd row r+1."""
        self.mem = mem
        self.wave64 = wave64
        self.n_waves, self.n_vgprs = n_waves, n_vgprs
        self.lds_bytes = lds_bytes
        # One workgroup's worth of padding after the last: inactive lanes of the last workgroup
        # may point past its end, and slicing (mem_lanes.dense_block) reads them along.
        lds_len = (n_wgs + 1) * lds_bytes + 16
        if reuse is not None and reuse._cap_waves >= n_waves and reuse.n_vgprs == n_vgprs \
                and len(reuse._lds_store) >= lds_len:
            self._cap_waves = reuse._cap_waves
            self._v_store, self._s_store = reuse._v_store, reuse._s_store
            self._lds_store = reuse._lds_store
            # Only registers the previous batch wrote can be non-zero.
            for r in reuse.dirty_v:
                self._v_store[r].fill(0)
            for r in reuse.dirty_s:
                self._s_store[r].fill(0)
            self._lds_store[:lds_len].fill(0)
            self._backing: np.ndarray | None = None
            self.SCC = np.zeros(n_waves, dtype=bool)
            self.wave_wg = np.zeros(n_waves, dtype=np.int64)
            self.wave_lds_base = np.zeros(n_waves, dtype=np.uint32)
        else:
            # Every array of the machine in one zeroed allocation (one fill zeroes them again
            # for a kept machine: `_recycle`), 8-byte aligned each.
            self._cap_waves = n_waves
            sizes = (8 * n_waves, 128 * n_vgprs * n_waves, 512 * n_waves, 4 * n_waves,
                     lds_len, n_waves)
            at = [0]
            for size in sizes:
                at.append(at[-1] + -(-size // 8) * 8)
            b = self._backing = np.zeros(at[-1], dtype=np.uint8)
            self.wave_wg = b[at[0]:at[0] + sizes[0]].view(np.int64)
            self._v_store = b[at[1]:at[1] + sizes[1]].view(np.uint32).reshape(n_vgprs, n_waves, 32)
            self._s_store = b[at[2]:at[2] + sizes[2]].view(np.uint32).reshape(128, n_waves)
            self.wave_lds_base = b[at[3]:at[3] + sizes[3]].view(np.uint32)
            self._lds_store = b[at[4]:at[4] + sizes[4]]
            self.SCC = b[at[5]:at[5] + sizes[5]].view(bool)
        # (wave_wg: each wave's workgroup index within the batch; wave_lds_base: its LDS base)
        self.dirty_v: set[int] = set()
        self.dirty_s: set[int] = set()
        self.V = self._v_store[:, :n_waves]
        self.S = self._s_store[:, :n_waves]
        # LDS of all workgroups back to back; a wave's LDS address is offset by its
        # workgroup's base.
        self.lds = self._lds_store[:lds_len]
        self.lds32 = self.lds[:len(self.lds) // 4 * 4].view(np.uint32)
        # Private (scratch) memory: the dispatch's scratch backing memory (set by `execute`).
        self.scratch: ScratchSetup | None = None
        self._scratch_mem: np.ndarray | None = None
        self._scratch_words: np.ndarray | None = None
        # The queue's GWS resources (DispatchRecord.gws; None: no GWS range).
        self.gws: GwsRange | None = None
        # uint32 views of memory mappings by the id of their bytes (words_at)
        self._words: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # words_at's last range: (access, lo, hi, the mapping's words, its VA, the memory's
        # generation); None: none
        self._seen: tuple[str, int, int, np.ndarray, int, int] | None = None
        # (n_waves, n_vgprs, n_wgs, lds_bytes, wave64) for a machine small enough to be kept
        # for the next dispatch of its shape (`take`, `give_back`); None for any other
        self._pool_key: tuple[int, int, int, int, bool] | None = None
        self._planes_all: Planes | None = None   # (planes_of_all)

    def planes_of_all(self) -> "Planes":
        """Planes of a wave set of every wave of the machine: the views and scratch arrays are
        built once per machine (they depend on nothing else), the bound blocks are the new
        wave set's own."""
        P = self._planes_all
        if P is None:
            P = self._planes_all = Planes(self, ALL, self.n_waves)
        else:
            P.bound = {}
        return P

    @classmethod
    def take(cls, mem: MockMemory, n_waves: int, n_vgprs: int, n_wgs: int, lds_bytes: int,
             wave64: bool = False) -> "Machine":
        """A machine for one batch: one given back by an earlier dispatch of the same shape
        (every register, SCC and the LDS zeroed again, as a new machine's are) or a new one.
        Allocating the arrays and their views is most of a small dispatch's set-up."""
        key = (n_waves, n_vgprs, n_wgs, lds_bytes, wave64)
        free = _POOL.get(key)
        if free:
            try:
                m = free.pop()
            except IndexError:   # another GPU's thread took the last one
                pass
            else:
                m._recycle(mem)
                return m
        m = cls(mem, n_waves, n_vgprs, n_wgs, lds_bytes, wave64=wave64)
        if m._backing is not None and m._backing.nbytes <= POOL_MACHINE_MAX_B:
            m._pool_key = key
        return m

    def give_back(self) -> None:
        """The dispatch that took this machine is done with it (it ended without a fault): a
        small machine is kept for the next dispatch of its shape, without its references to
        memory (a closed device's memory is not kept alive by the pool)."""
        key = self._pool_key
        if key is None:
            return
        del self.mem
        self.scratch = self.gws = None
        self._scratch_mem = self._scratch_words = None
        self._words.clear()
        self._seen = None
        free = _POOL.get(key)
        if free is None:
            if len(_POOL) >= POOL_SHAPES:
                _POOL.clear()
            free = _POOL.setdefault(key, [])
        if len(free) < POOL_PER_SHAPE:
            free.append(self)

    def _recycle(self, mem: MockMemory) -> None:
        """The state of a new machine again, on `mem` (every array zeroed whole: a kept machine
        is small, and this does not depend on what the last dispatch marked as written)."""
        self.mem = mem
        self._seen = None
        assert self._backing is not None   # (only machines with one are kept)
        self._backing.fill(0)
        self.dirty_v.clear()
        self.dirty_s.clear()

    def words_at(self, va: int, size: int, access: str) -> tuple[np.ndarray, int] | None:
        """(the uint32 words of the mapping holding [va, va + size), index of va's word) for a
        dword-aligned va; None where no one mapping holds the range or its words cannot be
        viewed (the caller's general path then raises the fault). Views are kept per mapping
        for the machine's life, which is one batch of one dispatch.

        The memory's look-up also notes the range as the dispatch's access (a RecordingMemory,
        for the queue's hazard checks). A range inside the ranges the last look-ups found, of
        the same access, while no mapping has changed, is answered without one: those ranges
        were noted already, and a one-wave loop's loads mostly fall inside them."""
        mem = self.mem
        seen = self._seen
        if seen is not None and seen[1] <= va and va + size <= seen[2] and \
                seen[0] == access and seen[5] == mem.generation:
            return seen[3], (va - seen[4]) >> 2
        try:
            data, at = mem.find(va, size, access)
        except PageFault:
            return None
        got = self._words.get(id(data))
        if got is None or got[0] is not data:
            if len(data) % 4 or data.ctypes.data % 4:
                return None
            got = self._words[id(data)] = (data, data.view(np.uint32))
        words, base = got[1], va - at
        lo, hi = va, va + size
        if seen is not None and seen[3] is words and seen[0] == access and \
                lo <= seen[2] and seen[1] <= hi:
            # (overlapping or touching the last: both were noted, so is their union)
            lo, hi = min(lo, seen[1]), max(hi, seen[2])
        self._seen = (access, lo, hi, words, base, mem.generation)
        return words, at >> 2

    def noted_dwords(self, va: int, access: str, ndw: int = 1) -> np.ndarray | None:
        """A uint32 view whose element i is the ndw little-endian dwords at byte va + i (aligned
        or not; shape [n] for one dword, [n, ndw] for more) over the bytes from va to the end
        of the range words_at found last for `access`, which the dispatch's access record
        holds already: an index whose dwords reach past that range raises IndexError. None
        where va is not inside that range. Valid while the memory's generation stays what it
        is now."""
        seen = self._seen
        if seen is None or seen[0] != access or not seen[1] <= va or \
                seen[5] != self.mem.generation:
            return None
        n = seen[2] - va - 4 * ndw + 1
        if n <= 0:
            return None
        words, at = seen[3], va - seen[4]
        if ndw == 1:
            return np.ndarray((n,), np.uint32, words, at, (1,))
        return np.ndarray((n, ndw), np.uint32, words, at, (1, 4))

    def scratch_words(self) -> np.ndarray:
        """The dispatch's scratch backing memory as uint32 words (slot after slot; see
        scratch_view for the layout), raising the fault for a dispatch without any."""
        sc = self.scratch
        if sc is None or sc.wave_B == 0:
            raise KernelFault("scratch access, but the dispatch has no private segment memory "
                              "(COMPUTE_TMPRING_SIZE.WAVESIZE / COMPUTE_DISPATCH_SCRATCH_BASE are "
                              "unset: the runtime must provide scratch for kernels with a "
                              "private segment)")
        if self._scratch_mem is None:
            data, at = self.mem.find(sc.base_va, sc.slots * sc.wave_B, "scratch")
            self._scratch_mem = data[at:at + sc.slots * sc.wave_B]
        if self._scratch_words is None:
            mem = self._scratch_mem
            self._scratch_words = mem.view(np.uint32) if mem.ctypes.data % 4 == 0 else \
                np.empty(0, np.uint32)
        return self._scratch_words

    def scratch_view(self, lanes: np.ndarray, off: np.ndarray, size: int
                     ) -> tuple[np.ndarray, np.ndarray]:
        """(backing array, int64 byte offsets) of private-segment bytes [off, off+size) of the
        given lanes (batch-wide lane ids). An access must stay inside one dword.

        Layout of a wave's slot (WAVESIZE * 256 B, the wave's index in the batch picks the
        slot): dwords are interleaved across the wave's lanes, so dword d of lane l lies at
        d * 128 + l * 4 (the hardware's scratch swizzle with 4-byte elements and an index
        stride of the wave size: the lanes of a wave touching one private offset hit
        consecutive dwords)."""
        sc = self.scratch
        if sc is None or sc.wave_B == 0:
            raise KernelFault("scratch access, but the dispatch has no private segment memory "
                              "(COMPUTE_TMPRING_SIZE.WAVESIZE / COMPUTE_DISPATCH_SCRATCH_BASE are "
                              "unset: the runtime must provide scratch for kernels with a "
                              "private segment)")
        if self._scratch_mem is None:
            data, at = self.mem.find(sc.base_va, sc.slots * sc.wave_B, "scratch")
            self._scratch_mem = data[at:at + sc.slots * sc.wave_B]
        dword = off >> 2
        if int(dword.max()) * 128 + 128 > sc.wave_B:
            raise PageFault(sc.base_va + int(off.max()), size, "scratch",
                            f"private offset {int(off.max())} is beyond the {sc.wave_B // 32} "
                            "B per lane that COMPUTE_TMPRING_SIZE.WAVESIZE gives a wave32 lane")
        if size > 1 and int(((off & 3) + size).max()) > 4:
            raise KernelFault(f"{size}-byte scratch access crossing a dword boundary (the "
                              "hardware's dword swizzle splits it; not modelled)")
        wave, lane = lanes // 32, lanes % 32
        return self._scratch_mem, wave * sc.wave_B + dword * 128 + lane * 4 + (off & 3)


@dataclass(frozen=True)
class ScratchSetup:
    """A dispatch's scratch: COMPUTE_DISPATCH_SCRATCH_BASE (as a VA), the bytes of one wave's
    slot (COMPUTE_TMPRING_SIZE.WAVESIZE * 256) and the number of slots (TMPRING_SIZE.WAVES,
    which bounds how many waves run at once)."""

    base_va: int
    wave_B: int
    slots: int


class Planes:
    """Typed views of the registers of a wave set whose waves are a slice of a wave32 machine, for
    the instructions' fast paths (views stay valid while the wave set exists: a step indexes one
    register and computes into it, with no per-instruction view building or masked copies).

    `regs[k]` for k < 3 is the VGPR file [nvgpr, n, 32] viewed as uint32, int32 or float32
    (U32_PLANE, I32_PLANE, F32_PLANE); for k = 3 + those, the SGPRs in a shape that broadcasts
    against lanes: `regs[k][r, ...]` gives a 0-d array for one wave (numpy broadcasts a 0-d
    operand at no cost, an [n, 1] one costs time on every call) and [n, 1] otherwise. `s1` is the
    one wave's SGPR row (None for several waves; scalar instructions of one wave run on numpy
    scalars), `w` its index, `scc` the machine's SCC, `dirty_v` the machine's written-VGPR set
    (see Machine), `views[k, i]` the view `regs[k][i]`, kept once built; `tmp` (uint32) and
    `tmp_f` (its float32 view), `tmp64` (int64): one register's worth of scratch a step may
    compute into (intermediates without allocations; nothing survives the step), `tmps` the
    first viewed like VGPR plane k; `bound`: the scheduler's straight-line blocks bound to
    these planes, by the slot they start at."""

    __slots__ = ("regs", "s1", "w", "scc", "dirty_v", "views", "tmp", "tmp_f", "tmp64",
                 "tmps", "bound")

    def __init__(self, m: "Machine", idx: slice, n: int) -> None:
        V = m.V[:, idx]
        first = range(m.n_waves)[idx].start
        S = m.S[:, first] if n == 1 else m.S[:, idx, None]
        self.regs = (V, V.view(np.int32), V.view(np.float32),
                     S, S.view(np.int32), S.view(np.float32))
        self.s1 = S if n == 1 else None
        self.w = first if n == 1 else -1
        self.scc = m.SCC
        self.dirty_v = m.dirty_v
        self.views = RegisterViews(self.regs)
        self.tmp = np.empty((n, 32), dtype=np.uint32)
        self.tmp_f = self.tmp.view(np.float32)
        self.tmps = (self.tmp, self.tmp.view(np.int32), self.tmp_f)   # by VGPR plane
        self.tmp64 = np.empty((n, 32), dtype=np.int64)
        self.bound: dict[int, Any] = {}


class RegisterViews(dict):  # type: ignore[type-arg]
    """`views[k, i]` is `regs[k][i]` of a Planes, built on first use and then kept: a look-up
    here is several times cheaper than numpy building the view again on every instruction."""

    __slots__ = ("regs",)

    def __init__(self, regs: tuple[np.ndarray, ...]) -> None:
        super().__init__()
        self.regs = regs

    def __missing__(self, key: tuple[int, Any]) -> np.ndarray:
        k, i = key
        view: np.ndarray = self.regs[k][i]
        self[key] = view
        return view


U32_PLANE, I32_PLANE, F32_PLANE = range(3)
SGPR_PLANES = 3   # regs[SGPR_PLANES + k]: the SGPRs viewed like VGPR plane k


class WaveSet:
    """Waves at one program counter, stepped together: the interpreter's unit of execution, not a
    workgroup (its waves may come from many workgroups, and it splits and merges as they diverge
    and meet). `idx` selects them in the machine (a slice when it can).

    `planes`: typed register views when the waves are a slice of a wave32 machine (else None);
    `fast`: the same while EXEC has every lane set (VALU fast paths write whole planes)."""

    __slots__ = ("m", "idx", "n", "pc", "lanes", "dirty", "exec", "exec_full", "active",
                 "at_barrier", "parked", "waiting", "planes", "fast", "w1")

    def __init__(self, m: Machine, idx: slice | np.ndarray, pc: int) -> None:
        self.m, self.idx, self.pc = m, idx, pc
        waves = range(m.n_waves)[idx] if isinstance(idx, slice) else idx
        self.n = len(waves)
        # the wave's index when the set is one wave32 wave (its lane masks are one word each)
        self.w1 = int(waves[0]) if self.n == 1 and not m.wave64 else -1
        self.lanes: dict[int, np.ndarray] = {}
        self.dirty: set[int] = set()
        self.at_barrier = False
        self.parked = False   # set aside at a contended atomic until nothing else can run
        self.waiting: Blocked | None = None   # queued at a GWS resource until released
        self.planes = None if m.wave64 or not self.n or not isinstance(idx, slice) else \
            m.planes_of_all() if idx is ALL else Planes(m, idx, self.n)
        self._load_exec()

    # -- lane masks (wave64: SGPR pair r, r+1 → even and odd rows)
    def _mask_words(self, r: int) -> np.ndarray:
        """uint32 [n]: the 32 bits of lane-mask SGPR pair r that each row's lanes use."""
        S = self.m.S
        if not self.m.wave64:
            return S[r][self.idx]
        odd = (self.wave_ids() & 1).astype(bool)
        return np.where(odd, S[r + 1][self.idx], S[r][self.idx])

    def any_lanes(self, mask: np.ndarray) -> np.ndarray:
        """bool [n]: whether any lane of each row's wave is set (wave64: either row)."""
        row: np.ndarray = np.asarray(mask.any(axis=1))
        if not self.m.wave64:
            return row
        both = row.reshape(-1, 2).any(axis=1)
        return np.repeat(both, 2)

    # -- EXEC bookkeeping
    def _load_exec(self) -> None:
        if self.w1 >= 0:
            self._set_exec(*one_wave_mask(int(self.m.S[EXEC_LO, self.w1])))
        else:
            self._set_exec(unpack_lanes(self._mask_words(EXEC_LO)))

    def _set_exec(self, mask: np.ndarray, active: int = -1) -> None:
        self.exec = mask
        self.lanes[EXEC_LO] = mask
        self.active = active if active >= 0 else int(np.count_nonzero(mask))
        self.exec_full = self.active == self.n * 32
        self.fast = self.planes if self.exec_full else None

    # -- SGPRs
    def s(self, r: int) -> np.ndarray:
        """uint32 [n]: SGPR r of every wave (packs a lane mask a VALU op left unpacked)."""
        base = r & ~1 if self.m.wave64 else r
        if base in self.dirty:
            self._pack(base)
        return self.m.S[r][self.idx]

    def _pack(self, r: int) -> None:
        if self.w1 >= 0:
            self.m.S[r, self.w1] = one_wave_word(self.lanes[r])
            self.m.dirty_s.add(r)
            self.dirty.discard(r)
            return
        words = pack_lanes(self.lanes[r])
        S = self.m.S
        if self.m.wave64:
            pairs = words.reshape(-1, 2)
            S[r][self.idx] = np.repeat(pairs[:, 0], 2)
            S[r + 1][self.idx] = np.repeat(pairs[:, 1], 2)
            self.m.dirty_s.add(r + 1)
        else:
            S[r][self.idx] = words
        self.m.dirty_s.add(r)
        self.dirty.discard(r)

    def set_s(self, r: int, val: np.ndarray | np.generic | int) -> None:
        """SGPR r of every wave = val ([n] or a scalar for all; for one wave32 wave also a
        Python int, a 32-bit pattern)."""
        if r == NULL:
            return
        if self.w1 >= 0 and isinstance(val, (np.generic, int)):   # one wave32, a scalar
            m = self.m
            m.S[r, self.w1] = val
            m.dirty_s.add(r)
            if self.dirty:
                self.dirty.discard(r)
            if r == EXEC_LO:
                # the new EXEC's lanes from the word itself (not read back from the SGPR)
                word = val & 0xFFFFFFFF if isinstance(val, int) else int(m.S[r, self.w1])
                self._set_exec(*one_wave_mask(word))
            else:
                self.lanes.pop(r, None)
            return
        wave64 = self.m.wave64
        base = r & ~1 if wave64 else r
        if wave64 and base in self.dirty:
            self._pack(base)   # keep the other half of a lane mask a VALU op left unpacked
        self.m.S[r][self.idx] = val
        self.m.dirty_s.add(r)
        self.dirty.discard(r)
        if base == EXEC_LO:
            self._load_exec()
        else:
            self.lanes.pop(base, None)

    def lanes_of(self, r: int) -> np.ndarray:
        """bool [n, 32]: SGPR r as a lane mask (wave64: the pair r, r+1)."""
        got = self.lanes.get(r)
        if got is None:
            got = self.lanes[r] = one_wave_mask(int(self.m.S[r, self.w1]))[0] \
                if self.w1 >= 0 else unpack_lanes(self._mask_words(r))
        return got

    def set_lanes(self, r: int, mask: np.ndarray) -> None:
        """A VALU op wrote a lane mask (bool [n, 32]) to SGPR r; packing waits until it is read."""
        if r == NULL:
            return
        # Stored read-only (as np.broadcast_to leaves it): masks are shared, never updated in
        # place. A mask already [n, 32] gets a read-only view, cheaper than broadcast_to.
        if mask.shape == (self.n, 32):
            mask = mask.view()
            mask.flags.writeable = False
        else:
            mask = np.broadcast_to(mask, (self.n, 32))
        if r == EXEC_LO:
            self._set_exec(mask)
        else:
            self.lanes[r] = mask
        self.dirty.add(r)

    @contextmanager
    def masked(self, lanes: np.ndarray) -> Iterator[None]:
        """Runs a block with EXEC narrowed to `lanes` (a subset of it, bool [n, 32]) without
        touching the EXEC SGPRs: memory instructions use it for the lanes of one address
        space or the in-range lanes of a buffer access."""
        saved = (self.exec, self.active, self.exec_full, self.fast, self.lanes[EXEC_LO])
        self._set_exec(lanes)
        try:
            yield
        finally:
            self.exec, self.active, self.exec_full, self.fast, self.lanes[EXEC_LO] = saved

    def flush(self) -> None:
        for r in list(self.dirty):
            self._pack(r)

    # -- VGPRs
    def v(self, r: int) -> np.ndarray:
        """uint32 [n, 32] (a view when the wave set is a slice of the machine)."""
        return self.m.V[r][self.idx]

    def set_v(self, r: int, val: np.ndarray | np.generic) -> None:
        """Writes the EXEC lanes of VGPR r."""
        plane = self.m.V[r]
        self.m.dirty_v.add(r)
        if self.exec_full:
            plane[self.idx] = val
        elif isinstance(self.idx, slice):
            np.copyto(plane[self.idx], val, where=self.exec, casting="unsafe")
        else:
            cur = plane[self.idx]
            np.copyto(cur, val, where=self.exec, casting="unsafe")
            plane[self.idx] = cur

    def dest(self, r: int) -> np.ndarray | None:
        """A writable view of VGPR r for computing a result in place (None when the wave set's
        waves are not a slice of the machine or EXEC is partial: then use set_v)."""
        if self.exec_full and isinstance(self.idx, slice):
            self.m.dirty_v.add(r)
            return self.m.V[r][self.idx]
        return None

    def set_v_lanes(self, r: int, val: np.ndarray, lanes: np.ndarray) -> None:
        """Writes VGPR r in the lanes given (bool [n, 32]), whatever EXEC is."""
        plane = self.m.V[r]
        self.m.dirty_v.add(r)
        if isinstance(self.idx, slice):
            np.copyto(plane[self.idx], val, where=lanes, casting="unsafe")
        else:
            cur = plane[self.idx]
            np.copyto(cur, val, where=lanes, casting="unsafe")
            plane[self.idx] = cur

    # -- SCC
    def scc(self) -> np.ndarray:
        return self.m.SCC[self.idx]

    def set_scc(self, val: np.ndarray | bool) -> None:
        self.m.SCC[self.idx] = val

    # -- splitting and merging
    def wave_ids(self) -> np.ndarray:
        return np.arange(self.m.n_waves)[self.idx]

    def split(self, sel: np.ndarray, pc_sel: int, pc_rest: int) -> tuple["WaveSet", "WaveSet"]:
        """Two wave sets: waves where `sel` (bool [n]) holds go to pc_sel, the others to pc_rest."""
        self.flush()
        ids = self.wave_ids()
        return (WaveSet(self.m, _compact(ids[sel], self.m.n_waves), pc_sel),
                WaveSet(self.m, _compact(ids[~sel], self.m.n_waves), pc_rest))


    def singles(self) -> list["WaveSet"]:
        """One wave set per wave (a wave64's two rows together), at this wave set's pc."""
        self.flush()
        ids = self.wave_ids()
        rows = 2 if self.m.wave64 else 1
        return [WaveSet(self.m, slice(int(i), int(i) + rows), self.pc) for i in ids[::rows]]


def merge(wave_sets: list[WaveSet]) -> WaveSet:
    """One wave set of all the waves of `wave_sets` (which share a pc)."""
    for g in wave_sets:
        g.flush()
    ids = np.sort(np.concatenate([g.wave_ids() for g in wave_sets]))
    return WaveSet(wave_sets[0].m, _compact(ids, wave_sets[0].m.n_waves), wave_sets[0].pc)


def _compact(ids: np.ndarray, n_waves: int) -> slice | np.ndarray:
    """A slice when the sorted wave ids are evenly spaced (views instead of copies): a whole
    batch, a run of waves, or one wave per workgroup (the lanes-below-32 branch of a reduction)."""
    if len(ids) == 1:
        return slice(int(ids[0]), int(ids[0]) + 1)
    step = int(ids[1] - ids[0]) if len(ids) > 1 else 1
    if len(ids) and step > 0 and ids[-1] - ids[0] == step * (len(ids) - 1) and \
            (len(ids) == 2 or (np.diff(ids) == step).all()):
        a, b = int(ids[0]), int(ids[-1]) + 1
        if step == 1:
            return ALL if (a, b) == (0, n_waves) else slice(a, b)
        return slice(a, b, step)
    return ids
