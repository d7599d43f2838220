"""Memory instructions: SMEM, GLOBAL/FLAT/SCRATCH and the no-op cache controls (DS: ops_ds).

Addresses of all lanes of a group are resolved at once (mem_lanes.py). The fast path (one
mapping holds every active lane's address, the case for every buffer argument) works on offsets
into that mapping's numpy array; lanes spread over several mappings are located one by one, and
an address no mapping covers raises `PageFault` naming the first bad lane. Faults become
`PageFaultError` (a `KernelFault`) carrying the instruction.

Address apertures for FLAT (the values `src_shared_base`/`src_private_base` return): FLAT
addresses inside SHARED_APERTURE go to LDS, inside PRIVATE_APERTURE to scratch.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from runtime.drivers.mock.memory import PageFault

from . import atomics
from . import mem_lanes as ml
from .decode import NULL, Inst
from .errors import KernelFault, PageFaultError
from .machine import Group

Exec = Callable[[Group], None]
u32, u64 = np.uint32, np.uint64
SHARED_APERTURE = 0x1000_0000_0000_0000
PRIVATE_APERTURE = 0x2000_0000_0000_0000
APERTURE_SIZE = 1 << 32
_SIZES = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8,
          "b96": 12, "b128": 16, "b256": 32, "b512": 64, "u32": 4, "i32": 4, "f32": 4, "u64": 8,
          "i64": 8, "f64": 8}
_ATOMIC_DT = {"u32": np.uint32, "i32": np.int32, "b32": np.uint32, "f32": np.float32,
              "u64": np.uint64, "i64": np.int64, "b64": np.uint64, "f64": np.float64}


def _fault(inst: Inst, err: PageFault) -> PageFaultError:
    return PageFaultError(str(err), address=inst.addr, instruction=str(inst), cause=err)


def _lanes(inst: Inst, resolve: Callable[[Group], ml.Target], g: Group) -> ml.Target | None:
    """The lanes an access of `inst` touches, None when no active lane touches memory; a page
    fault becomes the instruction's fault."""
    try:
        t = resolve(g)
    except PageFault as e:
        raise _fault(inst, e) from None
    return t if t.spans else None


def _global_target(inst: Inst, size: int, access: str) -> Callable[[Group], ml.Target]:
    """Resolves a GLOBAL/FLAT instruction's lane addresses (active lanes only are checked)."""
    f = inst.f
    imm, saddr, vaddr = f["offset"], f["saddr"], f["addr"]
    sbase = saddr not in (NULL, 0x7F) and inst.name.split("_")[0] != "flat"

    def target(g: Group) -> ml.Target:
        mask = None if g.exec_full else g.exec
        mem = g.m.mem
        if sbase:
            # SGPR base + 32-bit VGPR offset: the base is per wave, usually the same for all.
            base = g.s(saddr).astype(u64) | (g.s(saddr + 1).astype(u64) << u64(32))
            if base.min() == base.max():
                t = ml.global_span(mem, int(base[0]) + imm, g.v(vaddr), mask, size, access)
                if t is not None:
                    return t
            full = base[:, None] + g.v(vaddr).astype(u64) + u64(imm & 0xFFFFFFFFFFFFFFFF)
            return ml.scattered(mem, ml.active(g, full), size, access)
        lo, hi = g.v(vaddr), g.v(vaddr + 1)
        hb = ml.all_bounds(hi)
        if hb[0] != hb[1] and mask is not None:
            hb = ml.lane_bounds(hi, mask)  # inactive lanes may hold anything
            if hb is None:
                return ml.Target([], False)
        if hb[0] == hb[1] and imm >= 0:
            if int(lo.max()) + imm < 1 << 32:
                t = ml.global_span(mem, (hb[0] << 32) + imm, lo, mask, size, access)
                if t is not None:
                    return t
        full = (lo.astype(u64) | (hi.astype(u64) << u64(32))) + u64(imm & 0xFFFFFFFFFFFFFFFF)
        return ml.scattered(mem, ml.active(g, full), size, access)
    return target


def _kind(name: str) -> tuple[str, str]:
    """('load'|'store'|'atomic_<op>', type suffix) of a global/flat/scratch/ds mnemonic."""
    parts = name.split("_")
    return "_".join(parts[1:-1]), parts[-1]


