"""Memory instructions: SMEM, GLOBAL/FLAT/SCRATCH and the no-op cache controls (DS: ops_ds,
MUBUF: ops_buffer).

Addresses of all lanes of a wave set are resolved at once (mem_lanes.py). The fast path (one
mapping holds every active lane's address, the case for every buffer argument) works on offsets
into that mapping's numpy array; lanes spread over several mappings are located one by one, and
an address no mapping covers raises `PageFault` naming the first bad lane. Faults become
`PageFaultError` (a `KernelFault`) carrying the instruction.

Address apertures for FLAT (the values `src_shared_base`/`src_private_base` return): FLAT
addresses inside SHARED_APERTURE go to LDS, inside PRIVATE_APERTURE to scratch (RDNA3 ISA
section 10.1, "Flat memory instructions": the aperture decides the address space per lane).

D16 forms (ISA section 10.2, "16-bit memory operations"): `*_d16_*` loads write the low 16 bits
of the VGPR and keep the high half, `*_d16_hi_*` the high half; 8-bit d16 loads extend the byte
to 16 bits first. `*_store_d16_hi_*` stores from the high half.
"""
from __future__ import annotations

import array
import math
import struct
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from runtime.drivers.mock.memory import PageFault

from . import atomics
from . import mem_lanes as ml
from .decode import EXEC_LO, M0, NULL, VCC_LO, VGPR0, Inst
from .errors import KernelFault, PageFaultError
from .fast_valu import Bound, bindable
from .machine import (Machine, Planes, WaveSet, one_wave_lanes, one_wave_mask,
                      one_wave_word)

Exec = Callable[[WaveSet], None]
Resolver = Callable[[WaveSet], ml.Target]
u32, u64 = np.uint32, np.uint64
SHARED_APERTURE = 0x1000_0000_0000_0000
PRIVATE_APERTURE = 0x2000_0000_0000_0000
APERTURE_SIZE = 1 << 32
_SIZES = {"b8": 1, "u8": 1, "i8": 1, "b16": 2, "u16": 2, "i16": 2, "b32": 4, "b64": 8,
          "b96": 12, "b128": 16, "b256": 32, "b512": 64, "u32": 4, "i32": 4, "f32": 4, "u64": 8,
          "i64": 8, "f64": 8}
_ATOMIC_DT = {"u32": np.uint32, "i32": np.int32, "b32": np.uint32, "f32": np.float32,
              "u64": np.uint64, "i64": np.int64, "b64": np.uint64, "f64": np.float64}


@dataclass(frozen=True)
class MemOp:
    """A memory mnemonic taken apart: `kind` ('load', 'store', 'atomic_add', 'load_addtid'...),
    the data type suffix, and which VGPR half a d16 form uses ('lo', 'hi' or None)."""

    kind: str
    typ: str
    d16: str | None = None


def mem_op(name: str) -> MemOp:
    """global_load_d16_hi_u8 → (load, u8, hi); ds_load_u16_d16_hi → (load, u16, hi)."""
    parts = name.split("_")[1:]
    d16 = None
    if "d16" in parts:
        i = parts.index("d16")
        hi = i + 1 < len(parts) and parts[i + 1] == "hi"
        d16 = "hi" if hi else "lo"
        del parts[i:i + (2 if hi else 1)]
    return MemOp("_".join(parts[:-1]), parts[-1], d16)


def _kind(name: str) -> tuple[str, str]:
    """('load'|'store'|'atomic_<op>', type suffix) of a plain (non-d16) memory mnemonic."""
    op = mem_op(name)
    return op.kind, op.typ


def _fault(inst: Inst, err: PageFault) -> PageFaultError:
    return PageFaultError(str(err), address=inst.addr, instruction=str(inst), cause=err)


def _lanes(inst: Inst, resolve: Resolver, g: WaveSet) -> ml.Target | None:
    """The lanes an access of `inst` touches, None when no active lane touches memory; a page
    fault becomes the instruction's fault."""
    try:
        t = resolve(g)
    except PageFault as e:
        raise _fault(inst, e) from None
    return t if t.spans else None


def _global_target(inst: Inst, size: int, access: str) -> Resolver:
    """Resolves a GLOBAL/FLAT instruction's lane addresses (active lanes only are checked)."""
    f = inst.f
    imm, saddr, vaddr = f["offset"], f["saddr"], f["addr"]
    sbase = saddr not in (NULL, 0x7F) and inst.name.split("_")[0] != "flat"

    def target(g: WaveSet) -> ml.Target:
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
        hb: tuple[int, int] | None = ml.all_bounds(hi)
        assert hb is not None
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


def _addtid_target(inst: Inst, access: str) -> Resolver:
    """GLOBAL_*_ADDTID_B32: SGPR base (or 0 with `off`) + offset + the lane's id * 4."""
    f = inst.f
    imm, saddr = f["offset"], f["saddr"]
    lane4 = (np.arange(32, dtype=u32) * u32(4))[None, :]

    def target(g: WaveSet) -> ml.Target:
        base = np.zeros(g.n, dtype=u64)
        if saddr not in (NULL, 0x7F):
            base = g.s(saddr).astype(u64) | (g.s(saddr + 1).astype(u64) << u64(32))
        full = base[:, None] + u64(imm & 0xFFFFFFFFFFFFFFFF) + lane4.astype(u64)
        return ml.scattered(g.m.mem, ml.active(g, full), 4, access)
    return target


def _lanes_full(g: WaveSet, t: ml.Target, vals: np.ndarray) -> np.ndarray:
    """Values in a target's layout → uint32 [n, 32] (lanes outside EXEC are 0)."""
    if not t.compact:
        return np.broadcast_to(vals, (g.n, 32))
    full = np.zeros((g.n, 32), dtype=u32)
    full[g.exec] = vals
    return full


