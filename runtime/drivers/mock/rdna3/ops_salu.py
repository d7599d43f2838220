# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="return-value,operator,misc,dict-item"
"""Scalar instructions (SOP1, SOP2, SOPC, SOPK, SOPP) compiled to closures over a wave set.

Every wave has its own SGPRs and SCC, so a scalar op is a numpy op over the wave set's waves
([n] arrays). Control flow becomes a `Step` the scheduler interprets: a branch with a per-wave
condition (waves that disagree split the wave set), the end of the program, a barrier, or a jump
to a computed address (s_setpc/s_swappc).
"""
from __future__ import annotations

import operator
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .decode import EXEC_LO, M0, NULL, VCC_LO, Inst
from .errors import KernelFault
from . import fast_salu
from .machine import WaveSet
from .operands import const_bits, width
from .optypes import signature
from .valu_table import popcount

u32, u64, i32, i64 = np.uint32, np.uint64, np.int32, np.int64
# Step kinds (interp.py): NOP and ATOMIC are NEXT steps the run loop treats apart: a NOP has
# nothing to execute, an ATOMIC may hand its waves on one by one (Step.contended), a WAIT (a GWS
# op) returns the waves it left queued (gws.Blocked) or None.
NEXT, BRANCH, END, BARRIER, JUMP, NOP, ATOMIC, WAIT = range(8)


@dataclass(slots=True)
class Step:
    """One program slot: `fn` executes (NEXT, ATOMIC), decides (BRANCH: bool [n], or a bool
    when all waves agree, or None for always), computes a target address per wave (JUMP), or
    is None (NOP, END, BARRIER). `target` is a branch's byte address."""

    kind: int
    fn: Callable | None
    inst: Inst
    target: int = -1
    # s_cbranch_execz over a block that only does EXEC-masked work: waves with an empty EXEC
    # may run through it (doing nothing) instead of splitting the wave set (see interp.py).
    masked_skip: bool = False
    # Compare-and-swap with return: whether lanes of several of the wave set's waves hit one
    # address (the scheduler then runs the waves one after another; see interp.py).
    contended: Callable | None = None
    # NEXT: how many NOP slots (s_waitcnt, s_delay_alu, s_clause, ...) follow it; the scheduler
    # steps over them at once, counting them as executed
    skip: int = 0
    # ATOMIC with a retry loop's tail: the loop around it (interp.RetryLoop); a BRANCH back:
    # the loop it closes (interp.Loop). Built on first use; None: not looked for yet, False:
    # there is none
    loop: Any = None


def _unsupported(inst: Inst, why: str = "") -> KernelFault:
    return KernelFault(f"unsupported instruction{': ' + why if why else ''}", address=inst.addr,
                       instruction=str(inst))


def sread(code: int, inst: Inst, w: int = 32,
          typ: str | None = None) -> Callable[[WaveSet], np.ndarray]:
    """Reader of a scalar source as uint32 [n] (uint64 [n] for w=64); constants are 0-d.
    `typ` (the operand's ISA type) decides how a 64-bit literal is extended."""
    t = typ or ("b64" if w == 64 else "b32")
    cb = const_bits(code, t, inst.literal)
    if cb is not None:
        c = np.array(cb, dtype=u64 if w == 64 else u32)
        return lambda g: c
    if code == NULL:
        z = np.array(0, dtype=u64 if w == 64 else u32)
        return lambda g: z
    if code == 253:
        return lambda g: g.scc().astype(u32)
    if code == 252:
        return lambda g: (~g.any_lanes(g.exec)).astype(u32)
    if code == 251:
        return lambda g: (~g.lanes_of(VCC_LO).any(axis=1)).astype(u32)
    if code >= 128:
        raise _unsupported(inst, f"scalar source {code}")
    if w == 64:
        return lambda g: g.s(code).astype(u64) | (g.s(code + 1).astype(u64) << u64(32))
    return lambda g: g.s(code)


def swrite(code: int, w: int = 32) -> Callable[[WaveSet, np.ndarray], None]:
    if w == 64:
        def wr64(g: WaveSet, v: np.ndarray) -> None:
            v = np.broadcast_to(np.asarray(v, dtype=u64), (g.n,))
            g.set_s(code, (v & u64(0xFFFFFFFF)).astype(u32))
            g.set_s(code + 1, (v >> u64(32)).astype(u32))
        return wr64

    def wr(g: WaveSet, v: np.ndarray) -> None:
        # (assigning into the SGPR file broadcasts a constant over the wave set; np.broadcast_to
        # would cost more than the rest of a single wave's scalar instruction)
        g.set_s(code, np.asarray(v).astype(u32, copy=False))
    return wr


