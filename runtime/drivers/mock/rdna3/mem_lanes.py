"""Where the lanes of a memory instruction point, and moving their data in bulk.

A `Span` is a set of lanes whose bytes all lie in one backing array (a MockMemory mapping, the
batch's LDS, or scratch). Offsets are kept lane-shaped ([waves, 32]) together with the EXEC mask
whenever possible, so a partially active wave set (a bounds check in the last wave, an `if` on the
lane id) needs no compaction: unit-stride accesses become slices of the backing array (loads are
masked copies into the VGPRs, stores `np.copyto(..., where=EXEC)`), other accesses gathers with
the inactive lanes' offsets neutralised. Only scattered stores, sub-dword accesses and atomics
compact the active lanes first. Bounds are always those of the active lanes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from runtime.drivers.mock.memory import MockMemory, PageFault

from . import atomics
from .machine import WaveSet

u32, u64 = np.uint32, np.uint64


@dataclass
class Span:
    """Lanes in one backing array: byte offset = raw + delta, active ones within [lo, hi].

    Lane-shaped spans (`compact` False in the Target) carry `mask`, the active lanes (None: all);
    compacted spans hold only active lanes, `sel` picking theirs when several spans share them.
    """

    data: np.ndarray
    raw: np.ndarray
    lo: int
    hi: int
    delta: int = 0
    mask: np.ndarray | None = None
    sel: np.ndarray | None = None
    all_lanes: bool = False   # lo/hi bound every lane of raw, active or not

    @property
    def off(self) -> np.ndarray:
        if not self.delta:
            return self.raw
        if self.raw.dtype == u32:
            return self.raw + u32(self.delta & 0xFFFFFFFF)  # exact: results fit the mapping
        return self.raw + self.delta


@dataclass
class Target:
    spans: list[Span]
    compact: bool          # True: values are 1-D over the wave set's active lanes (EXEC order)


def active(g: WaveSet, x: np.ndarray) -> np.ndarray:
    """The EXEC lanes of a [n, 32] (or broadcastable) array, flattened."""
    return np.broadcast_to(x, (g.n, 32))[g.exec]


def lane_bounds(x: np.ndarray, mask: np.ndarray | None) -> tuple[int, int] | None:
    """(min, max) over the active lanes, or None if there are none."""
    if mask is None:
        return int(x.min()), int(x.max())
    if not mask.any():
        return None
    top = np.iinfo(x.dtype).max if x.dtype.kind in "iu" else np.inf
    return int(x.min(where=mask, initial=top)), int(x.max(where=mask, initial=0))


def all_bounds(x: np.ndarray) -> tuple[int, int]:
    """(min, max) over all lanes, active or not: a superset of the active lanes' bounds that is
    several times cheaper to get than masked reductions; callers fall back to lane_bounds only
    when it is not good enough."""
    return int(x.min()), int(x.max())


@lru_cache(maxsize=32)
def _ramp(n: int, step: int, dtype: type) -> np.ndarray:
    r: np.ndarray = np.arange(0, n * step, step, dtype=dtype)
    r.setflags(write=False)
    return r


def dense_block(sp: Span, ndw: int) -> np.ndarray | None:
    """A uint32 view [*lanes, ndw] of the backing array if lane k (active or not) addresses the
    element at first + k * 4 * ndw bytes, i.e. consecutive lanes hit consecutive elements (every
    unit-stride access), and the whole block lies inside the array; else None."""
    size = 4 * ndw
    n = sp.raw.size
    rmin, rmax = (sp.lo - sp.delta, sp.hi - sp.delta) if sp.all_lanes else \
        (int(sp.raw.min()), int(sp.raw.max()))
    start = rmin + sp.delta
    if rmax - rmin != size * (n - 1) or start % 4 or start < 0 or start + size * n > len(sp.data):
        return None
    raw = sp.raw.reshape(-1)
    if raw.dtype == u32:
        ok = ((raw - u32(rmin & 0xFFFFFFFF)) == _ramp(n, size, u32)).all()
    else:
        ok = ((raw - rmin) == _ramp(n, size, np.int64)).all()
    if not ok:
        return None
    words = sp.data[start:start + size * n].view(u32)
    return words.reshape(*sp.raw.shape, ndw)


def _words(data: np.ndarray) -> np.ndarray:
    return data[:len(data) // 4 * 4].view(u32)


def _aligned(sp: Span) -> bool:
    if sp.lo % 4 or sp.delta % 4:
        return False
    if not int(np.bitwise_or.reduce(sp.raw, axis=None)) & 3:
        return True
    if sp.mask is None:
        return False
    return not int(np.bitwise_or.reduce(sp.raw, axis=None, where=sp.mask, initial=0)) & 3


def _gather_index(sp: Span) -> np.ndarray:
    """int64 dword index per lane; inactive lanes point at the first active element."""
    off = sp.off
    if sp.mask is not None:
        off = np.where(sp.mask, off, off.dtype.type(sp.lo))
    return np.right_shift(off, 2, dtype=np.int64)


def load_words(t: Target, ndw: int, shape: tuple[int, ...]) -> list[np.ndarray]:
    """ndw dwords per lane, as ndw arrays shaped like the target's lanes."""
    if len(t.spans) == 1 and t.spans[0].sel is None:
        return _span_words(t.spans[0], ndw)
    outs = [np.zeros(shape, dtype=u32) for _ in range(ndw)]
    for sp in t.spans:
        for j, v in enumerate(_span_words(sp, ndw)):
            outs[j][sp.sel] = v
    return outs