def _transfer(inst: Inst, kind: str, typ: str, vdst: int, vdata: int, resolve: Resolver,
              d16: str | None = None) -> Exec:
    """A load or store of `typ` through the lanes `resolve` gives (global, scratch or LDS)."""
    size = _SIZES[typ]
    ndw = size // 4
    signed = typ[0] == "i"

    def load(g: WaveSet) -> None:
        t = _lanes(inst, resolve, g)
        if t is None:
            return
        if size >= 4:
            for j, v in enumerate(ml.load_words(t, ndw, ml.lane_shape(g, t))):
                ml.write_back(g, vdst + j, v, t)
            return
        t = ml.compacted(t, g)
        v = ml.load_sub(t, size, signed, ml.lane_shape(g, t))
        if d16 is None:
            ml.write_back(g, vdst, v, t)
            return
        half = _lanes_full(g, t, v) & u32(0xFFFF)
        old = g.v(vdst)
        g.set_v(vdst, (old & u32(0xFFFF0000)) | half if d16 == "lo"
                else (old & u32(0xFFFF)) | (half << u32(16)))

    def store(g: WaveSet) -> None:
        t = _lanes(inst, resolve, g)
        if t is None:
            return
        if size >= 4:
            vals = [g.v(vdata + j) for j in range(ndw)]
            ml.store_words(t, [ml.active(g, v) for v in vals] if t.compact else vals)
            return
        t = ml.compacted(t, g)
        data = g.v(vdata)
        if d16 == "hi":
            data = data >> u32(16)
        ml.store_sub(t, ml.active(g, data), size)
    return load if kind == "load" else store


def compile_flat(inst: Inst, tail: RetryTail | None = None) -> Exec:
    """GLOBAL_*, FLAT_* and SCRATCH_* loads, stores and atomics. `tail`: the retry loop after
    a global_atomic_cmpswap_b32 (see RetryTail), which its step then runs too where it can
    (the step returns how many slots after it it ran)."""
    name = inst.name
    seg = name.split("_")[0]
    op = mem_op(name)
    f = inst.f
    if op.kind in ("load_addtid", "store_addtid") and seg == "global":
        kind = op.kind.removesuffix("_addtid")
        return _transfer(inst, kind, "b32", f["vdst"], f["data"], _addtid_target(inst, kind))
    if op.kind in ("load", "store") and op.typ in _SIZES:
        size = _SIZES[op.typ]
        access = "read" if op.kind == "load" else "write"
        if seg == "scratch":
            return _private_transfer(inst, op, _scratch_offsets(inst))
        glob = _transfer(inst, op.kind, op.typ, f["vdst"], f["data"],
                         _global_target(inst, size, access), op.d16)
        if seg == "global":
            if size >= 4 and not op.d16 and f["saddr"] not in (NULL, 0x7F):
                return _global_words_one_wave(inst, op.kind == "load", size // 4, glob)
            return glob
        from .ops_ds import lds_target  # ops_ds imports this module
        lds = _transfer(inst, op.kind, op.typ, f["vdst"], f["data"],
                        lds_target(inst, _aperture_offset(inst, SHARED_APERTURE), size), op.d16)
        priv = _private_transfer(inst, op, _flat_private_offsets(inst))
        return _flat_dispatch(inst, glob, lds, priv)
    if op.kind.startswith("atomic_") and seg != "scratch":
        glob = _compile_global_atomic(inst, op.kind.removeprefix("atomic_"), op.typ,
                                      tail if seg == "global" else None)
        if seg == "global":
            return glob
        from .ops_ds import compile_lds_atomic
        lds = compile_lds_atomic(inst, op.kind.removeprefix("atomic_"), op.typ, bool(f["glc"]),
                                 _aperture_offset(inst, SHARED_APERTURE), f["vdst"], f["data"],
                                 f["data"] + _SIZES[op.typ] // 4
                                 if op.kind == "atomic_cmpswap" else None)
        return _flat_dispatch(inst, glob, lds, None)
    raise KernelFault("unsupported instruction", address=inst.addr, instruction=str(inst))


def _global_words_one_wave(inst: Inst, load: bool, ndw: int, generic: Exec) -> Exec:
    """GLOBAL_LOAD/STORE of whole dwords with an SGPR base, for one wave32 with every lane
    active whose lanes fall in one mapping (a one-wave loop's loads; a store's lanes dword
    aligned): one gather or scatter over that mapping. Anything else, a fault included, takes
    `generic`, which is the reference semantics. Bindable: in a straight-line block its
    registers are looked up once per wave set.

    A load gathers with one fancy index over `Machine.noted_dwords` (the bytes from the base
    to the end of the range the dispatch's access record holds; a misaligned dword reads as
    the general path reads it). While its lanes fall in the range this step's last look-up
    found (same base, no mapping changed), the index itself is the bound check (IndexError
    past the range); else the largest offset is looked up (and noted) first."""
    f = inst.f
    imm, saddr, vaddr, vdst, vdata = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]
    nbytes = 4 * ndw
    access = "read" if load else "write"
    regs = [(vdst if load else vdata) + j for j in range(ndw)]

    saddr_hi = saddr + 1

    def go(g: WaveSet, m: Machine, sv: memoryview, off: np.ndarray, tmp: np.ndarray,
           tmp64: np.ndarray, data: list[np.ndarray], last: list[Any]) -> None:
        # last: [base, memory, its generation, Machine.noted_dwords from base, the memory's
        # generation_source] of this step's last look-up, or [None] * 5
        start = (sv[saddr] | sv[saddr_hi] << 32) + imm
        mem = m.mem
        if load:
            # (the offsets widened to numpy's index type first: indexing converts uint32 ones
            # at several times the cost of this assignment; the gather may overwrite the
            # address register)
            tmp64[...] = off
            if start == last[0] and mem is last[1] and last[4].generation == last[2]:
                try:
                    got = last[3][tmp64]
                except IndexError:
                    pass   # past the range: the look-up below notes the new one
                else:
                    _write_dwords(data, got)
                    return
            # The look-up notes [start, start + top + nbytes) as the dispatch's access (for
            # the queue's hazard checks); the gather then runs over that range's bytes.
            # (the generation read first: a mapping changed meanwhile makes the next load
            # look up again)
            src = getattr(mem, "generation_source", mem)
            gen = src.generation
            top = int(tmp64.max())
            win = m.noted_dwords(start, access, ndw) \
                if m.words_at(start, top + nbytes, access) is not None else None
            if win is None:
                return generic(g)
            last[:] = start, mem, gen, win, src
            _write_dwords(data, win[tmp64])
            return
        top = dword_offsets_top(off)
        if start & 3 or top < 0:
            return generic(g)
        # (the look-up also notes the range [start, start + top + nbytes) as the dispatch's
        # access, for the queue's hazard checks)
        got = m.words_at(start, top + nbytes, access)
        if got is None:
            return generic(g)
        words, base = got
        if base:
            words = words[base:]   # (a view: cheaper than adding base to every index)
        # The word indices go to the wave set's scratch register: the gather may overwrite
        # the address register. Every index is inside `words` (the look-up checked the
        # largest), so the gather need not check them again.
        idx = np.right_shift(off, _TWO, out=tmp)
        for j, r in enumerate(data):
            words.put(idx + u32(j) if j else idx, r, mode="clip")

    def run(g: WaveSet) -> None:
        P = g.fast
        if P is None or P.s1 is None:   # not one wave32 wave with every lane active
            generic(g)
            return
        if g.dirty:
            g.s(saddr)   # (a lane mask a VALU op left unpacked, used as an address: pack it)
            g.s(saddr + 1)
        U = P.views
        if load:
            P.dirty_v.update(regs)
        go(g, g.m, P.s1.data, U[0, vaddr], P.tmp, P.tmp64, [U[0, r] for r in regs],
           [None] * 5)

    def bind(g: WaveSet, P: Planes) -> Bound | None:
        # (bound steps run while no SGPR holds an unpacked lane mask: nothing to pack first)
        if P.s1 is None:
            return None
        U = P.views
        return go, (g, g.m, P.s1.data, U[0, vaddr], P.tmp, P.tmp64, [U[0, r] for r in regs],
                    [None] * 5), \
            tuple(regs) if load else ()
    bindable(run, bind)
    return run


