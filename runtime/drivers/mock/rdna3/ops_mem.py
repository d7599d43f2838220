"""Memory instructions: SMEM, GLOBAL/FLAT/SCRATCH, DS (LDS) and the no-op cache controls.

Addresses of all active lanes of a group are resolved at once. The fast path (one mapping holds
every lane's address, which is the case for every buffer argument) turns them into offsets into
that mapping's numpy array and gathers/scatters whole dwords; anything else goes through
`MockMemory.gather/scatter`, which raise `PageFault` naming the first bad lane. Faults become
`PageFaultError` (a `KernelFault`) carrying the instruction.

Address apertures for FLAT (the values `src_shared_base`/`src_private_base` return): FLAT
addresses inside SHARED_APERTURE go to LDS, inside PRIVATE_APERTURE to scratch.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from runtime.drivers.mock.memory import MockMemory, PageFault

from . import atomics
from .decode import NULL, Inst
from .errors import KernelFault, PageFaultError
from .machine import Group

Exec = Callable[[Group], None]
u32, u64 = np.uint32, np.uint64
SHARED_APERTURE = 0x1000_0000_0000_0000
PRIVATE_APERTURE = 0x2000_0000_0000_0000
APERTURE_SIZE = 1 << 32
_SIZES = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8,
          "b96": 12, "b128": 16, "b256": 32, "b512": 64, "u32": 4, "i32": 4, "f32": 4, "u64": 8, "i64": 8, "f64": 8}
_ATOMIC_DT = {"u32": np.uint32, "i32": np.int32, "b32": np.uint32, "f32": np.float32,
              "u64": np.uint64, "i64": np.int64, "b64": np.uint64, "f64": np.float64}


def _fault(inst: Inst, err: PageFault) -> PageFaultError:
    return PageFaultError(str(err), address=inst.addr, instruction=str(inst), cause=err)


# -- lanes → (backing array, byte offsets) -----------------------------------------------------
@dataclass
class Span:
    """Lanes whose bytes lie in one backing array: the byte offsets into `data` are `raw + delta`
    (shaped like the lanes, or like the lanes `sel` picks), between `lo` and `hi` inclusive.
    `delta` is applied lazily: slicing (the unit-stride case) never needs it per lane."""

    data: np.ndarray
    raw: np.ndarray
    sel: np.ndarray | None
    lo: int
    hi: int
    delta: int = 0

    @property
    def off(self) -> np.ndarray:
        if not self.delta:
            return self.raw
        if self.raw.dtype == u32:
            return self.raw + u32(self.delta & 0xFFFFFFFF)  # exact: results fit the mapping
        return self.raw + self.delta


Target = list[Span]


@lru_cache(maxsize=32)
def _ramp(n: int, step: int, dtype: type) -> np.ndarray:
    r = np.arange(0, n * step, step, dtype=dtype)
    r.setflags(write=False)
    return r


def _dense(sp: Span, size: int) -> bool:
    """Whether lane k reads bytes lo + k*size .. (consecutive lanes, consecutive elements): the
    case of every unit-stride array access, served by slicing instead of gathering."""
    n = sp.raw.size
    if sp.hi - sp.lo != size * (n - 1) or sp.lo % 4:
        return False
    raw = sp.raw.reshape(-1)
    first = sp.lo - sp.delta
    if raw.dtype == u32:
        rel = raw - u32(first & 0xFFFFFFFF)
        return bool((rel == _ramp(n, size, u32)).all())
    return bool((raw - first == _ramp(n, size, np.int64)).all())


def _global_target(mem: MockMemory, base: int | None, off: np.ndarray, size: int,
                   access: str) -> Target:
    """Where the lanes' bytes live: base + off (base None: `off` holds full uint64 addresses)."""
    if off.size == 0:
        return []
    lmin, lmax = int(off.min()), int(off.max())
    if base is not None:
        lo = base + lmin
        try:
            data, moff = mem.find(lo, lmax - lmin + size, access)
        except PageFault:
            return _scattered(mem, np.uint64(base & 0xFFFFFFFFFFFFFFFF) + off.astype(u64),
                              size, access)
        # Exact in uint32 arithmetic: every lane's offset into the mapping is below its size.
        return [Span(data, off, None, moff, moff + lmax - lmin, delta=moff - lmin)]
    try:
        data, moff = mem.find(lmin, lmax - lmin + size, access)
    except PageFault:
        return _scattered(mem, off, size, access)
    return [Span(data, (off - u64(lmin)).astype(np.int64), None, moff, moff + lmax - lmin,
                 delta=moff)]


