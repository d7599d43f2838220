# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="call-overload,arg-type,assignment"
"""VALU instructions (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOPD) compiled to closures over a wave set.

`compile_valu(inst)` returns `fn(wave_set)` executing the instruction for every lane of every wave
of the wave set: sources are read through `operands` readers, the lane function comes from
`valu_table` (or one of the special forms below: compares, carries, lane masks, cross-lane ops),
and results are written to the EXEC lanes only. Inactive lanes of a lane-mask result are 0, as
on the hardware (ISA section 7.4, "VALU comparisons").
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import dpp, fast_valu, fp, valu_table
from .decode import EXEC_LO, NULL, VCC_LO, VGPR0, Inst
from .errors import KernelFault
from .machine import WaveSet, one_wave_word
from .operands import (DTYPES, Reader, const_bits, raw_reader, reader, sgpr_lane_source,
                       to_bits, vgpr_writer, width)
from .optypes import signature
from . import ops_vop3p as vop3p
from . import ops_xlane as xlane
from .ops_vop3p import compile_vop3p

Exec = Callable[[WaveSet], None]
_LANE = np.arange(32, dtype=np.uint32)
u32 = np.uint32


def _unsupported(inst: Inst, why: str) -> KernelFault:
    return KernelFault(f"unsupported instruction: {why}", address=inst.addr, instruction=str(inst))


def _src_readers(inst: Inst, types: tuple[str, ...]) -> list[Reader]:
    f = inst.f
    # VOP3 modifiers, or those a VOP1/VOP2/VOPC DPP16 dword carries (decoded into the same fields)
    vop3 = inst.enc in ("VOP3", "VOP3SD") or "dpp_ctrl" in f
    out = []
    for i, t in enumerate(types):
        code = f[f"src{i}"]
        is_f = t[0] == "f"
        out.append(reader(code, t, inst,
                          abs_=bool(vop3 and is_f and f.get("abs", 0) >> i & 1),
                          neg=bool(vop3 and is_f and f.get("neg", 0) >> i & 1),
                          hi16=bool(width(t) == 16 and f.get("opsel", 0) >> i & 1)))
    return out


def _out_mods(inst: Inst, t: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """VOP3 output modifiers: omod (×2, ×4, ÷2) then clamp to [0, 1] for float results."""
    f = inst.f
    omod, clamp = f.get("omod", 0), f.get("clamp", 0)
    if not omod and not clamp:
        return None
    if t[0] != "f":
        if omod:
            raise _unsupported(inst, "output modifier on an integer result")
        return None  # integer clamp (saturation) is applied by the few ops that honour it
    scale = {0: 1.0, 1: 2.0, 2: 4.0, 3: 0.5}[omod]

    def mods(x: np.ndarray) -> np.ndarray:
        dt = x.dtype
        if scale != 1.0:
            x = (x * dt.type(scale)).astype(dt)
        if clamp:
            # DX10_CLAMP (RSRC1 bit 21, set by the compiler): NaN clamps to 0.
            x = np.where(np.isnan(x), dt.type(0), np.clip(x, 0, 1)).astype(dt)
        return x
    return mods


def _dst_name(inst: Inst) -> int:
    return inst.f["vdst"]


def compile_valu(inst: Inst, mask_dead: bool = False) -> Exec:
    """Closure executing one VALU instruction for a wave set (raises KernelFault if unsupported).

    `mask_dead`: the lane mask the instruction writes (a carry, a compare) is never read, so it
    need not be computed (see liveness.py).
    """
    if inst.enc == "VOPD":
        return _compile_vopd(inst)
    run = compile_vop3p(inst) if inst.enc == "VOP3P" else _compile_one(inst, mask_dead)
    return _with_dpp_mask(inst, run) if dpp.is_dpp(inst) else run


def _compile_one(inst: Inst, mask_dead: bool) -> Exec:
    name = inst.name
    sig = signature(name, inst.enc, inst.op)
    special = _SPECIAL.get(name)
    if special is not None:
        if name in _MASK_WRITERS:
            return special(inst, sig, mask_dead)
        return special(inst, sig)
    cmp = valu_table.compare(name)
    if cmp is not None:
        return _compile_cmp(inst, sig, cmp)
    return _generic(inst, sig)


def _written(inst: Inst) -> tuple[list[int], list[int]]:
    """(VGPRs, lane-mask SGPRs) an instruction writes: what a DPP lane that writes nothing
    keeps."""
    name, f = inst.name, inst.f
    if name.startswith("v_cmpx"):
        return [], [EXEC_LO]
    if name.startswith("v_cmp"):
        return [], [f["vdst"] if inst.enc in ("VOP3", "VOP3SD") else VCC_LO]
    sig = signature(name, inst.enc, inst.op)
    vgprs = [f["vdst"] + k for k in range(max(1, width(sig.dst) // 32))]
    if inst.enc == "VOP3SD":
        return vgprs, [f["sdst"]]
    if name in _MASK_WRITERS:
        return vgprs, [VCC_LO]
    return vgprs, []


def _with_dpp_mask(inst: Inst, run: Exec) -> Exec:
    """Runs a DPP instruction, then puts back what its disabled lanes must not change (active
    lanes whose row or bank is masked off, or whose source is invalid without BOUND_CTRL)."""
    mask = dpp.write_mask(inst)
    vgprs, masks = _written(inst)

    def run_dpp(g: WaveSet) -> None:
        ok = mask(g)
        if ok is None:
            run(g)
            return
        keep = g.exec & ~ok
        if not keep.any():
            run(g)
            return
        old_v = [g.v(r).copy() for r in vgprs]
        old_m = [g.lanes_of(r).copy() for r in masks]
        run(g)
        for r, old in zip(vgprs, old_v):
            g.set_v_lanes(r, old, keep)
        for r, old in zip(masks, old_m):
            g.set_lanes(r, np.where(keep, old, g.lanes_of(r)))
    return run_dpp


def _generic(inst: Inst, sig) -> Exec:
    """Sources → `valu_table` lane function → destination, with VOP3 modifiers."""
    name = inst.name
    fn = valu_table.TABLE.get(name)
    if fn is None:
        raise _unsupported(inst, f"no semantics for {name}")
    if inst.f.get("clamp") and sig.dst[0] != "f":
        if name not in _SATURATING:
            raise _unsupported(inst, "integer clamp")
        fn = _saturating(fn, sig.dst)
    reads = _src_readers(inst, sig.srcs)
    write = vgpr_writer(_dst_name(inst), sig.dst, hi16=bool(inst.f.get("opsel", 0) >> 3 & 1))
    mods = _out_mods(inst, sig.dst)
    dt = DTYPES[sig.dst]
    run: Exec
    if len(reads) == 1:
        r0, = reads

        def run1(g: WaveSet) -> None:
            res = fn(r0(g))
            write(g, mods(np.asarray(res, dtype=dt)) if mods else res)
        run = run1
    elif len(reads) == 2:
        r0, r1 = reads

        def run2(g: WaveSet) -> None:
            res = fn(r0(g), r1(g))
            write(g, mods(np.asarray(res, dtype=dt)) if mods else res)
        run = run2
    else:
        def run_n(g: WaveSet) -> None:
            res = fn(*[r(g) for r in reads])
            write(g, mods(np.asarray(res, dtype=dt)) if mods else res)
        run = run_n
    return fast_valu.plain(inst, sig.srcs, sig.dst, fn, run)


# Integer ops whose CLAMP bit saturates the result to the destination type's range (the exact
# result is computed in int64: these lane functions only add, subtract and multiply).
_SATURATING = {"v_add_nc_u32", "v_add_nc_i32", "v_sub_nc_u32", "v_sub_nc_i32",
               "v_subrev_nc_u32", "v_add_nc_u16", "v_add_nc_i16", "v_sub_nc_u16",
               "v_sub_nc_i16", "v_mad_u16", "v_mad_i16", "v_mad_u32_u16", "v_mad_i32_i16",
               "v_add3_u32"}
_INT_RANGE = {"u32": (0, 2**32 - 1), "i32": (-2**31, 2**31 - 1), "u16": (0, 65535),
              "i16": (-32768, 32767)}


def _saturating(fn, t: str):
    lo, hi = _INT_RANGE[t]
    dt = DTYPES[t]

    def sat(*args: np.ndarray) -> np.ndarray:
        wide = fn(*(np.asarray(a).astype(np.int64) for a in args))
        return np.clip(wide, lo, hi).astype(dt)
    return sat


# -- compares ----------------------------------------------------------------------------------
def _compile_cmp(inst: Inst, sig, cmp) -> Exec:
    reads = _src_readers(inst, sig.srcs)
    r0, r1 = reads
    is_x = inst.name.startswith("v_cmpx")
    vop3 = inst.enc in ("VOP3", "VOP3SD")
    dst = VCC_LO if not vop3 else inst.f["vdst"]

    one_wave_dst = EXEC_LO if is_x else dst if dst not in (EXEC_LO, NULL) else -1

    def write(g: WaveSet, mask: np.ndarray) -> None:
        if g.w1 >= 0 and one_wave_dst >= 0 and mask.shape == (1, 32):
            # One wave32: the lane mask as its word, written to the SGPR now (a dictionary
            # look-up of the mask's bytes; the reader needs no packing, and an unpacked
            # form is cached by word)
            word = one_wave_word(mask)
            if not g.exec_full:
                word &= one_wave_word(g.exec)
            g.set_s(one_wave_dst, word)
            return
        if not g.exec_full:
            # (a compare's result is a fresh array: masked in place)
            mask = np.logical_and(mask, g.exec, out=mask) if mask.base is None and \
                mask.shape == g.exec.shape else mask & g.exec
        if is_x:
            # v_cmpx (gfx10+) writes EXEC only.
            g.set_lanes(126, np.broadcast_to(mask, (g.n, 32)).copy())
        else:
            g.set_lanes(dst, mask)

    def run(g: WaveSet) -> None:
        write(g, cmp(r0(g), r1(g)))
    return fast_valu.compare(inst, sig.srcs, cmp, write, run)


# -- special forms -----------------------------------------------------------------------------
def _lane_src(inst: Inst, vop2_default: int = VCC_LO) -> Callable[[WaveSet], np.ndarray]:
    if inst.enc in ("VOP3", "VOP3SD"):
        return sgpr_lane_source(inst.f["src2"], inst)
    return lambda g: g.lanes_of(vop2_default)


def _carry_dst(inst: Inst) -> int:
    return inst.f["sdst"] if inst.enc == "VOP3SD" else VCC_LO


def _cndmask(inst: Inst, sig) -> Exec:
    r0, r1 = _src_readers(inst, ("b32", "b32") if not inst.f.get("abs") and not inst.f.get("neg")
                          else ("f32", "f32"))
    lanes = _lane_src(inst)
    write = vgpr_writer(inst.f["vdst"], "b32")

    def run(g: WaveSet) -> None:
        a, b = r0(g), r1(g)
        write(g, np.where(lanes(g), b.view(u32) if b.dtype != u32 else b,
                          a.view(u32) if a.dtype != u32 else a))
    return run


def _carry_op(kind: str) -> Callable[[Inst, object], Exec]:
    """v_{add,sub,subrev}_co_u32 and their _ci forms: result plus a carry/borrow lane mask."""
    with_in = kind.endswith("_ci")
    base = kind.removesuffix("_ci")

    def make(inst: Inst, sig, mask_dead: bool = False) -> Exec:
        f = inst.f
        r0, r1 = _src_readers(inst, ("u32", "u32"))
        lanes_in = _lane_src(inst) if with_in else None
        vdst = f["vdst"]
        write = vgpr_writer(vdst, "u32")
        cdst = _carry_dst(inst)
        want_carry = not mask_dead and cdst != 124
        # The sum may be computed into the destination register only when no source is that
        # register: the carry test reads the sources after the sum is written.
        in_place = VGPR0 + vdst not in (f["src0"], f["src1"])

        def compute(a: np.ndarray, b: np.ndarray, cin: np.ndarray | None,
                    out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
            """(result, carry lane mask or None); `out`: a plane to compute the sum into."""
            if base == "subrev":
                a, b = b, a
            if cin is not None and not np.count_nonzero(cin):
                cin = None  # the common case in address arithmetic: no carry comes in
            carry = None
            if base == "add":
                r = np.add(a, b, out=out) if out is not None else a + b
                if want_carry:
                    carry = r < a
                if cin is not None:
                    r = r + cin.astype(u32) if r is not out else np.add(r, cin, out=out,
                                                                          casting="unsafe")
                    if want_carry:
                        carry = carry | (cin & (r == 0))
            else:
                r = a - b
                if want_carry:
                    carry = (b > a) if cin is None else \
                        a.astype(np.uint64) < b.astype(np.uint64) + cin
                if cin is not None:
                    r = r - cin.astype(u32)
            return r, carry

        def run(g: WaveSet) -> None:
            cin = lanes_in(g) if lanes_in is not None else None
            out = g.dest(vdst) if in_place else None
            r, carry = compute(r0(g), r1(g), cin, out)
            if r is not out:
                write(g, r)
            if carry is not None:
                g.set_lanes(cdst, carry if g.exec_full else carry & g.exec)

        src0 = fast_valu.operand(f["src0"], "u32", inst)
        src1 = fast_valu.operand(f["src1"], "u32", inst)
        if not fast_valu.is_plain(inst) or src0 is None or src1 is None:
            return run
        (k0, i0), (k1, i1) = src0, src1
        sregs = fast_valu.sgprs_read([src0, src1])

        def run_planes(g: WaveSet) -> None:
            # The same computation on the wave set's register planes (fast_valu): operands indexed
            # there, the sum computed into the destination when EXEC is full.
            P = g.planes
            if P is None:
                return run(g)
            if sregs and g.dirty and not sregs.isdisjoint(g.dirty):
                fast_valu.pack_lane_masks(g, sregs)
            A = P.views
            cin = lanes_in(g) if lanes_in is not None else None
            full = g.exec_full
            dst = A[0, vdst]
            P.dirty_v.add(vdst)
            r, carry = compute(A[k0, i0] if k0 >= 0 else i0, A[k1, i1] if k1 >= 0 else i1, cin,
                               dst if full and in_place else None)
            if r is not dst:
                if full:
                    dst[...] = r
                else:
                    np.copyto(dst, r, where=g.exec, casting="unsafe")
            if carry is not None:
                g.set_lanes(cdst, carry if full else carry & g.exec)
        return run_planes
    return make


def _mad64(signed: bool) -> Callable[[Inst, object], Exec]:
    def make(inst: Inst, sig, mask_dead: bool = False) -> Exec:
        r0, r1, r2 = _src_readers(inst, sig.srcs)
        vdst = inst.f["vdst"]
        write = vgpr_writer(vdst, sig.dst)
        cdst = inst.f["sdst"]
        want_carry = not mask_dead and cdst != 124
        src2 = inst.f["src2"]
        plain_c = src2 >= VGPR0 and not inst.f.get("neg")
        lo_r, hi_r = src2 - VGPR0, src2 - VGPR0 + 1

        def split_run(g: WaveSet, a: np.ndarray, b: np.ndarray) -> None:
            # Per-wave multiplicands (the index computation group_id * group_size + v0): a
            # 64-bit add of a per-wave product done as two 32-bit adds with a carry, which
            # moves half the bytes of the uint64 form.
            p = a.astype(np.uint64) * b.astype(np.uint64)
            p_lo = (p & np.uint64(0xFFFFFFFF)).astype(u32)
            p_hi = (p >> np.uint64(32)).astype(u32)
            c_lo, c_hi = g.v(lo_r), g.v(hi_r)
            lo = c_lo + p_lo
            carry = lo < c_lo
            hi = c_hi + p_hi
            hi += carry
            g.set_v(vdst, lo)
            g.set_v(vdst + 1, hi)

        def run(g: WaveSet) -> None:
            a, b = r0(g), r1(g)
            if not signed and plain_c and not want_carry and np.shape(a)[-1:] != (32,) \
                    and np.shape(b)[-1:] != (32,):
                split_run(g, a, b)
                return
            c = r2(g)
            if signed:
                p = a.astype(np.int64) * b.astype(np.int64)
                r = p + c
                # Signed overflow of the 64-bit add: operands agree in sign, result differs.
                carry = ((p ^ r) & (c ^ r)) < 0 if want_carry else None
            else:
                r = a.astype(np.uint64) * b.astype(np.uint64) + c
                carry = r < c if want_carry else None
            write(g, r)
            if want_carry:
                g.set_lanes(cdst, carry if g.exec_full else carry & g.exec)
        return run
    return make


def _const_scale(inst: Inst, code: int, t: str) -> float | None:
    """A multiplicand that is an inline constant ±0.5, ±1, ±2, ±4 (a power of two, so the f32
    product is exact unless it overflows or leaves the normal range: fp.fma32_pow2)."""
    if t != "f32" or code not in (240, 241, 242, 243, 244, 245, 246, 247):
        return None
    return float(np.array(const_bits(code, "f32", None), dtype=np.uint32).view(np.float32))


def _fmac(inst: Inst, sig, mask_dead: bool = False) -> Exec:
    """v_fmac: D = S0 * S1 + D (the destination is the addend)."""
    t = sig.dst
    reads = _src_readers(inst, sig.srcs[:2])
    vop3 = inst.enc in ("VOP3", "VOP3SD")
    vdst = inst.f["vdst"]
    acc = reader(VGPR0 + vdst, t, inst,
                 abs_=bool(vop3 and inst.f.get("abs", 0) >> 2 & 1),
                 neg=bool(vop3 and inst.f.get("neg", 0) >> 2 & 1))
    write = vgpr_writer(vdst, t)
    mods = _out_mods(inst, t)
    fma = fp.fma32 if t == "f32" else fp.fma64 if t == "f64" else valu_table.TABLE["v_fma_f16"]
    r0, r1 = reads
    scale = None if vop3 else _const_scale(inst, inst.f["src0"], t)
    if scale is not None:
        # S0 * S1 is exact in f32 (a power-of-two scale) in most lanes, so f32 arithmetic rounds
        # once, as the fused op does (fp.fma32_pow2 checks, and takes fp.fma32 otherwise).
        k = np.array(scale, dtype=np.float32)

        def run_scaled(g: WaveSet) -> None:
            write(g, fp.fma32_pow2(r1(g), k, acc(g)))
        return fast_valu.fmac_pow2(inst, k, run_scaled)

    def run(g: WaveSet) -> None:
        res = fma(r0(g), r1(g), acc(g))
        write(g, mods(res) if mods else res)
    return run


def _fmak(kind: str) -> Callable[[Inst, object], Exec]:
    """v_fmamk (D = S0 * K + S1) and v_fmaak (D = S0 * S1 + K), K the literal."""
    def make(inst: Inst, sig) -> Exec:
        t = sig.dst
        r0, r1 = _src_readers(inst, (t, t))
        k = np.array(inst.literal or 0, dtype=np.uint32).view(DTYPES[t]) if t == "f32" else \
            np.array((inst.literal or 0) & 0xFFFF, dtype=np.uint16).view(np.float16)
        write = vgpr_writer(inst.f["vdst"], t)
        fma = fp.fma32 if t == "f32" else valu_table.TABLE["v_fma_f16"]
        if kind == "mk":
            return lambda g: write(g, fma(r0(g), k, r1(g)))
        return lambda g: write(g, fma(r0(g), r1(g), k))
    return make


def _div_scale(inst: Inst, sig) -> Exec:
    r0, r1, r2 = _src_readers(inst, sig.srcs)
    write = vgpr_writer(inst.f["vdst"], sig.dst)
    cdst = inst.f["sdst"]

    def run(g: WaveSet) -> None:
        d, vcc = fp.div_scale(r0(g), r1(g), r2(g))
        write(g, d)
        g.set_lanes(cdst, vcc if g.exec_full else vcc & g.exec)
    return run


def _div_fmas(inst: Inst, sig) -> Exec:
    r0, r1, r2 = _src_readers(inst, sig.srcs)
    write = vgpr_writer(inst.f["vdst"], sig.dst)
    mods = _out_mods(inst, sig.dst)

    def run(g: WaveSet) -> None:
        res = fp.div_fmas(r0(g), r1(g), r2(g), g.lanes_of(VCC_LO))
        write(g, mods(res) if mods else res)
    return run


def _mbcnt(hi: bool) -> Callable[[Inst, object], Exec]:
    def make(inst: Inst, sig) -> Exec:
        r0, r1 = _src_readers(inst, ("u32", "u32"))
        write = vgpr_writer(inst.f["vdst"], "u32")
        # Bits of S0 below this lane's position (in wave32 the high half has none).
        below = (np.uint64(1) << _LANE.astype(np.uint64)) - np.uint64(1)
        below32 = np.zeros(32, dtype=u32) if hi else below.astype(u32)

        def run(g: WaveSet) -> None:
            a, b = r0(g), r1(g)
            write(g, valu_table.popcount(a & below32).astype(u32) + b)
        return run
    return make


def _shift64(inst: Inst, sig) -> Exec:
    """v_lshlrev_b64 by a constant: two 32-bit shifts instead of building uint64 lanes."""
    f = inst.f
    amount = const_bits(f["src0"], "u32", inst.literal)
    if amount is None or f["src1"] < VGPR0 or f.get("neg") or f.get("abs") or f.get("clamp"):
        return _generic(inst, sig)
    k = amount & 63
    lo_r, hi_r, d = f["src1"] - VGPR0, f["src1"] - VGPR0 + 1, f["vdst"]
    # shift counts as 0-d arrays (numpy's fast operand path)
    k_lo, k_back, k_hi = (np.array(v % 32, dtype=u32) for v in (k, 32 - k, k - 32))

    def shifted(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The new (lo, hi) words, computed before either is written (d may be the source)."""
        if k == 0:
            return lo.copy(), hi.copy()
        if k < 32:
            new_hi = hi << k_lo
            new_hi |= lo >> k_back
            return lo << k_lo, new_hi
        return np.zeros_like(lo), lo << k_hi

    def run(g: WaveSet) -> None:
        P = g.planes
        if P is None:
            new_lo, new_hi = shifted(g.v(lo_r), g.v(hi_r))
            g.set_v(d, new_lo)
            g.set_v(d + 1, new_hi)
            return
        V = P.regs[0]   # the register planes (fast_valu): no per-register view building
        new_lo, new_hi = shifted(V[lo_r], V[hi_r])
        P.dirty_v.update((d, d + 1))
        if g.exec_full:
            V[d][...] = new_lo
            V[d + 1][...] = new_hi
        else:
            np.copyto(V[d], new_lo, where=g.exec)
            np.copyto(V[d + 1], new_hi, where=g.exec)
    return run