def _write_dwords(data: list[np.ndarray], got: np.ndarray) -> None:
    """The gather of Machine.noted_dwords ([1, 32], or [1, 32, ndw]) into its registers."""
    if len(data) == 1:
        data[0][...] = got
    else:
        for j, r in enumerate(data):
            r[...] = got[..., j]


# The low bytes of dword-aligned offsets
_ALIGNED = bytes(b for b in range(256) if not b & 3)
_TWO = u32(2)
_LITTLE = sys.byteorder == "little"


def dword_offsets_top(off: np.ndarray) -> int:
    """The largest of one wave's uint32 byte offsets (off [1, 32]), or -1 where one is not
    dword aligned. On the bytes of the register: a numpy reduction costs several times more
    than these C-level byte operations on 32 lanes."""
    if not _LITTLE:
        if int(np.bitwise_or.reduce(off, axis=None)) & 3:
            return -1
        return int(np.maximum.reduce(off, axis=None))
    raw = off.tobytes()
    # (little-endian: byte 0 of each lane holds its two low bits)
    if raw[::4].translate(None, _ALIGNED):
        return -1
    return max(memoryview(raw).cast("I"))


# -- FLAT: per-lane address spaces ---------------------------------------------------------------
def _flat_addr(g: WaveSet, f: dict[str, int]) -> np.ndarray:
    lo, hi = g.v(f["addr"]), g.v(f["addr"] + 1)
    return (lo.astype(u64) | (hi.astype(u64) << u64(32))) + u64(f["offset"] & 0xFFFFFFFFFFFFFFFF)


def _aperture_offset(inst: Inst, aperture: int) -> Callable[[WaveSet], np.ndarray]:
    """uint32 [n, 32]: a FLAT address's offset inside an aperture (the LDS or private address)."""
    def off(g: WaveSet) -> np.ndarray:
        return (_flat_addr(g, inst.f) - u64(aperture)).astype(u32)
    return off


def _flat_dispatch(inst: Inst, glob: Exec, lds: Exec, priv: Exec | None) -> Exec:
    """FLAT: lanes whose address falls in the shared or private aperture go to LDS or scratch,
    the rest to global memory (each part runs with EXEC narrowed to its lanes)."""
    f = inst.f

    def run(g: WaveSet) -> None:
        # Fast check on the high dwords: the apertures lie far above every mapping.
        if int(g.v(f["addr"] + 1).max()) < SHARED_APERTURE >> 32:
            glob(g)
            return
        addr = _flat_addr(g, f)
        in_lds = g.exec & (addr >= u64(SHARED_APERTURE)) & \
            (addr < u64(SHARED_APERTURE + APERTURE_SIZE))
        in_priv = g.exec & (addr >= u64(PRIVATE_APERTURE)) & \
            (addr < u64(PRIVATE_APERTURE + APERTURE_SIZE))
        rest = g.exec & ~in_lds & ~in_priv
        for lanes, fn in ((rest, glob), (in_lds, lds), (in_priv, priv)):
            if not lanes.any():
                continue
            if fn is None:
                raise KernelFault("flat atomic on the private aperture (scratch atomics do not "
                                  "exist on gfx11)", address=inst.addr, instruction=str(inst))
            with g.masked(lanes):
                fn(g)
    return run


def _compile_global_atomic(inst: Inst, op: str, typ: str, tail: RetryTail | None = None
                           ) -> Exec:
    dt = _ATOMIC_DT.get(typ)
    if dt is None or op not in atomics.OPS:
        raise KernelFault("unsupported atomic", address=inst.addr, instruction=str(inst))
    f = inst.f
    want = bool(f["glc"])  # GLC on an atomic returns the pre-op value (ISA section 10.1)
    ndw = np.dtype(dt).itemsize // 4
    vdst, vdata = f["vdst"], f["data"]
    has_cmp = op == "cmpswap"
    resolve = _global_target(inst, np.dtype(dt).itemsize, "atomic")
    generic = atomic_exec(inst, op, dt, ndw, vdst, vdata, vdata + ndw if has_cmp else None,
                          want, resolve)
    if ndw != 1 or f["saddr"] in (NULL, 0x7F):
        return generic
    return _global_atomic_one_wave(inst, op, dt, want, has_cmp, generic, tail)