def _scattered(mem: MockMemory, addrs: np.ndarray, size: int, access: str) -> Target:
    """Lanes spread over several mappings (or unmapped ones: PageFault names the first)."""
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
    out: Target = []
    for mi in np.unique(safe):
        sel = (safe == mi).reshape(addrs.shape)
        off = (addrs[sel] - u64(maps[int(mi)].va)).astype(np.int64)
        out.append(Span(maps[int(mi)].data, off, sel, int(off.min()), int(off.max())))
    return out


def _words(data: np.ndarray) -> np.ndarray:
    return data[:len(data) // 4 * 4].view(u32)


def _aligned(sp: Span) -> bool:
    return sp.lo % 4 == 0 and sp.delta % 4 == 0 and \
        not int(np.bitwise_or.reduce(sp.raw, axis=None)) & 3


def _load_dwords(t: Target, ndw: int, shape: tuple[int, ...]) -> list[np.ndarray]:
    if len(t) == 1 and t[0].sel is None:
        return _gather_dwords(t[0], ndw, shape)
    outs = [np.zeros(shape, dtype=u32) for _ in range(ndw)]
    for sp in t:
        vals = _gather_dwords(sp, ndw, sp.raw.shape)
        for j in range(ndw):
            outs[j][sp.sel] = vals[j]
    return outs


def _gather_dwords(sp: Span, ndw: int, shape: tuple[int, ...]) -> list[np.ndarray]:
    if _dense(sp, 4 * ndw):
        start = sp.lo // 4
        block = _words(sp.data)[start:start + sp.raw.size * ndw].reshape(*shape, ndw)
        return [block[..., j] for j in range(ndw)]
    if _aligned(sp):
        d32 = _words(sp.data)
        idx = np.right_shift(sp.off, 2, dtype=np.int64)
        return [np.take(d32, idx + j if j else idx, mode="clip") for j in range(ndw)]
    raw = sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(4 * ndw)]
    words = np.ascontiguousarray(raw).view(u32)
    return [words[..., j] for j in range(ndw)]


def _store_dwords(t: Target, vals: list[np.ndarray]) -> None:
    for sp in t:
        part = vals if sp.sel is None else [v[sp.sel] for v in vals]
        ndw = len(part)
        if _dense(sp, 4 * ndw):
            start = sp.lo // 4
            block = _words(sp.data)[start:start + sp.raw.size * ndw].reshape(-1, ndw)
            for j, v in enumerate(part):
                block[:, j] = np.broadcast_to(v, sp.raw.shape).reshape(-1)
        elif _aligned(sp):
            d32 = _words(sp.data)
            idx = np.right_shift(sp.off, 2, dtype=np.int64)
            for j, v in enumerate(part):
                d32[idx + j if j else idx] = v
        else:
            raw = np.ascontiguousarray(np.stack(np.broadcast_arrays(*part), axis=-1)).view(np.uint8)
            sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(raw.shape[-1])] = raw


def _load_sub(t: Target, size: int, signed: bool, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=u32)
    dt = {(1, False): np.uint8, (1, True): np.int8, (2, False): np.uint16,
          (2, True): np.int16}[(size, signed)]
    for sp in t:
        raw = sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(size)]
        v = np.ascontiguousarray(raw).view(dt)[..., 0].astype(np.int32).view(u32)
        if sp.sel is None:
            out = v
        else:
            out[sp.sel] = v
    return out