def _span_words(sp: Span, ndw: int) -> list[np.ndarray]:
    block = dense_block(sp, ndw)
    if block is not None:
        return [block[..., j] for j in range(ndw)]
    if _aligned(sp):
        d32 = _words(sp.data)
        idx = _gather_index(sp)
        return [np.take(d32, idx + j if j else idx, mode="clip") for j in range(ndw)]
    off = sp.off if sp.mask is None else np.where(sp.mask, sp.off, sp.off.dtype.type(sp.lo))
    raw = sp.data[np.asarray(off, dtype=np.int64)[..., None] + np.arange(4 * ndw)]
    words = np.ascontiguousarray(raw).view(u32)
    return [words[..., j] for j in range(ndw)]


def store_words(t: Target, vals: list[np.ndarray]) -> None:
    """Stores vals[j] (shaped like the target's lanes) as dword j of each lane's element."""
    ndw = len(vals)
    for sp in t.spans:
        part = vals if sp.sel is None else [v[sp.sel] for v in vals]
        block = dense_block(sp, ndw)
        if block is not None:
            for j, v in enumerate(part):
                if sp.mask is None:
                    block[..., j] = v
                else:
                    np.copyto(block[..., j], v, where=sp.mask)
            continue
        if sp.mask is not None:  # scattered with inactive lanes: store the active ones only
            m = sp.mask
            sp = Span(sp.data, sp.raw[m], sp.lo, sp.hi, sp.delta)
            part = [np.broadcast_to(v, m.shape)[m] for v in part]
        if _aligned(sp):
            d32 = _words(sp.data)
            idx = np.right_shift(sp.off, 2, dtype=np.int64)
            for j, v in enumerate(part):
                d32[idx + j if j else idx] = v
        else:
            raw = np.ascontiguousarray(np.stack(np.broadcast_arrays(*part), axis=-1)).view(np.uint8)
            sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(raw.shape[-1])] = raw


def compacted(t: Target, g: WaveSet) -> Target:
    """The same lanes as a compacted target (for sub-dword accesses and atomics)."""
    if t.compact:
        return t
    spans = []
    for sp in t.spans:
        m = sp.mask if sp.mask is not None else np.ones(sp.raw.shape, dtype=bool)
        full = np.broadcast_to(sp.raw, (g.n, 32))
        spans.append(Span(sp.data, full[g.exec], sp.lo, sp.hi, sp.delta,
                          sel=None if sp.mask is None or m is g.exec else m[g.exec]))
    return Target(spans, True)


def load_sub(t: Target, size: int, signed: bool, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=u32)
    dt = {(1, False): np.uint8, (1, True): np.int8, (2, False): np.uint16,
          (2, True): np.int16}[(size, signed)]
    for sp in t.spans:
        raw = sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(size)]
        v = np.ascontiguousarray(raw).view(dt)[..., 0].astype(np.int32).view(u32)
        if sp.sel is None:
            out = v
        else:
            out[sp.sel] = v
    return out