def _transfer(inst: Inst, kind: str, typ: str, vdst: int, vdata: int,
              resolve: Callable[[Group], ml.Target]) -> Exec:
    """A load or store of `typ` through the lanes `resolve` gives (global, scratch or LDS)."""
    size = _SIZES[typ]
    ndw = size // 4
    signed = typ[0] == "i"

    def load(g: Group) -> None:
        t = _lanes(inst, resolve, g)
        if t is None:
            return
        if size >= 4:
            for j, v in enumerate(ml.load_words(t, ndw, ml.lane_shape(g, t))):
                ml.write_back(g, vdst + j, v, t)
        else:
            t = ml.compacted(t, g)
            ml.write_back(g, vdst, ml.load_sub(t, size, signed, ml.lane_shape(g, t)), t)

    def store(g: Group) -> None:
        t = _lanes(inst, resolve, g)
        if t is None:
            return
        if size >= 4:
            vals = [g.v(vdata + j) for j in range(ndw)]
            ml.store_words(t, [ml.active(g, v) for v in vals] if t.compact else vals)
        else:
            t = ml.compacted(t, g)
            ml.store_sub(t, ml.active(g, g.v(vdata)), size)
    return load if kind == "load" else store


def compile_flat(inst: Inst) -> Exec:
    """GLOBAL_*, FLAT_* and SCRATCH_* loads, stores and atomics."""
    name = inst.name
    seg = name.split("_")[0]
    kind, typ = _kind(name)
    f = inst.f
    if kind in ("load", "store") and typ in _SIZES and "d16" not in name:
        size = _SIZES[typ]
        if seg == "scratch":
            resolve = _scratch_target(inst, size)
        else:
            resolve = _global_target(inst, size, "read" if kind == "load" else "write")
            if seg == "flat":
                resolve = _flat_guard(inst, resolve)
        return _transfer(inst, kind, typ, f["vdst"], f["data"], resolve)
    if kind.startswith("atomic_") and seg != "scratch":
        return _compile_global_atomic(inst, kind.removeprefix("atomic_"), typ)
    raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))


def _flat_guard(inst: Inst, resolve: Callable[[Group], ml.Target]):
    """FLAT ops on the LDS or private apertures are not supported (found as a fault there)."""
    def get(g: Group) -> ml.Target:
        try:
            return resolve(g)
        except PageFault as e:
            if SHARED_APERTURE <= e.va < PRIVATE_APERTURE + APERTURE_SIZE:
                raise KernelFault("flat access to the LDS/private aperture is not supported",
                                  address=inst.addr, instruction=str(inst)) from None
            raise
    return get


def _compile_global_atomic(inst: Inst, op: str, typ: str) -> Exec:
    dt = _ATOMIC_DT.get(typ)
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported atomic", address=inst.addr, instruction=str(inst))
    f = inst.f
    want = bool(f["glc"])  # GLC on an atomic returns the pre-op value (ISA section 10.1)
    ndw = np.dtype(dt).itemsize // 4
    vdst, vdata = f["vdst"], f["data"]
    has_cmp = op == "cmpswap"
    resolve = _global_target(inst, np.dtype(dt).itemsize, "atomic")
    return _atomic_exec(inst, op, dt, ndw, vdst, vdata, vdata + ndw if has_cmp else None, want,
                        resolve)


def _atomic_exec(inst: Inst, op: str, dt: type, ndw: int, vdst: int, vsrc: int,
                 vcmp: int | None, want: bool, resolve: Callable[[Group], ml.Target]) -> Exec:
    def run(g: Group) -> None:
        t = _lanes(inst, resolve, g)
        if t is None:
            return
        t = ml.compacted(t, g)
        src = _typed_data(g, vsrc, ndw, dt)
        cmp = _typed_data(g, vcmp, ndw, dt) if vcmp is not None else None
        try:
            old = ml.atomic(t, op, dt, src, cmp, want, (g.active,))
        except PageFault as e:
            raise _fault(inst, e) from None
        if want:
            _write_typed(g, vdst, old, ndw, t)
    return run