def _global_atomic_one_wave(inst: Inst, op: str, dt: type, want: bool, has_cmp: bool,
                            generic: Exec, tail: RetryTail | None = None) -> Exec:
    """A 32-bit GLOBAL atomic with an SGPR base for one wave32 whose active lanes are dword
    aligned and fall in one mapping (a compare-and-swap retry loop run one wave at a time):
    atomics.rmw straight on that mapping's words, in lane order. Anything else, a fault
    included, takes `generic`, the reference semantics. Returns how many slots after it it ran
    too: a returning compare-and-swap on one address runs the `tail` of its retry loop with
    it where one is given, else 0."""
    f = inst.f
    imm, saddr, vaddr, vdst, vdata = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]

    one_address = _cmpswap_one_address(imm, saddr, vaddr, vdst, vdata, want, tail) \
        if op == "cmpswap" and dt is np.uint32 else None

    def run(g: WaveSet) -> Any:   # (an int: see the docstring)
        if g.n != 1 or g.planes is None:
            generic(g)
            return 0
        if one_address is not None:
            ran = one_address(g)
            if ran >= 0:
                return ran
        ex = g.exec[0]
        off = g.v(vaddr)[0][ex]
        if not off.size:
            return 0
        lo, hi = int(off.min()), int(off.max())
        start = (int(g.s(saddr)[0]) | int(g.s(saddr + 1)[0]) << 32) + imm + lo
        rel = off - u32(lo)
        if start & 3 or int(np.bitwise_or.reduce(rel)) & 3:
            generic(g)
            return 0
        try:
            data, at = g.m.mem.find(start, hi - lo + 4, "atomic")
        except PageFault:
            generic(g)
            return 0
        arr: np.ndarray = data[at:at + hi - lo + 4].view(dt)
        src = g.v(vdata)[0][ex].view(dt)
        cmp = g.v(vdata + 1)[0][ex].view(dt) if has_cmp else None
        old: np.ndarray | None
        if hi == lo and cmp is not None and op == "cmpswap":
            old = atomics.compare_swap_one(arr, 0, src, cmp)   # every lane on one address
        else:
            old = atomics.rmw(arr, (rel >> u32(2)).astype(np.int64), op, src, cmp, want)
        if want and old is not None:
            full = np.zeros((1, 32), dtype=u32)
            full[0][ex] = old.view(u32)
            g.set_v(vdst, full)
        return 0
    return run


@dataclass(frozen=True)
class RetryTail:
    """The instructions after a returning global_atomic_cmpswap_b32 in a compare-and-swap retry
    loop (what clang emits for an atomic float add, min or max), up to the loop's branch:
        v_cmp_eq_u32 MASK, vRET, vCMP     (MASK: VCC_LO, or the SGPR of the VOP3 form)
        v_mov_b32 vCMP, vRET
        s_or_b32 DONE, MASK, DONE
        s_and_not1_b32 exec_lo, exec_lo, DONE
    with NOP slots anywhere between; `slots`: the slots after the compare-and-swap through
    the EXEC update. On one wave they follow from the swap's outcome: a lane's returned value
    equals its compare value exactly where it swapped."""

    slots: int
    cmp: int    # vCMP
    mask: int
    done: int


def retry_tail(cas: Inst, after: Iterable[tuple[Inst, bool]]) -> RetryTail | None:
    """The RetryTail following `cas`, given the slots after it as (instruction, is a NOP
    slot); None where they are anything else."""
    f = cas.f
    ret, cmp = f["vdst"], f["data"] + 1
    if cas.name != "global_atomic_cmpswap_b32" or not f["glc"] or ret == cmp:
        return None
    found: list[Inst] = []
    slots = 0
    for inst, nop in after:
        slots += 1
        if nop:
            continue
        found.append(inst)
        if len(found) == 4:
            break
    if len(found) < 4:
        return None
    vcmp, vmov, sor, sandn = found
    vr, vc = VGPR0 + ret, VGPR0 + cmp
    if vcmp.name != "v_cmp_eq_u32" or vcmp.enc not in ("VOPC", "VOP3") or \
            any(vcmp.f.get(k) for k in ("abs", "neg", "omod", "clamp", "opsel")) or \
            {vcmp.f["src0"], vcmp.f["src1"]} != {vr, vc}:
        return None
    mask = VCC_LO if vcmp.enc == "VOPC" else vcmp.f["vdst"]
    if vmov.name != "v_mov_b32" or vmov.enc != "VOP1" or vmov.f["vdst"] != cmp or \
            vmov.f["src0"] != vr:
        return None
    done = sor.f.get("sdst", -1)
    if sor.name != "s_or_b32" or {sor.f["ssrc0"], sor.f["ssrc1"]} != {mask, done} or \
            done == mask or mask > VCC_LO or done > VCC_LO:   # (SGPRs or VCC_LO)
        return None
    if sandn.name != "s_and_not1_b32" or sandn.f["sdst"] != EXEC_LO or \
            sandn.f["ssrc0"] != EXEC_LO or sandn.f["ssrc1"] != done:
        return None
    return RetryTail(slots, cmp, mask, done)