def _nop(inst: Inst, sig) -> Exec:
    return lambda g: None


def _cndmask16(inst: Inst, sig) -> Exec:
    r0, r1 = _src_readers(inst, ("f16", "f16") if inst.f.get("abs") or inst.f.get("neg")
                          else ("b16", "b16"))
    lanes = _lane_src(inst)
    write = vgpr_writer(inst.f["vdst"], "b16", hi16=bool(inst.f.get("opsel", 0) >> 3 & 1))

    def run(g: WaveSet) -> None:
        a, b = r0(g).view(np.uint16), r1(g).view(np.uint16)
        write(g, np.where(lanes(g), b, a))
    return run


def _mqsad_u32(inst: Inst, sig) -> Exec:
    """v_mqsad_u32_u8: four masked SADs of S1 against byte windows of the 64-bit S0, each added to
    one dword of the 128-bit S2; the four u32 results go to vdst..vdst+3."""
    f = inst.f
    ra, rb = raw_reader(f["src0"], inst, 64), raw_reader(f["src1"], inst)
    c_code = f["src2"]
    d = f["vdst"]

    def run(g: WaveSet) -> None:
        a, b = ra(g), rb(g)
        outs = []
        for k in range(4):
            win = ((a >> np.uint64(8 * k)) & np.uint64(0xFFFFFFFF)).astype(u32)
            acc = g.v(c_code - VGPR0 + k) if c_code >= VGPR0 else \
                reader(c_code, "u32", inst)(g)
            outs.append(valu_table.TABLE["v_msad_u8"](win, b, acc))
        for k, o in enumerate(outs):
            g.set_v(d + k, np.broadcast_to(o, (g.n, 32)))
    return run