def store_sub(t: Target, val: np.ndarray, size: int) -> None:
    for sp in t.spans:
        v = val if sp.sel is None else val[sp.sel]
        raw = np.ascontiguousarray(v.astype(u32)).view(np.uint8).reshape(*v.shape, 4)[..., :size]
        sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(size)] = raw


def atomic(t: Target, op: str, dt: type, src: np.ndarray, cmp: np.ndarray | None,
           want_old: bool, shape: tuple[int, ...]) -> np.ndarray | None:
    """Read-modify-write of compacted lanes in lane order; the old values if asked."""
    out: np.ndarray | None = np.zeros(shape, dtype=dt) if want_old else None
    size = np.dtype(dt).itemsize
    for sp in t.spans:
        off = sp.off
        if np.any(off % size):
            raise PageFault(0, size, "atomic", "misaligned atomic")
        arr: np.ndarray = sp.data[:len(sp.data) // size * size].view(dt)
        s = src if sp.sel is None else src[sp.sel]
        c = cmp if cmp is None or sp.sel is None else cmp[sp.sel]
        idx = (np.asarray(off, dtype=np.int64) // size).reshape(-1)
        old = atomics.rmw(arr, idx, op, s.reshape(-1),
                          None if c is None else c.reshape(-1), want_old)
        if want_old:
            assert old is not None and out is not None  # rmw returns the old values if asked
            if sp.sel is None:
                out = old.reshape(shape)
            else:
                out[sp.sel] = old
    return out


def global_span(mem: MockMemory, base: int, off: np.ndarray, mask: np.ndarray | None,
                size: int, access: str) -> Target | None:
    """Lanes at base + off (uint32 offsets, lane-shaped) in one mapping; None if they are not."""
    lmin, lmax = all_bounds(off)
    every = True
    while True:
        try:
            data, moff = mem.find(base + lmin, lmax - lmin + size, access)
            break
        except PageFault:
            if mask is None or not every:
                return None
            # Inactive lanes may hold any address: bound the active ones only.
            b = lane_bounds(off, mask)
            if b is None:
                return Target([], False)
            (lmin, lmax), every = b, False
    return Target([Span(data, off, moff, moff + lmax - lmin, delta=moff - lmin, mask=mask,
                        all_lanes=every)], False)


def scattered(mem: MockMemory, addrs: np.ndarray, size: int, access: str) -> Target:
    """Compacted lanes (uint64 addresses) over any mappings; PageFault names the first bad one."""
    flat = addrs.reshape(-1)
    maps = mem.mappings()
    bases = np.array([m.va for m in maps], dtype=u64)
    ends = np.array([m.va + len(m.data) for m in maps], dtype=u64)
    which = np.searchsorted(bases, flat, side="right").astype(np.int64) - 1
    ok = which >= 0
    safe = np.where(ok, which, 0)
    if len(maps):
        ok &= flat + u64(size) <= ends[safe]
    else:
        ok[:] = False
    if not ok.all():
        bad = int(np.argmin(ok))
        raise PageFault(int(flat[bad]), size, access, f"lane {bad} of {len(flat)}")
    spans = []
    for mi in np.unique(safe):
        sel = safe == mi
        off = (flat[sel] - u64(maps[int(mi)].va)).astype(np.int64)
        spans.append(Span(maps[int(mi)].data, off, int(off.min()), int(off.max()),
                          sel=None if sel.all() else sel))
    return Target(spans, True)


def write_back(g: WaveSet, r: int, vals: np.ndarray, t: Target) -> None:
    """Loaded values (in the target's layout) into VGPR r's active lanes."""
    if not t.compact:
        g.set_v(r, vals)
        return
    full = np.zeros((g.n, 32), dtype=vals.dtype)
    full[g.exec] = vals
    g.set_v(r, full.view(u32) if full.dtype != u32 else full)


def lane_shape(g: WaveSet, t: Target) -> tuple[int, ...]:
    return (g.active,) if t.compact else (g.n, 32)