def _nz(d: np.ndarray) -> np.ndarray:
    return d != 0


def _bfe(a: np.ndarray, b: np.ndarray, signed: bool, w: int) -> np.ndarray:
    """s_bfe: offset in b[5:0] (b[4:0] for 32-bit), width in b[22:16]."""
    dt_u = u64 if w == 64 else u32
    off = (b & u32(w - 1)).astype(dt_u)
    width_ = ((b >> u32(16)) & u32(0x7F)).astype(np.int64)
    width_ = np.minimum(width_, w)
    mask = np.where(width_ >= w, np.array(~np.uint64(0) if w == 64 else 0xFFFFFFFF, dtype=dt_u),
                    ((np.uint64(1) << width_.astype(np.uint64)) - np.uint64(1)).astype(dt_u))
    field = (np.asarray(a, dtype=dt_u) >> off) & mask
    if not signed:
        return field
    sh = (w - width_) % w
    sdt = i64 if w == 64 else i32
    out = (field << sh.astype(dt_u)).view(sdt) >> sh.astype(sdt)
    return np.where(width_ == 0, sdt(0), out).view(dt_u)


_SIGN32 = u32(0x80000000)


# Signed overflow of a 32-bit add/subtract on the uint32 bit patterns (the sign bit of the
# test word; no int32 views, so the same code is cheap on numpy scalars).
Word = np.ndarray | np.generic   # an array of waves, or one wave's numpy scalar


def _ovf_add(a: Word, b: Word, d: Word) -> np.ndarray:
    return ((a ^ d) & (b ^ d)) >= _SIGN32


def _ovf_sub(a: Word, b: Word, d: Word) -> np.ndarray:
    return ((a ^ b) & (a ^ d)) >= _SIGN32


def _sop2_fn(name: str) -> Callable | None:
    """(a, b, scc) → (d, new scc or None)."""
    w = 64 if name.endswith("64") else 32
    mask = u64(63) if w == 64 else u32(31)
    dt = u64 if w == 64 else u32
    base = name.rsplit("_", 1)[0]
    logic = {"s_and": lambda a, b: a & b, "s_or": lambda a, b: a | b, "s_xor": lambda a, b: a ^ b,
             "s_nand": lambda a, b: ~(a & b), "s_nor": lambda a, b: ~(a | b),
             "s_xnor": lambda a, b: ~(a ^ b), "s_and_not1": lambda a, b: a & ~b,
             "s_or_not1": lambda a, b: a | ~b}
    if base in logic:
        fn = logic[base]
        return lambda a, b, s: (lambda d: (d, _nz(d)))(fn(a, b))
    table: dict[str, Callable] = {
        "s_add_u32": lambda a, b, s: (lambda d: (d, d < a))(a + b),
        "s_sub_u32": lambda a, b, s: (a - b, b > a),
        "s_add_i32": lambda a, b, s: (lambda d: (d, _ovf_add(a, b, d)))(a + b),
        "s_sub_i32": lambda a, b, s: (lambda d: (d, _ovf_sub(a, b, d)))(a - b),
        "s_addc_u32": lambda a, b, s: (
            lambda t: (t.astype(u32), t > u64(0xFFFFFFFF)))(
            a.astype(u64) + b.astype(u64) + s.astype(u64)),
        "s_subb_u32": lambda a, b, s: (
            a - b - s.astype(u32), a.astype(u64) < b.astype(u64) + s.astype(u64)),
        "s_absdiff_i32": lambda a, b, s: (lambda d: (d.view(u32), d != 0))(
            np.abs(a.view(i32).astype(i64) - b.view(i32)).astype(u32).view(i32)),
        "s_lshl_b32": lambda a, b, s: (lambda d: (d, _nz(d)))(a << (b & mask)),
        "s_lshr_b32": lambda a, b, s: (lambda d: (d, _nz(d)))(a >> (b & mask)),
        "s_ashr_i32": lambda a, b, s: (lambda d: (d.view(u32), _nz(d)))(
            a.view(i32) >> (b & mask).astype(i32)),
        "s_lshl_b64": lambda a, b, s: (lambda d: (d, _nz(d)))(a << (b.astype(u64) & u64(63))),
        "s_lshr_b64": lambda a, b, s: (lambda d: (d, _nz(d)))(a >> (b.astype(u64) & u64(63))),
        "s_ashr_i64": lambda a, b, s: (lambda d: (d.view(u64), _nz(d)))(
            a.view(i64) >> (b.astype(i64) & i64(63))),
        "s_min_i32": lambda a, b, s: (np.minimum(a.view(i32), b.view(i32)).view(u32),
                                      a.view(i32) < b.view(i32)),
        "s_min_u32": lambda a, b, s: (np.minimum(a, b), a < b),
        "s_max_i32": lambda a, b, s: (np.maximum(a.view(i32), b.view(i32)).view(u32),
                                      a.view(i32) > b.view(i32)),
        "s_max_u32": lambda a, b, s: (np.maximum(a, b), a > b),
        "s_bfe_u32": lambda a, b, s: (lambda d: (d, _nz(d)))(_bfe(a, b, False, 32)),
        "s_bfe_i32": lambda a, b, s: (lambda d: (d, _nz(d)))(_bfe(a, b, True, 32)),
        "s_bfe_u64": lambda a, b, s: (lambda d: (d, _nz(d)))(_bfe(a, b, False, 64)),
        "s_bfe_i64": lambda a, b, s: (lambda d: (d, _nz(d)))(_bfe(a, b, True, 64)),
        "s_bfm_b32": lambda a, b, s: (((u64(1) << (a & u32(31)).astype(u64)) - u64(1))
                                      .astype(u32) << (b & u32(31)), None),
        "s_bfm_b64": lambda a, b, s: (((u64(1) << (a & u32(63)).astype(u64)) - u64(1))
                                      << (b & u32(63)).astype(u64), None),
        "s_mul_i32": lambda a, b, s: (a * b, None),
        "s_mul_hi_u32": lambda a, b, s: (((a.astype(u64) * b) >> u64(32)).astype(u32), None),
        "s_mul_hi_i32": lambda a, b, s: (((a.view(i32).astype(i64) * b.view(i32)) >> i64(32))
                                         .astype(u32), None),
        "s_cselect_b32": lambda a, b, s: (np.where(s, a, b), None),
        "s_cselect_b64": lambda a, b, s: (np.where(s, a, b), None),
        "s_pack_ll_b32_b16": lambda a, b, s: ((a & u32(0xFFFF)) | (b << u32(16)), None),
        "s_pack_lh_b32_b16": lambda a, b, s: ((a & u32(0xFFFF)) | (b & u32(0xFFFF0000)), None),
        "s_pack_hh_b32_b16": lambda a, b, s: ((a >> u32(16)) | (b & u32(0xFFFF0000)), None),
        "s_pack_hl_b32_b16": lambda a, b, s: ((a >> u32(16)) | (b << u32(16)), None),
    }
    for n in (1, 2, 3, 4):
        table[f"s_lshl{n}_add_u32"] = (lambda n: lambda a, b, s: (
            lambda t: (t.astype(u32), t > u64(0xFFFFFFFF)))((a.astype(u64) << u64(n)) + b))(n)
    del dt
    return table.get(name)