def _fmac_dx9(inst: Inst, sig) -> Exec:
    """v_fmac_dx9_zero_f32: D = S0 * S1 + D, except that D is kept when S0 or S1 is 0."""
    r0, r1 = _src_readers(inst, ("f32", "f32"))
    d = inst.f["vdst"]
    acc = reader(VGPR0 + d, "f32", inst)
    write = vgpr_writer(d, "f32")
    mods = _out_mods(inst, "f32")

    def run(g: WaveSet) -> None:
        a, b, c = r0(g), r1(g), acc(g)
        res = np.where((a == 0) | (b == 0), c, fp.fma32(a, b, c)).astype(np.float32)
        write(g, mods(res) if mods else res)
    return run


# (inst, signature) -> Exec; the mask writers also take `mask_dead`.
_SPECIAL: dict[str, Callable[..., Exec]] = {
    "v_cndmask_b32": _cndmask,
    "v_add_co_u32": _carry_op("add"), "v_sub_co_u32": _carry_op("sub"),
    "v_subrev_co_u32": _carry_op("subrev"), "v_add_co_ci_u32": _carry_op("add_ci"),
    "v_sub_co_ci_u32": _carry_op("sub_ci"), "v_subrev_co_ci_u32": _carry_op("subrev_ci"),
    "v_mad_u64_u32": _mad64(False), "v_mad_i64_i32": _mad64(True),
    "v_fmac_f32": _fmac, "v_fmac_f64": _fmac, "v_fmac_f16": _fmac,
    "v_fmamk_f32": _fmak("mk"), "v_fmaak_f32": _fmak("ak"),
    "v_fmamk_f16": _fmak("mk"), "v_fmaak_f16": _fmak("ak"),
    "v_div_scale_f32": _div_scale, "v_div_scale_f64": _div_scale,
    "v_div_fmas_f32": _div_fmas, "v_div_fmas_f64": _div_fmas,
    "v_readfirstlane_b32": xlane.readfirstlane, "v_readlane_b32": xlane.readlane,
    "v_writelane_b32": xlane.writelane,
    "v_mbcnt_lo_u32_b32": _mbcnt(False), "v_mbcnt_hi_u32_b32": _mbcnt(True),
    "v_nop": _nop, "v_pipeflush": _nop, "v_lshlrev_b64": _shift64,
    # v_permlane64 swaps the halves of a wave64; in wave32 it is a no-op (ISA section 16).
    "v_permlane64_b32": _nop,
    "v_permlane16_b32": xlane.permlane(False), "v_permlanex16_b32": xlane.permlane(True),
    "v_movrels_b32": xlane.movrel("s"), "v_movreld_b32": xlane.movrel("d"),
    "v_movrelsd_b32": xlane.movrel("sd"), "v_movrelsd_2_b32": xlane.movrel("sd_2"),
    "v_swaprel_b32": xlane.movrel("swap"), "v_swap_b32": xlane.swap,
    "v_cndmask_b16": _cndmask16,
    "v_dot2_f16_f16": vop3p.dot2_16("f16"), "v_dot2_bf16_bf16": vop3p.dot2_16("bf16"),
    "v_dot2acc_f32_f16": vop3p.dot2acc, "v_pk_fmac_f16": vop3p.pk_fmac,
    "v_mqsad_u32_u8": _mqsad_u32, "v_fmac_dx9_zero_f32": _fmac_dx9,
}