def _cmpswap_one_address(imm: int, saddr: int, vaddr: int, vdst: int, vdata: int, want: bool,
                         tail: RetryTail | None = None) -> Callable[[WaveSet], int]:
    """global_atomic_cmpswap_b32 of one wave32 whose active lanes all name one aligned, mapped
    dword (a retry loop's lanes racing on one counter): the lanes swap in lane order on Python
    ints, each seeing the value the lanes before it left; then the `tail` of the retry loop
    where one is given. The step returns the slots after the instruction it ran (tail.slots,
    or 0), or -1 where it did nothing (anything else)."""
    # The address, data and compare VGPRs are read with one tolist where they lie close
    lo = min(vaddr, vdata)
    span = max(vaddr, vdata + 1) - lo + 1
    ia, i_s, ic = vaddr - lo, vdata - lo, vdata + 1 - lo
    # A returned value goes to vdst and, with the tail, to its compare VGPR (v_mov vCMP, vRET)
    dests: tuple[int, ...] = (vdst,) if tail is None else (vdst, tail.cmp)
    # (two adjacent destinations are written as one slice of two registers)
    pair = min(dests) if len(dests) == 2 and abs(dests[0] - dests[1]) == 1 else -1
    slots = tail.slots if tail is not None else 0
    written = (tail.mask, tail.done, EXEC_LO) if tail is not None else ()
    # (the EXEC mask the tail left last, its word): a retry loop's next swap finds its lanes
    # without packing EXEC again (the mask arrays are read-only, one per word; one tuple, so
    # GPUs' threads running the same program never see a mask with another's word)
    last: list[tuple[Any, int]] = [(None, 0)]

    def run(g: WaveSet) -> int:
        P = g.planes
        if g.w1 < 0 or P is None or P.s1 is None:
            return -1
        ex = g.exec
        mask_then, word = last[0]
        if ex is not mask_then:
            word = one_wave_word(ex)
        lanes, pick = one_wave_lanes(word)
        n = len(lanes)
        if not n:
            return 0
        V = P.regs[0]
        if span <= 8:
            rows = V[lo:lo + span, 0].tolist()
            offs, srcs, cmps = pick(rows[ia]), pick(rows[i_s]), pick(rows[ic])
        else:
            offs, srcs, cmps = pick(V[vaddr, 0].tolist()), pick(V[vdata, 0].tolist()), \
                pick(V[vdata + 1, 0].tolist())
        off = offs[0]
        if offs.count(off) != n:
            return -1
        if g.dirty:
            g.s(saddr)   # (a lane mask a VALU op left unpacked, used as an address: pack it)
            g.s(saddr + 1)
        S1 = P.s1
        va = (S1.item(saddr) | S1.item(saddr + 1) << 32) + imm + off
        if va & 3:
            return -1
        got = g.m.words_at(va, 4, "atomic")
        if got is None:
            return -1
        words, at = got
        old = cur = words.item(at)
        # Lane after lane, each returns the current value and swaps where its compare value
        # matches; the matching lanes are found with index (the search runs in C). `cuts`:
        # where the returned value changes (after each success but the last lane's);
        # `swapped`: the lanes that swapped, as a lane mask.
        cuts: list[int] = []
        swapped = 0
        i = 0
        while i < n and cur in cmps:   # (`in` first: a failed search's exception costs more)
            try:
                k = cmps.index(cur, i)
            except ValueError:
                break
            cur = srcs[k]
            swapped |= 1 << lanes[k]
            i = k + 1
            if i < n:
                cuts.append(i)
        words[at] = cur
        if not want:
            return 0
        P.dirty_v.update(dests)
        first = lanes[0]
        if lanes[-1] - first + 1 == n:
            # (a retry loop's EXEC loses its lowest lanes): each run of one returned value
            # is one slice of the registers
            regs = (V[pair:pair + 2, 0],) if pair >= 0 else tuple(V[r, 0] for r in dests)
            for row in regs:
                v, a = old, first
                for c in cuts:
                    row[..., a:first + c] = v
                    v, a = srcs[c - 1], first + c   # (what the successful lane c - 1 left)
                row[..., a:first + n] = v
        else:
            vals: list[int] = []
            v, a = old, 0
            for c in cuts:
                vals += [v] * (c - a)
                v, a = srcs[c - 1], c
            vals += [v] * (n - a)
            for r in dests:
                V[r, 0][ex[0]] = vals   # the active lanes, in lane order
        if tail is None:
            return 0
        # The compare's lane mask is the lanes that swapped; DONE gathers them; EXEC keeps the
        # others; SCC is last set by the EXEC update.
        mask, done = tail.mask, tail.done
        if g.dirty:
            g.s(done)   # (a lane mask a VALU op left unpacked: pack it before reading it)
        d = S1.item(done) | swapped
        e = word & ~d & 0xFFFFFFFF
        dirty_s, cached = g.m.dirty_s, g.lanes
        S1[mask] = swapped
        S1[done] = d
        S1[EXEC_LO] = e
        dirty_s.update(written)
        cached.pop(mask, None)
        cached.pop(done, None)
        if g.dirty:
            g.dirty.difference_update(written)
        P.scc[P.w] = e != 0
        # (what set_s does for EXEC of one wave: its lanes from the word)
        got = one_wave_mask(e)
        g._set_exec(*got)
        last[0] = (got[0], e)
        return slots
    return run


_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


def f32_add_bits(a: float, b: float) -> int:
    """The f32 bit pattern of a + b for two finite f32 values given as Python floats: their sum
    in f64 rounded to f32 is the correctly rounded f32 sum (f64's 53 bits are more than twice
    f32's 24 plus two, so the two roundings never differ from one). OverflowError where the sum
    leaves f32's range."""
    return _U32.unpack(_F32.pack(a + b))[0]


def f32_of_bits(b: int) -> float:
    """The f32 value of a 32-bit pattern, as a Python float (exact)."""
    return _F32.unpack(_U32.pack(b))[0]