def _saveexec(name: str) -> Callable | None:
    """s_<op>_saveexec / s_<op>_wrexec (wave32): (s0, exec) → new exec; returns (fn, wrexec)."""
    base = name.rsplit("_", 1)[0]
    ops = {"s_and_saveexec": lambda s, e: s & e, "s_or_saveexec": lambda s, e: s | e,
           "s_xor_saveexec": lambda s, e: s ^ e, "s_nand_saveexec": lambda s, e: ~(s & e),
           "s_nor_saveexec": lambda s, e: ~(s | e), "s_xnor_saveexec": lambda s, e: ~(s ^ e),
           "s_and_not0_saveexec": lambda s, e: ~s & e, "s_and_not1_saveexec": lambda s, e: s & ~e,
           "s_or_not0_saveexec": lambda s, e: ~s | e, "s_or_not1_saveexec": lambda s, e: s | ~e,
           "s_and_not0_wrexec": lambda s, e: ~s & e, "s_and_not1_wrexec": lambda s, e: s & ~e}
    return ops.get(base)


def _sop1_fn(name: str, w: int) -> Callable | None:
    """a → (d, scc or None) for the plain SOP1 ops."""
    dt = u64 if w == 64 else u32
    table: dict[str, Callable] = {
        "s_mov": lambda a: (a, None),
        "s_not": lambda a: (lambda d: (d, _nz(d)))(~np.asarray(a, dtype=dt)),
        "s_brev": lambda a: (_brev(np.asarray(a, dtype=dt), w), None),
        "s_bcnt0_i32": lambda a: (lambda d: (d, _nz(d)))(
            (w - popcount(np.asarray(a, dtype=dt))).astype(u32)),
        "s_bcnt1_i32": lambda a: (lambda d: (d, _nz(d)))(
            popcount(np.asarray(a, dtype=dt)).astype(u32)),
        "s_ctz_i32": lambda a: (_ctz(np.asarray(a, dtype=dt), w), None),
        "s_clz_i32": lambda a: (_clz(np.asarray(a, dtype=dt), w), None),
        "s_cls_i32": lambda a: (_cls(np.asarray(a, dtype=u32)), None),
        "s_sext_i32": lambda a: (np.asarray(a).astype(
            np.int8 if name.endswith("i8") else np.int16).astype(i32).view(u32), None),
        "s_abs_i32": lambda a: (lambda d: (d, _nz(d)))(
            np.abs(np.asarray(a, dtype=u32).view(i32).astype(i64)).astype(u32)),
    }
    table.update({
        "s_quadmask": lambda a: (lambda d: (d, _nz(d)))(_quadmask(np.asarray(a, dtype=dt), w)),
        "s_wqm": lambda a: (lambda d: (d, _nz(d)))(_wqm(np.asarray(a, dtype=dt), w)),
        "s_bitreplicate_b64_b32": lambda a: (_bitreplicate(np.asarray(a, dtype=u32)), None),
    })
    if name == "s_cls_i32_i64":
        return lambda a: (_cls64(np.asarray(a, dtype=u64)), None)
    for key, fn in table.items():
        if name == key or name.startswith(key + "_"):
            return fn
    return None