_MASK_WRITERS = {"v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32", "v_add_co_ci_u32",
                 "v_sub_co_ci_u32", "v_subrev_co_ci_u32", "v_mad_u64_u32", "v_mad_i64_i32"}


# -- VOPD: two independent VALU ops issued together --------------------------------------------
_VOPD_FN = {
    "v_dual_mul_f32": ("f32", lambda a, b, d, k: a * b),
    "v_dual_add_f32": ("f32", lambda a, b, d, k: a + b),
    "v_dual_sub_f32": ("f32", lambda a, b, d, k: a - b),
    "v_dual_subrev_f32": ("f32", lambda a, b, d, k: b - a),
    "v_dual_mul_dx9_zero_f32": ("f32", lambda a, b, d, k: valu_table._dx9_mul(a, b)),
    "v_dual_max_f32": ("f32", lambda a, b, d, k: fp.fmax(a, b)),
    "v_dual_min_f32": ("f32", lambda a, b, d, k: fp.fmin(a, b)),
    "v_dual_fmac_f32": ("f32", lambda a, b, d, k: fp.fma32(a, b, d)),
    "v_dual_fmaak_f32": ("f32", lambda a, b, d, k: fp.fma32(a, b, k)),
    "v_dual_fmamk_f32": ("f32", lambda a, b, d, k: fp.fma32(a, k, b)),
    "v_dual_mov_b32": ("u32", lambda a, b, d, k: a),
    "v_dual_add_nc_u32": ("u32", lambda a, b, d, k: a + b),
    "v_dual_lshlrev_b32": ("u32", lambda a, b, d, k: b << (a & u32(31))),
    "v_dual_and_b32": ("u32", lambda a, b, d, k: a & b),
    "v_dual_dot2acc_f32_f16": ("u32", lambda a, b, d, k: vop3p.dot2acc_bits(a, b, d, "f16")),
    "v_dual_dot2acc_f32_bf16": ("u32", lambda a, b, d, k: vop3p.dot2acc_bits(a, b, d, "bf16")),
}


