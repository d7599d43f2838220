# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="operator"
"""VOP3P instructions: packed 16-bit math, mixed-precision FMA, dot products and WMMA.

Packed ops compute a low and a high 16-bit result from one 16-bit half of each source per result
half (RDNA3 ISA section 7.8, "Packed Math"): OP_SEL[i] picks the half of source i that feeds the
low result, OP_SEL_HI[i] the half that feeds the high result; NEG_LO[i] / NEG_HI[i] negate those
float halves. An inline constant is a 16-bit value in both halves. CLAMP clamps float results to
[0, 1] (NaN to 0) and saturates integer ones.

V_FMA_MIX*: source i is an f32 (OP_SEL_HI[i] = 0) or the f16 half OP_SEL[i] picks, converted to
f32; NEG_LO negates and NEG_HI takes the absolute value. The dot products follow the ISA's
pseudo-code (chapter 16): V_DOT4_I32_IU8 and V_DOT8_I32_IU4 treat source 0 / 1 as signed when
NEG_LO[0] / NEG_LO[1] is set. Float dot products and WMMA are computed exactly (f64 holds every
f16/bf16 product and their sums here) and rounded once to the result type.

WMMA (ISA section 7.9, "Wave Matrix Multiply Accumulate"): D = A x B + C for 16x16 matrices held
by the 32 lanes of a wave. Lane l of each half-wave (l = lane % 16) holds row l of A and column l
of B, K elements packed low to high (f16/bf16: two per VGPR, iu8: four, iu4: eight); both halves
hold the same A and B. C and D: VGPR j of lane l holds element [2j + lane // 16][lane % 16], an
f32/i32 or, for the 16-bit results, the half OP_SEL[2] picks (the other half is kept). Each
half-wave's results are computed from that half's copy of A and B. EXEC must be all ones.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import fp
from .decode import VGPR0, Inst
from .errors import KernelFault
from .machine import WaveSet
from .operands import const_bits, raw_reader

Exec = Callable[[WaveSet], None]
u16, u32, i32, i64 = np.uint16, np.uint32, np.int32, np.int64
SIGN16 = u32(0x8000)


def _unsupported(inst: Inst, why: str) -> KernelFault:
    return KernelFault(f"unsupported instruction: {why}", address=inst.addr, instruction=str(inst))


def raw32(inst: Inst, i: int, t16: str = "f16") -> Callable[[WaveSet], np.ndarray]:
    """Source i as 32 raw bits; an inline constant is its 16-bit form (in type t16) in both
    halves."""
    code = inst.f[f"src{i}"]
    c = const_bits(code, t16, None) if code != 255 else None
    if c is not None:
        both = np.array(c | c << 16, dtype=u32)
        return lambda g: both
    return raw_reader(code, inst, 32)


def _bit(v: int, i: int) -> bool:
    return bool(v >> i & 1)


def halves(inst: Inst, i: int, t16: str = "f16") -> Callable[[WaveSet], tuple[np.ndarray,
                                                                             np.ndarray]]:
    """(low-result operand, high-result operand) of source i as uint32 holding 16 bits, with
    OP_SEL / OP_SEL_HI applied and, for float types, NEG_LO / NEG_HI as sign flips."""
    f = inst.f
    rd = raw32(inst, i, t16)
    sh_lo = u32(16 if _bit(f["opsel"], i) else 0)
    sh_hi = u32(16 if _bit(f["opsel_hi"], i) else 0)
    is_f = t16[0] in "fb"
    flip_lo = SIGN16 if is_f and _bit(f["neg"], i) else u32(0)
    flip_hi = SIGN16 if is_f and _bit(f["neg_hi"], i) else u32(0)

    def get(g: WaveSet) -> tuple[np.ndarray, np.ndarray]:
        raw = rd(g)
        lo = ((raw >> sh_lo) & u32(0xFFFF)) ^ flip_lo
        hi = ((raw >> sh_hi) & u32(0xFFFF)) ^ flip_hi
        return lo, hi
    return get


def f16_of(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits).astype(u16).view(np.float16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=u32) << u32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 → bf16 bits (uint32), round to nearest even; NaN stays a quiet NaN."""
    b = np.asarray(x, dtype=np.float32).view(u32)
    rounded = (b + u32(0x7FFF) + ((b >> u32(16)) & u32(1))) >> u32(16)
    return np.where(np.isnan(x), (b >> u32(16)) | u32(0x40), rounded).astype(u32)