def _clz(a: np.ndarray, w: int) -> np.ndarray:
    if w == 64:
        # In halves: float64 cannot hold every 64-bit value exactly (frexp would round up).
        a = np.asarray(a, dtype=u64)
        hi, lo = (a >> u64(32)).astype(u32), (a & u64(0xFFFFFFFF)).astype(u32)
        return np.where(hi != 0, _clz(hi, 32), np.where(lo != 0, _clz(lo, 32) + u32(32),
                                                         u32(0xFFFFFFFF))).astype(u32)
    _, e = np.frexp(np.asarray(a, dtype=np.float64))
    return np.where(a == 0, i32(-1), i32(w) - e.astype(i32)).view(u32)


def _ctz(a: np.ndarray, w: int) -> np.ndarray:
    low = a & (~a + a.dtype.type(1))
    _, e = np.frexp(low.astype(np.float64))
    return np.where(a == 0, i32(-1), e.astype(i32) - i32(1)).view(u32)


def _cls(a: np.ndarray) -> np.ndarray:
    s = a.view(i32)
    v = (s ^ (s >> i32(31))).view(u32)
    return np.where(v == 0, u32(0xFFFFFFFF), _clz(v, 32))


def _cls64(a: np.ndarray) -> np.ndarray:
    """s_cls_i32_i64: leading bits equal to the sign bit, minus one; -1 if all are equal."""
    s = a.view(i64)
    v = (s ^ (s >> i64(63))).view(u64)
    return np.where(v == 0, u32(0xFFFFFFFF), _clz(v, 64))