def _vopd_half(inst: Inst, name: str, vdst: int, s0: int, vs1: int):
    entry = _VOPD_FN.get(name)
    if entry is None:
        raise _unsupported(inst, f"no semantics for {name}")
    t, fn = entry
    ra = reader(s0, t, inst)
    rb = reader(vs1, t, inst)
    rd = reader(VGPR0 + vdst, t, inst)
    k = np.array(inst.literal or 0, dtype=np.uint32).view(DTYPES[t])
    write = vgpr_writer(vdst, t)
    needs_d = name in _VOPD_ACC

    def compute(g: WaveSet) -> np.ndarray:
        return fn(ra(g), rb(g), rd(g) if needs_d else None, k)
    return compute, write


# VOPD halves whose lane function is this ufunc on (src0, vsrc1): computed into the register
_VOPD_UFUNC = {"v_dual_add_nc_u32": np.add, "v_dual_and_b32": np.bitwise_and,
               "v_dual_add_f32": np.add, "v_dual_mul_f32": np.multiply,
               "v_dual_sub_f32": np.subtract}


# VOPD halves that read their destination (the accumulator).
_VOPD_ACC = frozenset({"v_dual_fmac_f32", "v_dual_dot2acc_f32_f16", "v_dual_dot2acc_f32_bf16"})