def _clamp01(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


def _write(inst: Inst) -> Callable[[WaveSet, np.ndarray], None]:
    d = inst.f["vdst"]
    return lambda g, bits: g.set_v(d, bits)


# -- packed 16-bit math ------------------------------------------------------------------------
_F16_PK: dict[str, Callable[..., np.ndarray]] = {
    "v_pk_add_f16": lambda a, b, c: a + b,
    "v_pk_mul_f16": lambda a, b, c: a * b,
    "v_pk_fma_f16": lambda a, b, c: (a.astype(np.float64) * b + c).astype(np.float16),
    "v_pk_min_f16": lambda a, b, c: fp.fmin(a, b),
    "v_pk_max_f16": lambda a, b, c: fp.fmax(a, b),
}
# Integer ops on int64 (exact); the result is wrapped, or saturated under CLAMP.
_INT_PK: dict[str, tuple[bool, Callable[..., np.ndarray]]] = {
    "v_pk_add_u16": (False, lambda a, b, c: a + b),
    "v_pk_sub_u16": (False, lambda a, b, c: a - b),
    "v_pk_add_i16": (True, lambda a, b, c: a + b),
    "v_pk_sub_i16": (True, lambda a, b, c: a - b),
    "v_pk_mul_lo_u16": (False, lambda a, b, c: a * b),
    "v_pk_mad_u16": (False, lambda a, b, c: a * b + c),
    "v_pk_mad_i16": (True, lambda a, b, c: a * b + c),
    "v_pk_max_u16": (False, lambda a, b, c: np.maximum(a, b)),
    "v_pk_min_u16": (False, lambda a, b, c: np.minimum(a, b)),
    "v_pk_max_i16": (True, lambda a, b, c: np.maximum(a, b)),
    "v_pk_min_i16": (True, lambda a, b, c: np.minimum(a, b)),
    # shifts: the amount is the low 4 bits of source 0's half
    "v_pk_lshlrev_b16": (False, lambda a, b, c: b << (a & 15)),
    "v_pk_lshrrev_b16": (False, lambda a, b, c: b >> (a & 15)),
    "v_pk_ashrrev_i16": (True, lambda a, b, c: b >> (a & 15)),
}
_NSRC = {"v_pk_fma_f16": 3, "v_pk_mad_u16": 3, "v_pk_mad_i16": 3}


def _packed(inst: Inst) -> Exec:
    name = inst.name
    nsrc = _NSRC.get(name, 2)
    is_f = name in _F16_PK
    srcs = [halves(inst, i, "f16" if is_f else "i16") for i in range(nsrc)]
    write = _write(inst)
    clamp = bool(inst.f["clamp"])
    if is_f:
        fn16 = _F16_PK[name]

        def one_f(ops: list[np.ndarray]) -> np.ndarray:
            args = [f16_of(o) for o in ops] + [None] * (3 - len(ops))
            r = np.asarray(fn16(*args), dtype=np.float16)
            if clamp:
                r = _clamp01(r)
            return r.view(u16).astype(u32)
        one = one_f
    else:
        signed, fni = _INT_PK[name]
        lo_lim, hi_lim = (-32768, 32767) if signed else (0, 65535)

        def one_i(ops: list[np.ndarray]) -> np.ndarray:
            vals = [o.astype(i64) for o in ops]
            if signed:
                vals = [np.where(v >= 32768, v - 65536, v) for v in vals]
            if name.endswith("rev_b16") or name.endswith("rev_i16"):
                vals[0] = ops[0].astype(i64)  # the shift amount is unsigned
            r = fni(*vals, *([None] * (3 - len(vals))))
            if clamp:
                r = np.clip(r, lo_lim, hi_lim)
            return (r & 0xFFFF).astype(u32)
        one = one_i

    def run(g: WaveSet) -> None:
        got = [s(g) for s in srcs]
        lo = one([p[0] for p in got])
        hi = one([p[1] for p in got])
        write(g, lo | (hi << u32(16)))
    return run


# -- mixed precision FMA -----------------------------------------------------------------------
def bits_as(code: int, inst: Inst, t: str) -> Callable[[WaveSet], np.ndarray]:
    """Reader of a source's 32 raw bits, an inline constant encoded as type t (f32 or f16)."""
    cb = const_bits(code, t, inst.literal)
    if cb is None:
        return raw_reader(code, inst, 32)
    c = np.array(cb, dtype=u32)
    return lambda g: c


def mix_source(inst: Inst, i: int, f16_allowed: bool = True) -> Callable[[WaveSet], np.ndarray]:
    """Source i of a mixed-precision op as float32 (see the module docstring): an f32, or with
    OP_SEL_HI[i] (and `f16_allowed`) the f16 half OP_SEL[i] picks; NEG_LO negates, NEG_HI takes
    the absolute value."""
    f = inst.f
    as_f16 = f16_allowed and _bit(f["opsel_hi"], i)
    shift = u32(16 if _bit(f["opsel"], i) else 0)
    neg, abs_ = _bit(f["neg"], i), _bit(f["neg_hi"], i)
    rd = raw32(inst, i, "f16") if as_f16 else bits_as(f[f"src{i}"], inst, "f32")

    def get(g: WaveSet) -> np.ndarray:
        raw = rd(g)
        x = f16_of((raw >> shift) & u32(0xFFFF)).astype(np.float32) if as_f16 else \
            raw.view(np.float32)
        if abs_:
            x = np.abs(x)
        return -x if neg else x
    return get


def _fma_mix(inst: Inst) -> Exec:
    a, b, c = (mix_source(inst, i) for i in range(3))
    d = inst.f["vdst"]
    clamp = bool(inst.f["clamp"])
    part = inst.name.removeprefix("v_fma_mix")   # "_f32", "lo_f16" or "hi_f16"

    def run(g: WaveSet) -> None:
        r = fp.fma32(a(g), b(g), c(g))
        if part == "_f32":
            g.set_v(d, (_clamp01(r) if clamp else r).view(u32))
            return
        h = r.astype(np.float16)
        if clamp:
            h = _clamp01(h)
        bits = h.view(u16).astype(u32)
        old = g.v(d)
        g.set_v(d, (old & u32(0xFFFF0000)) | bits if part == "lo_f16"
                else (old & u32(0xFFFF)) | (bits << u32(16)))
    return run


# -- dot products ------------------------------------------------------------------------------
def _dot2_float(inst: Inst, t16: str) -> Exec:
    """V_DOT2_F32_F16 / _BF16 (VOP3P) and V_DOT2ACC_F32_F16 (VOP2: D is the addend)."""
    conv = f16_of if t16 == "f16" else bf16_to_f32
    c_rd: Callable[[WaveSet], np.ndarray] | None = None
    if inst.enc == "VOP3P":
        sa, sb = halves(inst, 0, t16), halves(inst, 1, t16)
        c_rd = mix_source(inst, 2, f16_allowed=False)
    else:
        sa, sb = (_split_reader(raw32(inst, i, t16)) for i in (0, 1))
    d = inst.f["vdst"]
    clamp = bool(inst.f.get("clamp", 0))

    def run(g: WaveSet) -> None:
        (a0, a1), (b0, b1) = sa(g), sb(g)
        c = g.v(d).view(np.float32) if c_rd is None else c_rd(g)
        prod = conv(a0).astype(np.float64) * conv(b0) + conv(a1).astype(np.float64) * conv(b1)
        r = (prod + c.astype(np.float64)).astype(np.float32)
        g.set_v(d, (_clamp01(r) if clamp else r).view(u32))
    return run


def _split_reader(rd: Callable[[WaveSet], np.ndarray]) -> Callable[[WaveSet], tuple[np.ndarray,
                                                                                 np.ndarray]]:
    """(low half, high half) of a 32-bit source, as uint32."""
    return lambda g: (lambda raw: (raw & u32(0xFFFF), raw >> u32(16)))(rd(g))


def _int_lanes(raw: np.ndarray, bits: int, signed: bool) -> list[np.ndarray]:
    """The 32 // bits packed fields of raw (uint32), low first, as int64."""
    n = 32 // bits
    mask = (1 << bits) - 1
    out = []
    for k in range(n):
        v = ((raw >> u32(bits * k)) & u32(mask)).astype(i64)
        if signed:
            v = np.where(v >> (bits - 1) & 1, v - (1 << bits), v)
        out.append(v)
    return out


def _dot_int(inst: Inst, bits: int, signed_ok: bool) -> Exec:
    """V_DOT4_*_8 / V_DOT8_*_4: integer dot product plus source 2; CLAMP saturates."""
    f = inst.f
    sa = signed_ok and _bit(f["neg"], 0)
    sb = signed_ok and _bit(f["neg"], 1)
    ra, rb = raw_reader(f["src0"], inst), raw_reader(f["src1"], inst)
    rc = raw_reader(f["src2"], inst)
    d = f["vdst"]
    clamp = bool(f["clamp"])
    lo, hi = (-2**31, 2**31 - 1) if signed_ok else (0, 2**32 - 1)

    def run(g: WaveSet) -> None:
        a = _int_lanes(ra(g), bits, sa)
        b = _int_lanes(rb(g), bits, sb)
        c = rc(g)
        acc = c.view(i32).astype(i64) if signed_ok else c.astype(i64)
        for x, y in zip(a, b):
            acc = acc + x * y
        if clamp:
            acc = np.clip(acc, lo, hi)
        g.set_v(d, (acc & 0xFFFFFFFF).astype(u32))
    return run


# -- WMMA --------------------------------------------------------------------------------------
_WMMA = {  # name: (input type, elements per VGPR, result type)
    "v_wmma_f32_16x16x16_f16": ("f16", 2, "f32"),
    "v_wmma_f32_16x16x16_bf16": ("bf16", 2, "f32"),
    "v_wmma_f16_16x16x16_f16": ("f16", 2, "f16"),
    "v_wmma_bf16_16x16x16_bf16": ("bf16", 2, "bf16"),
    "v_wmma_i32_16x16x16_iu8": ("iu8", 4, "i32"),
    "v_wmma_i32_16x16x16_iu4": ("iu4", 8, "i32"),
}


def _vgpr_block(g: WaveSet, code: int, count: int, inst: Inst) -> np.ndarray:
    """uint32 [n, count, 32]: VGPRs code-256 .. +count (an inline constant fills all)."""
    if code >= VGPR0:
        r = code - VGPR0
        return np.stack([g.v(r + k) for k in range(count)], axis=1)
    cb = const_bits(code, "b32", inst.literal)
    if cb is None:
        raise _unsupported(inst, "a WMMA matrix operand must be VGPRs or an inline constant")
    return np.full((g.n, count, 32), cb, dtype=u32)


def _wmma_inputs(blk: np.ndarray, kind: str, signed: bool) -> np.ndarray:
    """[n, nvgpr, 32] packed registers → float64/int64 [n, 2 halves, 16 lanes, 16 K]."""
    n, nv, _ = blk.shape
    per = {"f16": 2, "bf16": 2, "iu8": 4, "iu4": 8}[kind]
    bits = 32 // per
    fields = [(blk >> u32(bits * k)) & u32((1 << bits) - 1) for k in range(per)]
    el = np.stack(fields, axis=2).reshape(n, nv * per, 32)   # [n, K, lane]; K = vgpr*per + k
    if kind == "f16":
        vals = el.astype(u16).view(np.float16).astype(np.float64)
    elif kind == "bf16":
        vals = bf16_to_f32(el).astype(np.float64)
    else:
        vals = el.astype(i64)
        if signed:
            vals = np.where(vals >> (bits - 1) & 1, vals - (1 << bits), vals)
    return vals.transpose(0, 2, 1).reshape(n, 2, 16, nv * per)


def _wmma(inst: Inst) -> Exec:
    kind, per, out = _WMMA[inst.name]
    f = inst.f
    nin = 16 // per
    signed_a = kind.startswith("iu") and _bit(f["neg"], 0)
    signed_b = kind.startswith("iu") and _bit(f["neg"], 1)
    hi_half = _bit(f["opsel"], 2)
    d = f["vdst"]
    clamp = bool(f["clamp"])

    def run(g: WaveSet) -> None:
        if not g.exec_full:
            # ISA section 7.9: WMMA needs every lane (EXEC all ones); otherwise the result is
            # undefined, so the mock refuses rather than guess.
            raise _unsupported(inst, "WMMA with EXEC not all ones (the ISA requires every "
                                     "lane of the wave)")
        a = _wmma_inputs(_vgpr_block(g, f["src0"], nin, inst), kind, signed_a)  # [n,h,row,k]
        b = _wmma_inputs(_vgpr_block(g, f["src1"], nin, inst), kind, signed_b)  # [n,h,col,k]
        c_raw = _vgpr_block(g, f["src2"], 8, inst)                               # [n, j, lane]
        prod = np.einsum("nhrk,nhck->nhrc", a, b)   # per half-wave: its rows x its columns
        # Lane l of half h, VGPR j holds element [2j + h][l]: rows 2j + h of that half's product.
        rows = np.arange(8)[:, None] * 2 + np.arange(2)[None, :]               # [j, h]
        res = prod[:, np.arange(2)[None, :], rows, :]                           # [n, j, h, col]
        res = res.reshape(g.n, 8, 32)
        if out == "i32":
            acc = res + c_raw.view(i32).astype(i64)
            if clamp:
                acc = np.clip(acc, -2**31, 2**31 - 1)
            bits = (acc & 0xFFFFFFFF).astype(u32)
        elif out == "f32":
            r = (res + c_raw.view(np.float32).astype(np.float64)).astype(np.float32)
            bits = (_clamp01(r) if clamp else r).view(u32)
        else:
            c16 = (c_raw >> u32(16 if hi_half else 0)) & u32(0xFFFF)
            c = f16_of(c16).astype(np.float64) if out == "f16" else \
                bf16_to_f32(c16).astype(np.float64)
            if out == "f16":
                h = (res + c).astype(np.float16)
                h = _clamp01(h) if clamp else h
                half = h.view(u16).astype(u32)
            else:
                r = (res + c).astype(np.float32)
                half = f32_to_bf16(_clamp01(r) if clamp else r)
            keep = u32(0x0000FFFF if hi_half else 0xFFFF0000)
            old = np.stack([g.v(d + j) for j in range(8)], axis=1)
            bits = (old & keep) | (half << u32(16 if hi_half else 0))
        for j in range(8):
            g.set_v(d + j, bits[:, j, :])
    return run


def compile_vop3p(inst: Inst) -> Exec:
    """Closure executing one VOP3P instruction for a group."""
    name = inst.name
    if name in _F16_PK or name in _INT_PK:
        return _packed(inst)
    if name.startswith("v_fma_mix"):
        return _fma_mix(inst)
    if name == "v_dot2_f32_f16":
        return _dot2_float(inst, "f16")
    if name == "v_dot2_f32_bf16":
        return _dot2_float(inst, "bf16")
    if name in ("v_dot4_i32_iu8", "v_dot4_u32_u8"):
        return _dot_int(inst, 8, name.endswith("iu8"))
    if name in ("v_dot8_i32_iu4", "v_dot8_u32_u4"):
        return _dot_int(inst, 4, name.endswith("iu4"))
    if name in _WMMA:
        return _wmma(inst)
    raise _unsupported(inst, f"no semantics for {name}")


def dot2acc(inst: Inst, sig: object = None) -> Exec:
    """V_DOT2ACC_F32_F16 (VOP2): D.f32 += S0.f16[0] * S1.f16[0] + S0.f16[1] * S1.f16[1]."""
    return _dot2_float(inst, "f16")


# -- packed f16/bf16 helpers of VOP2/VOP3/VOPD opcodes ------------------------------------
def dot2_16(t16: str) -> Callable[..., Exec]:
    """v_dot2_f16_f16 / v_dot2_bf16_bf16 (VOP3): S2 (16-bit, OP_SEL[2] picks its half) plus the
    dot product of the packed halves of S0 and S1; the result goes to the half OP_SEL[3] picks."""
    def make(inst: Inst, sig) -> Exec:
        f = inst.f
        ra, rb = raw_reader(f["src0"], inst), raw_reader(f["src1"], inst)
        rc = bits_as(f["src2"], inst, "f16" if t16 == "f16" else "b16")
        c_sh = u32(16 if f.get("opsel", 0) >> 2 & 1 else 0)
        hi_d = bool(f.get("opsel", 0) >> 3 & 1)
        d = f["vdst"]
        to64 = (lambda h: f16_of(h).astype(np.float64)) if t16 == "f16" else \
            (lambda h: bf16_to_f32(h).astype(np.float64))
        neg = f.get("neg", 0)

        def part(raw: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = to64(raw & u32(0xFFFF)), to64(raw >> u32(16))
            return (-lo, -hi) if neg >> i & 1 else (lo, hi)

        def run(g: WaveSet) -> None:
            (a0, a1), (b0, b1) = part(ra(g), 0), part(rb(g), 1)
            c = to64((rc(g) >> c_sh) & u32(0xFFFF))
            if neg >> 2 & 1:
                c = -c
            r = a0 * b0 + a1 * b1 + c
            bits = r.astype(np.float16).view(np.uint16).astype(u32) if t16 == "f16" else \
                f32_to_bf16(r.astype(np.float32))
            old = g.v(d)
            g.set_v(d, (old & u32(0xFFFF)) | (bits << u32(16)) if hi_d
                    else (old & u32(0xFFFF0000)) | bits)
        return run
    return make


def pk_fmac(inst: Inst, sig) -> Exec:
    """v_pk_fmac_f16: both f16 halves D = S0 * S1 + D."""
    ra, rb = raw32(inst, 0), raw32(inst, 1)
    d = inst.f["vdst"]
    fma = _fma16

    def run(g: WaveSet) -> None:
        a, b, c = ra(g), rb(g), g.v(d)
        halves = [fma(*(f16_of((x >> u32(sh)) & u32(0xFFFF)) for x in (a, b, c)))
                  for sh in (0, 16)]
        lo, hi = (np.asarray(h, dtype=np.float16).view(np.uint16).astype(u32) for h in halves)
        g.set_v(d, lo | (hi << u32(16)))
    return run


def _fma16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) * b + c).astype(np.float16)


def dot2acc_bits(a: np.ndarray, b: np.ndarray, d: np.ndarray, t16: str) -> np.ndarray:
    """D.f32 + S0.lo * S1.lo + S0.hi * S1.hi over packed f16/bf16 (one rounding), as bits
    (v_dual_dot2acc_f32_f16/_bf16)."""
    conv = f16_of if t16 == "f16" else bf16_to_f32
    acc = d.view(np.float32).astype(np.float64)
    for sh in (0, 16):
        x = conv((a >> u32(sh)) & u32(0xFFFF)).astype(np.float64)
        y = conv((b >> u32(sh)) & u32(0xFFFF)).astype(np.float64)
        acc = acc + x * y
    return acc.astype(np.float32).view(u32)