def _store_sub(t: Target, val: np.ndarray, size: int) -> None:
    for sp in t:
        v = val if sp.sel is None else val[sp.sel]
        raw = np.ascontiguousarray(v.astype(u32)).view(np.uint8).reshape(*v.shape, 4)[..., :size]
        sp.data[np.asarray(sp.off, dtype=np.int64)[..., None] + np.arange(size)] = raw


def _atomic(t: Target, op: str, dt: type, src: np.ndarray, cmp: np.ndarray | None,
            want_old: bool, shape: tuple[int, ...]) -> np.ndarray | None:
    out = np.zeros(shape, dtype=dt) if want_old else None
    size = np.dtype(dt).itemsize
    for sp in t:
        data, off, sel = sp.data, sp.off, sp.sel
        if np.any(off % size):
            raise PageFault(0, size, "atomic", "misaligned atomic")
        arr = data[:len(data) // size * size].view(dt)
        s = src if sel is None else src[sel]
        c = cmp if cmp is None or sel is None else cmp[sel]
        idx = (np.asarray(off, dtype=np.int64) // size).reshape(-1)
        old = atomics.rmw(arr, idx, op, s.reshape(-1),
                          None if c is None else c.reshape(-1), want_old)
        if want_old:
            if sel is None:
                out = old.reshape(shape)
            else:
                out[sel] = old
    return out


# -- per-group lane views ----------------------------------------------------------------------
def _active(g: Group, x: np.ndarray) -> np.ndarray:
    """The EXEC lanes of a [n, 32] (or broadcastable) array, flattened unless EXEC is full."""
    if g.exec_full:
        return np.broadcast_to(x, (g.n, 32))
    return np.broadcast_to(x, (g.n, 32))[g.exec]


def _write_back(g: Group, r: int, vals: np.ndarray) -> None:
    if g.exec_full:
        g.set_v(r, vals)
    else:
        full = np.zeros((g.n, 32), dtype=vals.dtype)
        full[g.exec] = vals
        g.set_v(r, full.view(u32) if full.dtype != u32 else full)


def _lane_shape(g: Group) -> tuple[int, ...]:
    return (g.n, 32) if g.exec_full else (g.active,)


def _global_addr(inst: Inst) -> Callable[[Group], tuple[int | None, np.ndarray]]:
    """(uniform base, uint32 per-lane offsets) or (None, uint64 addresses) of the active lanes."""
    f = inst.f
    imm, saddr, vaddr = f["offset"], f["saddr"], f["addr"]
    if saddr not in (NULL, 0x7F) and inst.name.split("_")[0] != "flat":
        def sbase(g: Group) -> tuple[int | None, np.ndarray]:
            base = g.s(saddr).astype(u64) | (g.s(saddr + 1).astype(u64) << u64(32))
            off = _active(g, g.v(vaddr))
            if base.min() == base.max():
                return int(base[0]) + imm, off
            full = base[:, None] + g.v(vaddr).astype(u64) + u64(imm & 0xFFFFFFFFFFFFFFFF)
            return None, _active(g, full)
        return sbase

    def vbase(g: Group) -> tuple[int | None, np.ndarray]:
        lo, hi = _active(g, g.v(vaddr)), _active(g, g.v(vaddr + 1))
        if hi.size and imm >= 0:
            hmin, hmax = hi.min(), hi.max()
            if hmin == hmax and int(lo.max()) + imm < 1 << 32:
                return (int(hmin) << 32) + imm, lo
        full = lo.astype(u64) | (hi.astype(u64) << u64(32))
        return None, full + u64(imm & 0xFFFFFFFFFFFFFFFF)
    return vbase


def _kind(name: str) -> tuple[str, str]:
    """('load'|'store'|'atomic_<op>', type suffix) of a global/flat/scratch/ds mnemonic."""
    parts = name.split("_")
    return "_".join(parts[1:-1]), parts[-1]


def compile_flat(inst: Inst) -> Exec:
    """GLOBAL_*, FLAT_* and SCRATCH_* loads, stores and atomics."""
    name = inst.name
    seg = name.split("_")[0]
    if seg == "scratch":
        return _compile_scratch(inst)
    kind, typ = _kind(name)
    if "d16" in kind or "addtid" in kind or typ not in _SIZES and not kind.startswith("atomic"):
        raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))
    addr_of = _global_addr(inst)
    if seg == "flat":
        addr_of = _flat_guard(inst, addr_of)
    f = inst.f
    vdst, vdata = f["vdst"], f["data"]
    if kind == "load":
        size = _SIZES[typ]

        def load(g: Group) -> None:
            base, off = addr_of(g)
            try:
                t = _global_target(g.m.mem, base, off, size, "read")
            except PageFault as e:
                raise _fault(inst, e) from None
            if size >= 4:
                for j, v in enumerate(_load_dwords(t, size // 4, _lane_shape(g))):
                    _write_back(g, vdst + j, v)
            else:
                _write_back(g, vdst, _load_sub(t, size, typ[0] == "i", _lane_shape(g)))
        return load
    if kind == "store":
        size = _SIZES[typ]

        def store(g: Group) -> None:
            base, off = addr_of(g)
            try:
                t = _global_target(g.m.mem, base, off, size, "write")
            except PageFault as e:
                raise _fault(inst, e) from None
            if size >= 4:
                _store_dwords(t, [_active(g, g.v(vdata + j)) for j in range(size // 4)])
            else:
                _store_sub(t, _active(g, g.v(vdata)), size)
        return store
    if kind.startswith("atomic_"):
        return _compile_global_atomic(inst, kind.removeprefix("atomic_"), typ, addr_of)
    raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))


def _flat_guard(inst: Inst, addr_of):
    """FLAT ops: LDS or scratch apertures are not supported through flat addressing here."""
    def get(g: Group) -> tuple[int | None, np.ndarray]:
        base, off = addr_of(g)
        lo = base + int(off.min()) if base is not None and off.size else \
            (int(off.min()) if off.size else 0)
        if off.size and SHARED_APERTURE <= lo < PRIVATE_APERTURE + APERTURE_SIZE:
            raise KernelFault("flat access to the LDS/private aperture is not supported",
                              address=inst.addr, instruction=str(inst))
        return base, off
    return get


def _compile_global_atomic(inst: Inst, op: str, typ: str, addr_of) -> Exec:
    dt = _ATOMIC_DT.get(typ)
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported atomic", address=inst.addr, instruction=str(inst))
    f = inst.f
    want = bool(f["glc"])  # GLC on an atomic returns the pre-op value (ISA section 10.1)
    ndw = np.dtype(dt).itemsize // 4
    vdst, vdata = f["vdst"], f["data"]
    has_cmp = op == "cmpswap"

    def run(g: Group) -> None:
        base, off = addr_of(g)
        try:
            t = _global_target(g.m.mem, base, off, np.dtype(dt).itemsize, "atomic")
        except PageFault as e:
            raise _fault(inst, e) from None
        src = _typed_data(g, vdata, ndw, dt)
        cmp = _typed_data(g, vdata + ndw, ndw, dt) if has_cmp else None
        try:
            old = _atomic(t, op, dt, src, cmp, want, _lane_shape(g))
        except PageFault as e:
            raise _fault(inst, e) from None
        if want:
            _write_typed(g, vdst, old, ndw)
    return run


def _typed_data(g: Group, r: int, ndw: int, dt: type) -> np.ndarray:
    if ndw == 1:
        return _active(g, g.v(r)).view(dt) if np.dtype(dt).itemsize == 4 else _active(g, g.v(r))
    lo = _active(g, g.v(r)).astype(u64)
    hi = _active(g, g.v(r + 1)).astype(u64)
    return (lo | (hi << u64(32))).view(dt)


def _write_typed(g: Group, r: int, vals: np.ndarray, ndw: int) -> None:
    if ndw == 1:
        _write_back(g, r, np.ascontiguousarray(vals).view(u32))
    else:
        bits = np.ascontiguousarray(vals).view(u64)
        _write_back(g, r, (bits & u64(0xFFFFFFFF)).astype(u32))
        _write_back(g, r + 1, (bits >> u64(32)).astype(u32))


# -- scratch (per-lane private memory, grown on demand) ------------------------------------------
def _compile_scratch(inst: Inst) -> Exec:
    kind, typ = _kind(inst.name)
    if kind not in ("load", "store") or typ not in _SIZES:
        raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))
    f = inst.f
    size = _SIZES[typ]
    imm, saddr, vaddr, sve = f["offset"], f["saddr"], f["addr"], f["sve"]

    def target(g: Group) -> Target:
        off = np.full((g.n, 32), imm, dtype=np.int64)
        if saddr not in (NULL, 0x7F):
            off += g.s(saddr).astype(np.int64)[:, None]
        if sve:
            off += g.v(vaddr).astype(np.int64)
        lanes = g.wave_ids()[:, None] * 32 + np.arange(32)
        off, lanes = _active(g, off), _active(g, lanes)
        if off.size and (off.min() < 0):
            raise PageFault(int(off.min()) & 0xFFFFFFFF, size, "scratch", "negative offset")
        per_lane = g.m.scratch_reserve(int(off.max()) + size if off.size else 0)
        flat = lanes * per_lane + off
        return [Span(g.m.scratch, flat, None, int(flat.min(initial=0)), int(flat.max(initial=0)))]

    if kind == "load":
        def load(g: Group) -> None:
            try:
                t = target(g)
            except PageFault as e:
                raise _fault(inst, e) from None
            if size >= 4:
                for j, v in enumerate(_load_dwords(t, size // 4, _lane_shape(g))):
                    _write_back(g, f["vdst"] + j, v)
            else:
                _write_back(g, f["vdst"], _load_sub(t, size, typ[0] == "i", _lane_shape(g)))
        return load

    def store(g: Group) -> None:
        try:
            t = target(g)
        except PageFault as e:
            raise _fault(inst, e) from None
        if size >= 4:
            _store_dwords(t, [_active(g, g.v(f["data"] + j)) for j in range(size // 4)])
        else:
            _store_sub(t, _active(g, g.v(f["data"])), size)
    return store


# -- DS (LDS) ----------------------------------------------------------------------------------
def _ds_target(g: Group, inst: Inst, addr_reg: int, off: int, size: int) -> Target:
    m = g.m
    a = _active(g, g.v(addr_reg))
    if a.size == 0:
        return []
    # The LDS address is the 32-bit sum of the VGPR and the offset (LLVM folds negative VGPR
    # terms into the unsigned offset, relying on the wrap).
    if off:
        a = a + u32(off)
    top = int(a.max()) + size
    if top > m.lds_bytes:
        raise PageFaultError(
            f"LDS access of {size} B at offset {top - size:#x} is beyond the {m.lds_bytes} B "
            "this dispatch allocated (RSRC2.LDS_SIZE; the compiler leaves it to the runtime)",
            address=inst.addr, instruction=str(inst))
    base = _active(g, m.wave_lds_base[g.idx][:, None])
    off = a.astype(np.int64) + base
    return [Span(m.lds, off, None, int(off.min()), int(off.max()))]


def compile_ds(inst: Inst) -> Exec:
    name, f = inst.name, inst.f
    if f["gds"]:
        raise KernelFault("GDS is not supported", address=inst.addr, instruction=str(inst))
    if name == "ds_nop":
        return lambda g: None
    if name in ("ds_bpermute_b32", "ds_permute_b32"):
        return _compile_permute(inst)
    kind, typ = _kind(name)
    off = f["offset0"] | f["offset1"] << 8
    addr_r, vdst, d0, d1 = f["addr"], f["vdst"], f["data0"], f["data1"]
    if kind in ("load", "store"):
        size = _SIZES[typ]

        def ds_load(g: Group) -> None:
            t = _ds_target(g, inst, addr_r, off, size)
            if size >= 4:
                for j, v in enumerate(_load_dwords(t, size // 4, _lane_shape(g))):
                    _write_back(g, vdst + j, v)
            else:
                _write_back(g, vdst, _load_sub(t, size, typ[0] == "i", _lane_shape(g)))

        def ds_store(g: Group) -> None:
            t = _ds_target(g, inst, addr_r, off, size)
            if size >= 4:
                _store_dwords(t, [_active(g, g.v(d0 + j)) for j in range(size // 4)])
            else:
                _store_sub(t, _active(g, g.v(d0)), size)
        return ds_load if kind == "load" else ds_store
    if kind.startswith("load_2addr") or kind.startswith("store_2addr"):
        size = _SIZES[typ]
        scale = size * (64 if "stride64" in kind else 1)
        o0, o1 = f["offset0"] * scale, f["offset1"] * scale
        ndw = size // 4

        def ds_load2(g: Group) -> None:
            for k, o in enumerate((o0, o1)):
                t = _ds_target(g, inst, addr_r, o, size)
                for j, v in enumerate(_load_dwords(t, ndw, _lane_shape(g))):
                    _write_back(g, vdst + k * ndw + j, v)

        def ds_store2(g: Group) -> None:
            for o, d in ((o0, d0), (o1, d1)):
                t = _ds_target(g, inst, addr_r, o, size)
                _store_dwords(t, [_active(g, g.v(d + j)) for j in range(ndw)])
        return ds_load2 if kind.startswith("load") else ds_store2
    return _compile_ds_atomic(inst, kind, typ, off)


def _compile_ds_atomic(inst: Inst, kind: str, typ: str, off: int) -> Exec:
    want = kind.endswith("_rtn")
    op = kind.removesuffix("_rtn")
    dt = _ATOMIC_DT.get(typ)
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))
    f = inst.f
    ndw = np.dtype(dt).itemsize // 4
    size = np.dtype(dt).itemsize
    cmp_first = op in ("cmpstore",)  # ds_cmpstore: data0 is the new value, data1 the compare

    def run(g: Group) -> None:
        t = _ds_target(g, inst, f["addr"], off, size)
        src = _typed_data(g, f["data0"], ndw, dt)
        cmp = _typed_data(g, f["data1"], ndw, dt) if cmp_first else None
        try:
            old = _atomic(t, op, dt, src, cmp, want, _lane_shape(g))
        except PageFault as e:
            raise _fault(inst, e) from None
        if want:
            _write_typed(g, f["vdst"], old, ndw)
    return run


def _compile_permute(inst: Inst) -> Exec:
    f = inst.f
    back = inst.name == "ds_bpermute_b32"
    off = f["offset0"] | f["offset1"] << 8

    def run(g: Group) -> None:
        lane = ((g.v(f["addr"]) + u32(off)) >> u32(2)) & u32(31)
        data = np.where(g.exec, g.v(f["data0"]), u32(0))
        rows = np.arange(g.n)[:, None]
        if back:
            # bpermute: each lane reads data from the lane it names (0 from inactive lanes).
            g.set_v(f["vdst"], data[rows, lane])
        else:
            # permute: each active lane writes its data to the lane it names.
            out = np.zeros((g.n, 32), dtype=u32)
            rr, ll = np.broadcast_to(rows, (g.n, 32))[g.exec], lane[g.exec]
            out[rr, ll] = data[g.exec]
            g.set_v(f["vdst"], out)
    return run


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