def _vopd_reads(name: str, vdst: int, s0: int, vs1: int) -> set[int]:
    """VGPRs a VOPD half reads (a move reads only src0)."""
    regs = set() if name == "v_dual_mov_b32" else {vs1 - VGPR0}
    if s0 >= VGPR0:
        regs.add(s0 - VGPR0)
    if name in _VOPD_ACC:
        regs.add(vdst)
    return regs


def _compile_vopd(inst: Inst) -> Exec:
    f = inst.f
    x_args = (inst.name, f["vdstx"], f["srcx0"], f["vsrcx1"])
    y_args = (inst.name_y, f["vdsty"], f["srcy0"], f["vsrcy1"])
    # Both halves read their sources before either writes (ISA section 7.6). X is written
    # first, so a Y result that is a view of X's destination (a move) must be copied first.
    clash = x_args[1] in _vopd_reads(*y_args)
    if inst.name == "v_dual_cndmask_b32" or inst.name_y == "v_dual_cndmask_b32":
        return _compile_vopd_cnd(inst, clash)
    cx, wx = _vopd_half(inst, *x_args)
    cy, wy = _vopd_half(inst, *y_args)

    def run(g: WaveSet) -> None:
        x, y = cx(g), cy(g)
        if clash:
            y = np.array(y)
        wx(g, x)
        wy(g, y)
    halves = []
    for name, vdst, s0, vs1 in (x_args, y_args):
        t, fn = _VOPD_FN[name]
        halves.append(fast_valu.VopdHalf(t, fn, name in _VOPD_ACC, vdst, s0, vs1,
                                         move=name == "v_dual_mov_b32",
                                         ufunc=_VOPD_UFUNC.get(name)))
    return fast_valu.vopd(inst, halves[0], halves[1], clash, run)