def _typed_data(g: Group, r: int, ndw: int, dt: type) -> np.ndarray:
    """Active lanes of v[r] (v[r:r+1] for 64-bit types) as dt."""
    if ndw == 1:
        return ml.active(g, g.v(r)).view(dt)
    lo = ml.active(g, g.v(r)).astype(u64)
    hi = ml.active(g, g.v(r + 1)).astype(u64)
    return (lo | (hi << u64(32))).view(dt)


def _write_typed(g: Group, r: int, vals: np.ndarray, ndw: int, t: ml.Target) -> None:
    if ndw == 1:
        ml.write_back(g, r, np.ascontiguousarray(vals).view(u32), t)
    else:
        bits = np.ascontiguousarray(vals).view(u64)
        ml.write_back(g, r, (bits & u64(0xFFFFFFFF)).astype(u32), t)
        ml.write_back(g, r + 1, (bits >> u64(32)).astype(u32), t)


# -- scratch (per-lane private memory, grown on demand) ------------------------------------------
def _scratch_target(inst: Inst, size: int) -> Callable[[Group], ml.Target]:
    f = inst.f
    imm, saddr, vaddr, sve = f["offset"], f["saddr"], f["addr"], f["sve"]

    def target(g: Group) -> ml.Target:
        off = np.full((g.n, 32), imm, dtype=np.int64)
        if saddr not in (NULL, 0x7F):
            off += g.s(saddr).astype(np.int64)[:, None]
        if sve:
            off += g.v(vaddr).astype(np.int64)
        lanes = g.wave_ids()[:, None] * 32 + np.arange(32)
        off, lanes = ml.active(g, off), ml.active(g, lanes)
        if not off.size:
            return ml.Target([], True)
        if off.min() < 0:
            raise PageFault(int(off.min()) & 0xFFFFFFFF, size, "scratch", "negative offset")
        per_lane = g.m.scratch_reserve(int(off.max()) + size)
        flat = lanes * per_lane + off
        return ml.Target([ml.Span(g.m.scratch, flat, int(flat.min()), int(flat.max()))], True)
    return target


# -- SMEM --------------------------------------------------------------------------------------
def compile_smem(inst: Inst) -> Exec:
    name, f = inst.name, inst.f
    if name in ("s_dcache_inv", "s_gl1_inv", "s_atc_probe", "s_atc_probe_buffer"):
        return lambda g: None
    ndw = _SIZES[name.split("_")[-1]] // 4
    sbase, sdata, imm, soff = f["sbase"], f["sdata"], f["offset"], f["soffset"]
    buffer = name.startswith("s_buffer")

    def run(g: Group) -> None:
        base = g.s(sbase).astype(u64) | (g.s(sbase + 1).astype(u64) << u64(32))
        limit = None
        if buffer:
            base = base & u64(0xFFFFFFFFFFFF)  # V# base address is 48 bits
            limit = g.s(sbase + 2).astype(np.int64)
        off = np.full(g.n, imm, dtype=np.int64)
        if soff != NULL:
            off += g.s(soff).astype(np.int64)
        # SMEM ignores the two low address bits (dword-aligned accesses).
        addr = (base + off.astype(u64)) & ~u64(3)
        mem = g.m.mem
        try:
            if addr.min() == addr.max():
                raw = np.frombuffer(mem.read(int(addr[0]), 4 * ndw), dtype=u32)
                vals = np.broadcast_to(raw, (g.n, ndw))
            else:
                vals = np.stack([mem.gather(addr + u64(4 * j), u32) for j in range(ndw)], axis=1)
        except PageFault as e:
            raise _fault(inst, e) from None
        if limit is not None:
            # Out-of-range buffer loads return 0 (the V#'s NUM_RECORDS bounds the offset).
            inrange = (off[:, None] + 4 * np.arange(ndw)[None, :] + 4) <= limit[:, None]
            vals = np.where(inrange, vals, u32(0))
        for j in range(ndw):
            g.set_s(sdata + j, vals[:, j])
    return run


def compile_mubuf(inst: Inst) -> Exec:
    if inst.name in ("buffer_gl0_inv", "buffer_gl1_inv"):
        return lambda g: None  # cache invalidations: the mock has no caches
    raise KernelFault("unsupported instruction (MUBUF buffer access)", address=inst.addr,
                      instruction=str(inst))