def fadd_retry_rounds(cas: Inst, tail: RetryTail, x: int
                      ) -> Callable[[WaveSet, int, int], tuple[int, int, bool] | None]:
    """Rounds of a float atomic add's retry loop for one wave32 at a time, without running its
    instructions one by one: the loop whose body (before the swap) is `v_add_f32 vNEW, vCMP,
    vX` (vNEW the swap's data, vCMP its compare value), its global_atomic_cmpswap_b32 on one
    address and its RetryTail. Taken in the steady state of such a loop: every active lane's
    compare value is the memory's current word (after the first round of a contended loop,
    always). Then in each round the active lanes swap in lane order while the sum they swap
    in leaves the word as it was, the first that changes it is the last to swap, and the rest
    see the new word: their compare values are all that word again. Registers, SGPRs, EXEC,
    SCC and the word end as the instructions leave them; only their final values are written.

    run(g, rounds, a) runs at most `rounds` rounds (each one time round of the loop: branch,
    add, swap and tail), stopping early once EXEC is empty after a round; returns (rounds run,
    lanes counted: the active lanes of each round times the loop's slots, computed by the
    caller as `a`-weighted, EXEC empty) or None where it does not apply now (several waves, a
    lane mask unpacked, lanes on different addresses, a compare value not the word, a value
    not finite, a sum out of f32's range before any round ran)."""
    f = cas.f
    imm, saddr, vaddr, vdst, vnew = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]
    vcmp, mask_r, done_r = tail.cmp, tail.mask, tail.done
    written = (mask_r, done_r, EXEC_LO)

    def run(g: WaveSet, rounds: int, slots: int) -> tuple[int, int, bool] | None:
        P = g.planes
        if g.w1 < 0 or P is None or P.s1 is None or g.dirty or rounds <= 0:
            return None
        word = one_wave_word(g.exec)
        lanes, pick = one_wave_lanes(word)
        n = len(lanes)
        if not n:
            return None
        V = P.regs[0]
        S1 = P.s1
        offs = pick(V[vaddr, 0].tolist())
        off = offs[0]
        va = (S1.item(saddr) | S1.item(saddr + 1) << 32) + imm + off
        if va & 3 or offs.count(off) != n or S1.item(done_r) & word:
            return None
        got = g.m.words_at(va, 4, "atomic")
        if got is None:
            return None
        words, at = got
        cur = words.item(at)
        if pick(V[vcmp, 0].tolist()).count(cur) != n:
            return None
        xs = pick(V[x, 0].view(np.float32).tolist())   # (lane order)
        cf = f32_of_bits(cur)
        if not math.isfinite(cf + sum(xs)):   # (not finite, or large: left to the rest)
            return None
        pack, bits_of = _F32.pack, _U32.unpack
        # Lane order: the word each lane saw (its returned and compare value) and the sum it
        # swapped in, for lanes that swapped (round by round); lanes i0.. are still active.
        seen: list[int] = []
        sums: list[int] = []
        i0 = prev = r = lanes_n = 0
        start = cur   # the word the last round began with (lanes prev.. were then active)
        packed = b""
        while r < rounds and i0 < n:
            # the round's swaps, computed before anything is kept (a sum out of range stops
            # before the round)
            j, new, mine = i0, cur, []
            try:
                while j < n:
                    packed = pack(cf + xs[j])   # (f32_add_bits)
                    new = bits_of(packed)[0]
                    mine.append(new)
                    j += 1
                    if new != cur:
                        break
            except OverflowError:
                j = i0
                break
            lanes_n += (n - i0) * slots
            r += 1
            seen += [cur] * (j - i0)
            sums += mine
            start, cur, prev, i0 = cur, new, i0, j
            cf = _F32.unpack(packed)[0]
        if not r:
            return None
        # (lanes from index k on, as a lane mask: the lanes are in order)
        def suffix(k: int) -> int:
            return word & -(1 << lanes[k]) & 0xFFFFFFFF if k < n else 0
        swapped = suffix(prev) ^ suffix(i0)   # the last round's
        words[at] = cur
        # The lanes still active saw the new word in their last round and added to the one
        # it began with.
        sf = f32_of_bits(start)
        seen += [cur] * (n - i0)
        sums += [f32_add_bits(sf, xv) for xv in xs[i0:]]   # (in range: the round computed it)
        # (uint32 arrays from array.array, much cheaper than numpy converting lists)
        vals = np.frombuffer(array.array("I", seen), dtype=np.uint32)
        first = lanes[0]
        idx: Any = slice(first, first + n) if lanes[-1] - first + 1 == n else list(lanes)
        # (the swap writes its returned value after the add wrote the sum: where vNEW is the
        # swap's destination too, the returned value is what stays)
        V[vnew, 0][idx] = np.frombuffer(array.array("I", sums), dtype=np.uint32)
        V[vdst, 0][idx] = vals
        V[vcmp, 0][idx] = vals
        P.dirty_v.update((vdst, vcmp, vnew))
        e = suffix(i0)
        S1[mask_r] = swapped
        S1[done_r] = S1.item(done_r) | (word ^ e)
        S1[EXEC_LO] = e
        g.m.dirty_s.update(written)
        g.lanes.pop(mask_r, None)
        g.lanes.pop(done_r, None)
        P.scc[P.w] = e != 0
        g._set_exec(*one_wave_mask(e))
        return r, lanes_n, e == 0
    return run


def waves_share_an_address(g: WaveSet, addr: np.ndarray) -> bool:
    """Whether two different waves' active lanes have the same address (addr [n, 32]). The two
    32-lane rows of a wave64 are one wave: its lanes are ordered among themselves."""
    a = ml.active(g, addr)
    if a.size < 2:
        return False
    w = np.nonzero(g.exec)[0]
    if g.m.wave64:
        w >>= 1
    order = np.lexsort((w, a))
    a, w = a[order], w[order]
    return bool(((a[1:] == a[:-1]) & (w[1:] != w[:-1])).any())


def flat_contention(inst: Inst) -> Callable[[WaveSet], bool]:
    """For a returning GLOBAL/FLAT compare-and-swap: do waves race on an address?"""
    f = inst.f
    saddr, vaddr, imm = f["saddr"], f["addr"], f["offset"]
    sbase = saddr not in (NULL, 0x7F) and inst.name.split("_")[0] != "flat"

    def contended(g: WaveSet) -> bool:
        if sbase:
            base = g.s(saddr).astype(u64) | (g.s(saddr + 1).astype(u64) << u64(32))
            addr = base[:, None] + g.v(vaddr).astype(u64)
        else:
            addr = g.v(vaddr).astype(u64) | (g.v(vaddr + 1).astype(u64) << u64(32))
        return waves_share_an_address(g, addr + u64(imm & 0xFFFFFFFFFFFFFFFF))
    return contended