def _compile_vopd_cnd(inst: Inst, clash: bool) -> Exec:
    f = inst.f
    halves = []
    for name, vdst, s0, vs1 in ((inst.name, f["vdstx"], f["srcx0"], f["vsrcx1"]),
                                (inst.name_y, f["vdsty"], f["srcy0"], f["vsrcy1"])):
        if name == "v_dual_cndmask_b32":
            ra, rb = reader(s0, "u32", inst), reader(vs1, "u32", inst)
            halves.append((lambda g, ra=ra, rb=rb: np.where(g.lanes_of(VCC_LO), rb(g), ra(g)),
                           vgpr_writer(vdst, "u32")))
        else:
            halves.append(_vopd_half(inst, name, vdst, s0, vs1))

    def run(g: WaveSet) -> None:
        x, y = halves[0][0](g), halves[1][0](g)
        if clash:
            y = np.array(y)
        halves[0][1](g, x)
        halves[1][1](g, y)
    return run


def max_vgpr(inst: Inst) -> int:
    """Highest VGPR index an instruction names (for checking against the RSRC1 allocation)."""
    top = -1
    f = inst.f
    for key in ("src0", "src1", "src2", "srcx0", "srcy0", "vsrcx1", "vsrcy1"):
        v = f.get(key)
        if v is not None and v >= VGPR0:
            top = max(top, v - VGPR0 + 1)
    for key in ("vdst", "vdstx", "vdsty"):
        if key in f and inst.enc in ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPD", "VOP3P"):
            top = max(top, f[key] + 1)
    return top


__all__ = ["compile_valu", "max_vgpr", "const_bits", "to_bits"]