def _quadmask(a: np.ndarray, w: int) -> np.ndarray:
    """Bit i of the result: any bit of nibble i of a (s_quadmask_b32/b64)."""
    out = np.zeros(np.shape(a), dtype=a.dtype)
    for i in range(w // 4):
        nib = (a >> a.dtype.type(4 * i)) & a.dtype.type(15)
        out |= (nib != 0).astype(a.dtype) << a.dtype.type(i)
    return out


def _wqm(a: np.ndarray, w: int) -> np.ndarray:
    """Whole quad mode: every nibble of a that has a bit set becomes 0xF (s_wqm_b32/b64)."""
    out = np.zeros(np.shape(a), dtype=a.dtype)
    for i in range(w // 4):
        nib = (a >> a.dtype.type(4 * i)) & a.dtype.type(15)
        out |= np.where(nib != 0, a.dtype.type(15), a.dtype.type(0)) << a.dtype.type(4 * i)
    return out


def _bitreplicate(a: np.ndarray) -> np.ndarray:
    """Each bit of a 32-bit value twice: bit i → bits 2i and 2i+1."""
    out = np.zeros(np.shape(a), dtype=u64)
    for i in range(32):
        bit = ((a >> u32(i)) & u32(1)).astype(u64)
        out |= (bit * u64(3)) << u64(2 * i)
    return out


def _brev(a: np.ndarray, w: int) -> np.ndarray:
    bits = np.unpackbits(np.ascontiguousarray(np.atleast_1d(a)).view(np.uint8).reshape(-1, w // 8),
                         axis=1, bitorder="little")
    return np.packbits(bits[:, ::-1], axis=1, bitorder="little").view(
        u64 if w == 64 else u32).reshape(np.shape(a))


# The operators rather than numpy's ufuncs: the same on arrays, much cheaper on numpy scalars.
_CMP = {"eq": operator.eq, "lg": operator.ne, "gt": operator.gt, "ge": operator.ge,
        "lt": operator.lt, "le": operator.le}


def _sopc(inst: Inst) -> Callable[[WaveSet], None]:
    name = inst.name
    parts = name.split("_")
    if parts[1] == "bitcmp0" or parts[1] == "bitcmp1":
        w = 64 if name.endswith("64") else 32
        a, b = sread(inst.f["ssrc0"], inst, w), sread(inst.f["ssrc1"], inst)
        want = 1 if parts[1] == "bitcmp1" else 0
        dt = u64 if w == 64 else u32

        def bitcmp(g: WaveSet) -> None:
            bit = (np.asarray(a(g), dtype=dt) >> (b(g) & u32(w - 1)).astype(dt)) & dt(1)
            g.set_scc(np.broadcast_to(bit == want, (g.n,)))
        return bitcmp
    if len(parts) != 4 or parts[2] not in _CMP:
        raise _unsupported(inst)
    w = width(parts[3])
    a, b = sread(inst.f["ssrc0"], inst, w), sread(inst.f["ssrc1"], inst, w)
    cmp = _CMP[parts[2]]
    signed = parts[3][0] == "i"

    def pred(x: np.ndarray, y: np.ndarray) -> tuple[None, np.ndarray]:
        if signed:   # signed order of the bit patterns: flip the sign bits, compare unsigned
            x, y = x ^ _SIGN32, y ^ _SIGN32
        return None, cmp(x, y)

    def run(g: WaveSet) -> None:
        g.set_scc(pred(a(g), b(g))[1])
    flip = 0x80000000 if signed else 0

    def pred_int(x: int, y: int) -> tuple[None, bool]:
        return None, cmp(x ^ flip, y ^ flip)
    # (fast_salu binds the operator inline)
    pred_int.compare = (cmp, flip)   # type: ignore[attr-defined]
    if w == 32:
        return fast_salu.scalar_step([(inst.f["ssrc0"], parts[3]), (inst.f["ssrc1"], parts[3])],
                                     inst.literal, None, pred, run, int_fn=pred_int)
    return run


def _sopk(inst: Inst) -> Step:
    name, f = inst.name, inst.f
    imm = f["simm16"]
    simm = imm - 0x10000 if imm & 0x8000 else imm
    dst = f["sdst"]
    # Subvector loops split a wave64's EXEC in two halves; a wave32 has one half, so neither
    # end of the loop changes anything.
    if name.startswith("s_waitcnt") or name in ("s_version", "s_subvector_loop_begin",
                                                 "s_subvector_loop_end"):
        return Step(NOP, None, inst)
    if name == "s_movk_i32":
        v = np.array(simm & 0xFFFFFFFF, dtype=u32)
        vs = u32(simm & 0xFFFFFFFF)
        vi = simm & 0xFFFFFFFF
        return Step(NEXT, fast_salu.scalar_step(
            [], None, dst, lambda: (vs, None),
            lambda g: g.set_s(dst, np.broadcast_to(v, (g.n,))), int_fn=lambda: (vi, None)),
            inst)
    if name == "s_cmovk_i32":
        v = np.array(simm & 0xFFFFFFFF, dtype=u32)
        return Step(NEXT, lambda g: g.set_s(dst, np.where(g.scc(), v, g.s(dst))), inst)
    if name.startswith("s_cmpk_"):
        op, typ = name.split("_")[2], name.split("_")[3]
        signed = typ == "i32"
        # signed: the sign-extended immediate, compared in signed order (sign bits flipped)
        ks = u32((simm & 0xFFFFFFFF) ^ 0x80000000) if signed else u32(imm)
        flip = _SIGN32 if signed else u32(0)
        cmp = _CMP[op]

        def cmpk(a: np.ndarray) -> tuple[None, np.ndarray]:
            return None, cmp(a ^ flip, ks)
        flip_i, ks_i = int(flip), int(ks)
        return Step(NEXT, fast_salu.scalar_step(
            [(dst, "b32")], None, None, cmpk, lambda g: g.set_scc(cmpk(g.s(dst))[1]),
            int_fn=lambda a: (None, cmp(a ^ flip_i, ks_i))), inst)
    if name == "s_addk_i32":
        k = np.array(simm & 0xFFFFFFFF, dtype=u32)
        ks = u32(simm & 0xFFFFFFFF)

        def addk(g: WaveSet) -> None:
            a = g.s(dst)
            d = a + k
            g.set_scc(_ovf_add(a, np.broadcast_to(k, a.shape), d))
            g.set_s(dst, d)

        def addk1(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            d = a + ks
            return d, _ovf_add(a, ks, d)
        ki = simm & 0xFFFFFFFF
        return Step(NEXT, fast_salu.scalar_step([(dst, "b32")], None, dst, addk1, addk,
                                                int_fn=lambda a: fast_salu.add_i32(a, ki)), inst)
    if name == "s_mulk_i32":
        k = np.array(simm & 0xFFFFFFFF, dtype=u32)
        ks = u32(simm & 0xFFFFFFFF)
        ki = simm & 0xFFFFFFFF
        return Step(NEXT, fast_salu.scalar_step(
            [(dst, "b32")], None, dst, lambda a: (a * ks, None),
            lambda g: g.set_s(dst, g.s(dst) * k),
            int_fn=lambda a: ((a * ki) & 0xFFFFFFFF, None)), inst)
    if name == "s_getreg_b32":
        # Hardware registers (MODE, HW_ID ...): the mock reports zeros, i.e. round-to-nearest,
        # which is what numpy implements.
        return Step(NEXT, lambda g: g.set_s(dst, np.zeros(g.n, dtype=u32)), inst)
    if name in ("s_setreg_b32", "s_setreg_imm32_b32"):
        return Step(NOP, None, inst)
    if name == "s_call_b64":
        ret = np.array(inst.addr + 4, dtype=u64)
        w = swrite(dst, 64)

        def call(g: WaveSet) -> None:
            w(g, np.broadcast_to(ret, (g.n,)))
        return Step(JUMP, _const_jump(call, inst.addr + 4 + 4 * simm), inst)
    raise _unsupported(inst)


def _const_jump(pre: Callable[[WaveSet], None], target: int) -> Callable[[WaveSet], np.ndarray]:
    t = np.array(target, dtype=u64)

    def jump(g: WaveSet) -> np.ndarray:
        pre(g)
        return np.broadcast_to(t, (g.n,))
    return jump


_NOPS = {"s_nop", "s_waitcnt", "s_delay_alu", "s_clause", "s_waitcnt_depctr", "s_sendmsg",
         "s_sendmsghalt", "s_set_inst_prefetch_distance", "s_setprio", "s_sleep", "s_icache_inv",
         "s_wait_idle", "s_wait_event", "s_incperflevel", "s_decperflevel", "s_ttracedata",
         "s_ttracedata_imm", "s_denorm_mode", "s_wakeup", "s_code_end"}


# Branch conditions: bool [n] per wave, or a Python bool when every wave agrees (the common
# cases below answer that without an array: the SCC of a wave set of one wave, an EXEC with no
# lane or with every lane set).
def _scc_cond(g: WaveSet, want: bool) -> np.ndarray | bool:
    P = g.planes
    if P is not None and P.s1 is not None:
        return bool(P.scc[P.w]) is want
    return g.scc() if want else ~g.scc()


def _exec_cond(g: WaveSet, want_lanes: bool) -> np.ndarray | bool:
    if g.active == 0:
        return not want_lanes
    if g.exec_full or g.n == (2 if g.m.wave64 else 1):   # one wave, and it has lanes
        return want_lanes
    has = g.any_lanes(g.exec)
    return has if want_lanes else ~has


def _sopp(inst: Inst) -> Step:
    name = inst.name
    imm = inst.f["simm16"]
    simm = imm - 0x10000 if imm & 0x8000 else imm
    if name in _NOPS:
        # s_denorm_mode: the mock always keeps denormals (what FLOAT_MODE 0xF0 asks for).
        return Step(NOP, None, inst)
    if name == "s_round_mode":
        if imm & 0xF:
            raise _unsupported(inst, "only round-to-nearest-even is implemented")
        return Step(NOP, None, inst)
    if name in ("s_endpgm", "s_endpgm_saved"):
        return Step(END, None, inst)
    if name == "s_barrier":
        return Step(BARRIER, None, inst)
    target = inst.addr + 4 + 4 * simm
    conds: dict[str, Callable[[WaveSet], np.ndarray | bool] | None] = {
        "s_branch": None,
        "s_cbranch_scc0": lambda g: _scc_cond(g, False),
        "s_cbranch_scc1": lambda g: _scc_cond(g, True),
        "s_cbranch_vccz": lambda g: ~g.any_lanes(g.lanes_of(VCC_LO)),
        "s_cbranch_vccnz": lambda g: g.any_lanes(g.lanes_of(VCC_LO)),
        "s_cbranch_execz": lambda g: _exec_cond(g, False),
        "s_cbranch_execnz": lambda g: _exec_cond(g, True),
    }
    if name in conds:
        return Step(BRANCH, conds[name], inst, target=target)
    if name.startswith("s_cbranch_cdbg"):
        # The conditional-debug flags are clear (no debugger attaches to the mock).
        return Step(BRANCH, lambda g: np.zeros(g.n, dtype=bool), inst, target=target)
    if name == "s_setkill":
        return Step(NOP, None, inst)
    if name == "s_sethalt":
        if imm & 1:
            raise KernelFault("s_sethalt 1 halts the wave (no debugger resumes it in the mock)",
                              address=inst.addr, instruction=str(inst))
        return Step(NOP, None, inst)
    if name == "s_trap":
        raise KernelFault(f"s_trap {imm} (no trap handler in the mock)", address=inst.addr,
                          instruction=str(inst))
    raise _unsupported(inst)


def _sop1(inst: Inst) -> Step:
    name, f = inst.name, inst.f
    w = 64 if name.endswith("64") else 32
    dst, src = f["sdst"], f["ssrc0"]
    if name == "s_getpc_b64":
        nxt = np.array(inst.addr + inst.size, dtype=u64)
        wr = swrite(dst, 64)
        return Step(NEXT, lambda g: wr(g, np.broadcast_to(nxt, (g.n,))), inst)
    if name in ("s_setpc_b64", "s_swappc_b64"):
        rd = sread(src, inst, 64)
        nxt = np.array(inst.addr + inst.size, dtype=u64)
        wr_pc = swrite(dst, 64) if name == "s_swappc_b64" else None

        def jump(g: WaveSet) -> np.ndarray:
            t = np.broadcast_to(rd(g), (g.n,)).copy()
            if wr_pc is not None:
                wr_pc(g, np.broadcast_to(nxt, (g.n,)))
            return t
        return Step(JUMP, jump, inst)
    se = _saveexec(name)
    if se is not None:
        rd = sread(src, inst, w)
        wrexec = "wrexec" in name
        dt = u64 if w == 64 else u32
        cur_exec = sread(EXEC_LO, inst, w)
        wr_exec, wr_dst = swrite(EXEC_LO, w), swrite(dst, w)

        def saveexec(g: WaveSet) -> None:
            # The _b64 forms work on EXEC_HI:EXEC_LO (ISA pseudo-code); a wave32's lanes are
            # EXEC_LO's bits.
            s = rd(g)
            old = np.asarray(cur_exec(g), dtype=dt).copy()
            new = np.broadcast_to(se(s, old), (g.n,)).astype(dt)
            wr_exec(g, new)
            wr_dst(g, new if wrexec else old)
            g.set_scc(new != 0)
        if w == 32:
            return Step(NEXT, fast_salu.saveexec_step(src, inst.literal, dst, se, wrexec,
                                                      saveexec), inst)
        return Step(NEXT, saveexec, inst)
    if name in ("s_movrels_b32", "s_movrels_b64", "s_movreld_b32", "s_movreld_b64",
                "s_movrelsd_2_b32"):
        return Step(NEXT, _movrel(inst, w), inst)
    if name == "s_rfe_b64":
        rd = sread(src, inst, 64)
        return Step(JUMP, lambda g: np.broadcast_to(rd(g), (g.n,)).copy(), inst)
    if name in ("s_sendmsg_rtn_b32", "s_sendmsg_rtn_b64"):
        return Step(NEXT, _sendmsg_rtn(inst, w), inst)
    if name in ("s_cmov_b32", "s_cmov_b64"):
        rd, wr, cur = sread(src, inst, w), swrite(dst, w), sread(dst, inst, w)
        return Step(NEXT, lambda g: wr(g, np.where(g.scc(), rd(g), cur(g))), inst)
    if name in ("s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64"):
        rd, cur, wr = sread(src, inst), sread(dst, inst, w), swrite(dst, w)
        dt = u64 if w == 64 else u32
        one = name.startswith("s_bitset1")

        def bitset(g: WaveSet) -> None:
            bit = dt(1) << (rd(g) & u32(w - 1)).astype(dt)
            wr(g, cur(g) | bit if one else cur(g) & ~bit)
        return Step(NEXT, bitset, inst)
    fn = _sop1_fn(name, w)
    if fn is None:
        raise _unsupported(inst)
    sig = signature(name, "SOP1")
    src_w = width(sig.srcs[0]) if sig.srcs else w
    rd = sread(src, inst, src_w)
    wr = swrite(dst, width(sig.dst))

    def run(g: WaveSet) -> None:
        d, scc = fn(rd(g))
        wr(g, d)
        if scc is not None:
            g.set_scc(scc)
    if src_w == width(sig.dst) == 32:
        return Step(NEXT, fast_salu.scalar_step([(src, sig.srcs[0] if sig.srcs else "b32")],
                                                inst.literal, dst, fn, run,
                                                int_fn=fast_salu.INT_SOP1.get(name)), inst)
    return Step(NEXT, run, inst)


def _movrel(inst: Inst, w: int) -> Callable[[WaveSet], None]:
    """s_movrels / s_movreld / s_movrelsd_2: SGPR moves whose source (movrels), destination
    (movreld) or both (movrelsd_2: source + M0[9:0], destination + M0[25:16]) are offset by M0."""
    name, f = inst.name, inst.f
    src, dst = f["ssrc0"], f["sdst"]
    nreg = w // 32

    def run(g: WaveSet) -> None:
        g.flush()   # lane masks a VALU op left unpacked become SGPR values first
        m0 = g.s(M0).astype(np.int64)
        if name == "s_movrelsd_2_b32":
            s_idx, d_idx = src + (m0 & 0x3FF), dst + ((m0 >> 16) & 0x3FF)
        elif name.startswith("s_movrels"):
            s_idx, d_idx = src + m0, np.full(g.n, dst)
        else:
            s_idx, d_idx = np.full(g.n, src), dst + m0
        if (np.concatenate([s_idx, d_idx]) + nreg > 106).any():
            raise KernelFault(f"M0-relative SGPR index beyond s105 ({name})", address=inst.addr,
                              instruction=str(inst))
        waves = g.wave_ids()
        if name.startswith("s_movreld") and src >= 106:
            vals = [np.broadcast_to(sread(src, inst, 32)(g), (g.n,))]   # a constant source
            if nreg == 2:
                vals.append(np.broadcast_to(sread(src, inst, 64)(g) >> u64(32), (g.n,))
                            .astype(u32))
        else:
            vals = [g.m.S[s_idx + k, waves].copy() for k in range(nreg)]
        for k in range(nreg):
            for r in np.unique(d_idx + k):
                sel = d_idx + k == r
                g.set_s(int(r), np.where(sel, vals[k], g.s(int(r))))
    return run


_MSG_RTN_REALTIME = 131


def _sendmsg_rtn(inst: Inst, w: int) -> Callable[[WaveSet], None]:
    """s_sendmsg_rtn: the value a message returns. The mock has no doorbell, debug id, trap
    memory or trap base (0), and REALTIME is the host's monotonic clock at 100 MHz."""
    msg = inst.f["ssrc0"]
    wr = swrite(inst.f["sdst"], w)

    def run(g: WaveSet) -> None:
        v = time.monotonic_ns() // 10 if msg == _MSG_RTN_REALTIME else 0
        val = v & (0xFFFFFFFFFFFFFFFF if w == 64 else 0xFFFFFFFF)
        wr(g, np.full(g.n, val, dtype=u64 if w == 64 else u32))
    return run


def _sop2(inst: Inst) -> Step:
    name, f = inst.name, inst.f
    fn = _sop2_fn(name)
    if fn is None:
        raise _unsupported(inst)
    sig = signature(name, "SOP2")
    ra = sread(f["ssrc0"], inst, width(sig.srcs[0]), sig.srcs[0])
    rb = sread(f["ssrc1"], inst, width(sig.srcs[1]), sig.srcs[1])
    wr = swrite(f["sdst"], width(sig.dst))

    def run(g: WaveSet) -> None:
        d, scc = fn(np.asarray(ra(g)), np.asarray(rb(g)), g.scc())
        wr(g, d)
        if scc is not None:
            g.set_scc(scc)
    if width(sig.dst) == width(sig.srcs[0]) == width(sig.srcs[1]) == 32:
        return Step(NEXT, fast_salu.scalar_step(
            [(f["ssrc0"], sig.srcs[0]), (f["ssrc1"], sig.srcs[1])], inst.literal, f["sdst"], fn,
            run, reads_scc=True, int_fn=fast_salu.INT_SOP2.get(name),
            int_reads_scc=name in fast_salu.SOP2_READS_SCC), inst)
    return Step(NEXT, run, inst)


def compile_salu(inst: Inst) -> Step:
    """The program slot for one scalar instruction."""
    enc = inst.enc
    if enc == "SOP2":
        return _sop2(inst)
    if enc == "SOP1":
        return _sop1(inst)
    if enc == "SOPC":
        return Step(NEXT, _sopc(inst), inst)
    if enc == "SOPK":
        return _sopk(inst)
    return _sopp(inst)