def atomic_exec(inst: Inst, op: str, dt: type, ndw: int, vdst: int, vsrc: int,
                vcmp: int | None, want: bool, resolve: Resolver) -> Exec:
    """A read-modify-write of the lanes `resolve` gives; the pre-op values go to vdst if `want`."""
    def run(g: WaveSet) -> None:
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
        if want and old is not None:
            _write_typed(g, vdst, old, ndw, t)
    return run



def _typed_data(g: WaveSet, r: int, ndw: int, dt: type) -> np.ndarray:
    """Active lanes of v[r] (v[r:r+1] for 64-bit types) as dt."""
    if ndw == 1:
        return ml.active(g, g.v(r)).view(dt)
    lo = ml.active(g, g.v(r)).astype(u64)
    hi = ml.active(g, g.v(r + 1)).astype(u64)
    return (lo | (hi << u64(32))).view(dt)


def _write_typed(g: WaveSet, r: int, vals: np.ndarray, ndw: int, t: ml.Target) -> None:
    if ndw == 1:
        ml.write_back(g, r, np.ascontiguousarray(vals).view(u32), t)
    else:
        bits = np.ascontiguousarray(vals).view(u64)
        ml.write_back(g, r, (bits & u64(0xFFFFFFFF)).astype(u32), t)
        ml.write_back(g, r + 1, (bits >> u64(32)).astype(u32), t)


# -- scratch (each lane's private segment) -------------------------------------------------------
def _scratch_lanes(g: WaveSet, off: np.ndarray, size: int) -> ml.Target:
    """Private-segment byte offsets (int64 [n, 32]) of the active lanes → a target in the
    dispatch's scratch memory (Machine.scratch_view gives the layout)."""
    off = ml.active(g, off)
    if not off.size:
        return ml.Target([], True)
    if off.min() < 0:
        raise PageFault(int(off.min()) & 0xFFFFFFFF, size, "scratch", "negative offset")
    lanes = ml.active(g, g.wave_ids()[:, None] * 32 + np.arange(32))
    data, flat = g.m.scratch_view(lanes, off, size)
    return ml.Target([ml.Span(data, flat, int(flat.min()), int(flat.max()))], True)


def _private_transfer(inst: Inst, op: MemOp, offsets: Callable[[WaveSet], np.ndarray]) -> Exec:
    """A scratch load or store, one dword at a time (the dwords of one lane's element are 128 B
    apart in the swizzled layout)."""
    f = inst.f
    size = _SIZES[op.typ]

    def at(delta: int, nbytes: int) -> Resolver:
        return lambda g: _scratch_lanes(g, offsets(g) + delta, nbytes)
    if size < 4:
        return _transfer(inst, op.kind, op.typ, f["vdst"], f["data"], at(0, size), op.d16)
    parts = [_transfer(inst, op.kind, "b32", f["vdst"] + j, f["data"] + j, at(4 * j, 4))
             for j in range(size // 4)]
    if op.kind == "load" and f["vdst"] <= f["addr"] < f["vdst"] + len(parts) and f["sve"]:
        # The address VGPR is among the destinations: load it last.
        k = f["addr"] - f["vdst"]
        parts = parts[:k] + parts[k + 1:] + [parts[k]]

    def generic(g: WaveSet) -> None:
        for p in parts:
            p(g)
    if op.d16:
        return generic
    words = _private_words(op.kind == "load", size // 4, f["vdst"], f["data"], offsets, generic)
    if inst.name.startswith("scratch_") and f["sve"] and f["saddr"] in (NULL, 0x7F) and \
            f["offset"] >= 0 and not f["offset"] & 3:
        return _private_words_one_wave(op.kind == "load", size // 4, f["vdst"], f["data"],
                                       f["addr"], f["offset"], words)
    return words


_LANE32 = np.arange(32, dtype=np.int64)[None, :]


def _private_words(load: bool, ndw: int, vdst: int, vdata: int,
                   offsets: Callable[[WaveSet], np.ndarray], generic: Exec) -> Exec:
    """A scratch load or store of whole dwords where every active lane's offset is dword
    aligned and inside the slot: one gather or scatter per dword over the scratch words
    (Machine.scratch_view's layout: dword d of lane l of the wave in row w is word
    w * WAVESIZE / 4 + d * 32 + l). Anything else (a fault to report) takes `generic`."""
    def run(g: WaveSet) -> None:
        off = offsets(g)
        full = g.exec_full
        act = off if full else off[g.exec]
        if not act.size:
            return
        m = g.m
        words = m.scratch_words()
        sc = m.scratch
        assert sc is not None   # scratch_words raised otherwise
        # One reduction checks all three: an OR of the offsets is at least their maximum, has
        # bit 63 set if one is negative and bits 1:0 set if one is not dword aligned.
        bits = int(np.bitwise_or.reduce(act, axis=None))
        if bits < 0 or bits & 3 or not words.size or \
                ((bits >> 2) + ndw) * 128 > sc.wave_B and \
                ((int(act.max()) >> 2) + ndw) * 128 > sc.wave_B:
            generic(g)
            return
        if g.n == 1:   # dword d of lane l: word slot + 32 d + l, and 32 d = 8 * offset
            idx = off * 8 + (int(g.wave_ids()[0]) * (sc.wave_B >> 2) + _LANE32)
        else:
            idx = (g.wave_ids() * (sc.wave_B >> 2))[:, None] + (off >> 2) * 32 + _LANE32
        if load:
            vals = [words.take(idx + 32 * j if j else idx, mode="clip") for j in range(ndw)]
            for j, v in enumerate(vals):
                g.set_v(vdst + j, v)
            return
        if full:
            for j in range(ndw):
                words[idx + 32 * j if j else idx] = g.v(vdata + j)
            return
        ex = g.exec
        sel = idx[ex]
        for j in range(ndw):
            words[sel + 32 * j if j else sel] = np.broadcast_to(g.v(vdata + j), ex.shape)[ex]
    return run


def _private_words_one_wave(load: bool, ndw: int, vdst: int, vdata: int, vaddr: int, imm: int,
                            general: Exec) -> Exec:
    """_private_words for one wave32 with every lane active and the common addressing (a VGPR
    offset plus a non-negative, dword-aligned immediate), on the register planes: dword d of
    lane l at private offset o is word (o + imm) * 8 + 32 d + l of the wave's slot of the
    scratch words. All ndw dwords of every lane move in one fancy index over the slot, between
    it and the ndw registers (adjacent in the VGPR file). Anything else, a misaligned offset or
    one past the slot included (indexing the slot raises IndexError before anything moves),
    takes `general`. Bindable: in a straight-line block its registers and the wave's slot are
    looked up once per wave set."""
    first = vdst if load else vdata
    regs = [first + j for j in range(ndw)]
    # the word of dword j of lane l at private offset 0 (with the immediate): [ndw, 1, 32],
    # [1, 32] for one dword (the registers' shape: same-shaped operands cost numpy less)
    lane_words = (imm * 8 + 32 * np.arange(ndw, dtype=np.int64)[:, None, None]
                  + np.arange(32, dtype=np.int64)[None, None, :])
    if ndw == 1:
        lane_words = lane_words[0]
    lane_words.setflags(write=False)

    def go(g: WaveSet, off: np.ndarray, slot: np.ndarray, block: np.ndarray,
           tmp64: np.ndarray, idx: np.ndarray) -> None:
        # (dword_aligned's test inline where the host is little-endian: a call costs about
        # what the test does)
        if off.tobytes()[::4].translate(None, _ALIGNED) if _LITTLE else \
                not dword_aligned(off):
            return general(g)
        # (in the 64-bit scratch register, widened first: offset * 8 cannot wrap there, and
        # numpy's calls cost least on operands of one type)
        tmp64[...] = off
        np.left_shift(tmp64, _THREE, tmp64)
        np.add(tmp64, lane_words, idx)
        try:
            if load:
                block[...] = slot[idx]   # (gathered whole first: the address may be among them)
            else:
                slot[idx] = block
        except IndexError:   # an offset past the slot (or negative as an int32)
            return general(g)

    def slot_of(g: WaveSet, P: Planes) -> np.ndarray | None:
        sc = g.m.scratch
        if P.s1 is None or sc is None or not sc.wave_B or first + ndw > len(P.regs[0]):
            return None
        words = g.m.scratch_words()   # (kept by the machine: the same all along)
        n = sc.wave_B >> 2
        return words[P.w * n:(P.w + 1) * n] if words.size else None

    def run(g: WaveSet) -> None:
        P = g.fast
        slot = None if P is None else slot_of(g, P)
        if P is None or slot is None:
            return general(g)
        if load:
            P.dirty_v.update(regs)
        go(g, P.views[0, vaddr], slot, *_block_and_index(P, first, ndw))

    def bind(g: WaveSet, P: Planes) -> Bound | None:
        slot = slot_of(g, P)
        if slot is None:
            return None
        return go, (g, P.views[0, vaddr], slot, *_block_and_index(P, first, ndw)), \
            tuple(regs) if load else ()
    bindable(run, bind)
    return run


def _block_and_index(P: Planes, first: int, ndw: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(VGPRs first..first+ndw-1 of a one-wave Planes as one array, its 64-bit scratch
    register, an int64 index array of the block's shape): [1, 32] for one dword, [ndw, 1, 32]
    for more."""
    if ndw == 1:
        return P.views[0, first], P.tmp64, P.tmp64
    return P.regs[0][first:first + ndw], P.tmp64, np.empty((ndw, 1, 32), np.int64)


_THREE = np.array(3, dtype=np.int64)


def dword_aligned(off: np.ndarray) -> bool:
    """Whether every one of one wave's uint32 byte offsets (off [1, 32]) is dword aligned (on
    the register's low bytes where the host is little-endian)."""
    if _LITTLE:
        return not off.tobytes()[::4].translate(None, _ALIGNED)
    return not int(np.bitwise_or.reduce(off, axis=None)) & 3


def _scratch_offsets(inst: Inst) -> Callable[[WaveSet], np.ndarray]:
    f = inst.f
    imm, saddr, vaddr, sve = f["offset"], f["saddr"], f["addr"], f["sve"]

    def offsets(g: WaveSet) -> np.ndarray:
        if sve and saddr in (NULL, 0x7F):   # the common form: a VGPR offset
            return g.v(vaddr).view(np.int32).astype(np.int64) + imm
        off = np.full((g.n, 32), imm, dtype=np.int64)
        if saddr not in (NULL, 0x7F):
            off += g.s(saddr).astype(np.int32).astype(np.int64)[:, None]
        if sve:
            off += g.v(vaddr).astype(np.int32).astype(np.int64)
        return off
    return offsets


def _flat_private_offsets(inst: Inst) -> Callable[[WaveSet], np.ndarray]:
    aperture = _aperture_offset(inst, PRIVATE_APERTURE)
    return lambda g: aperture(g).astype(np.int64)


# -- SMEM --------------------------------------------------------------------------------------
def compile_smem(inst: Inst) -> Exec:
    name, f = inst.name, inst.f
    if name in ("s_dcache_inv", "s_gl1_inv", "s_atc_probe", "s_atc_probe_buffer"):
        return lambda g: None
    ndw = _SIZES[name.split("_")[-1]] // 4
    sbase, sdata, imm, soff = f["sbase"], f["sdata"], f["offset"], f["soffset"]
    buffer = name.startswith("s_buffer")

    def run(g: WaveSet) -> None:
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


def m0_of(g: WaveSet) -> np.ndarray:
    """M0 of every wave (uint32 [n])."""
    return g.s(M0)
