"""VOP3P packed math, mixed-precision FMA, dot products, WMMA and the packing conversions,
assembled with llvm-mc-16 and checked against numpy references written from the RDNA3 ISA
(section 7.8 packed math: OP_SEL picks the half that feeds the low result, OP_SEL_HI the half for
the high result, NEG_LO/NEG_HI negate them; chapter 16 pseudo-code for the rest).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.test_rdna3_isa import WAVES, assemble, run

from .rdna3_device import RawDevice

u16, u32, f16, f32 = np.uint16, np.uint32, np.float16, np.float32
N = 32 * WAVES


def _halves_of(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (v & 0xFFFF).astype(u16), (v >> 16).astype(u16)


def _pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.asarray(lo).view(u16).astype(u32) | (np.asarray(hi).view(u16).astype(u32) << 16)


def _f16_data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = (rng.standard_normal(2 * N) * 4).astype(f16)
    b = (rng.standard_normal(2 * N) * 4).astype(f16)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 6e-8, 65504, -1.5], dtype=f16)
    a[:len(specials)] = specials
    b[8:8 + len(specials)] = specials[::-1]
    return a.view(u16).reshape(N, 2), b.view(u16).reshape(N, 2)


def _sel(pair: np.ndarray, hi: int) -> np.ndarray:
    return pair[:, hi].view(f16)


def _neg(h: np.ndarray, on: int) -> np.ndarray:
    return (h.view(u16) ^ (0x8000 if on else 0)).view(f16)


PK_F16 = [
    ("v_pk_add_f16 v2, v1, v3", lambda a, b: a + b, (0, 0), (1, 1), (0, 0), (0, 0)),
    ("v_pk_add_f16 v2, v1, v3 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0] neg_hi:[0,1]",
     lambda a, b: a + b, (1, 0), (0, 1), (1, 0), (0, 1)),
    ("v_pk_mul_f16 v2, v1, v3 op_sel:[1,1] op_sel_hi:[0,0]", lambda a, b: a * b, (1, 1), (0, 0),
     (0, 0), (0, 0)),
    ("v_pk_max_f16 v2, v1, v3", np.fmax, (0, 0), (1, 1), (0, 0), (0, 0)),
    ("v_pk_min_f16 v2, v1, v3 neg_lo:[0,1] neg_hi:[1,1]", np.fmin, (0, 0), (1, 1), (0, 1),
     (1, 1)),
]


@pytest.mark.parametrize("asm,fn,sel,sel_hi,neg_lo,neg_hi", PK_F16, ids=[c[0] for c in PK_F16])
def test_packed_f16_op_sel_and_negation(asm, fn, sel, sel_hi, neg_lo, neg_hi):
    a, b = _f16_data(np.random.default_rng(31))
    got = run(asm, _pack(a[:, 0], a[:, 1]), _pack(b[:, 0], b[:, 1]))
    with np.errstate(all="ignore"):
        lo = fn(_neg(_sel(a, sel[0]), neg_lo[0]), _neg(_sel(b, sel[1]), neg_lo[1])).astype(f16)
        hi = fn(_neg(_sel(a, sel_hi[0]), neg_hi[0]), _neg(_sel(b, sel_hi[1]), neg_hi[1])
                ).astype(f16)
    want = _pack(lo, hi)
    # NaN payloads aside (both quiet NaNs), bit-exact
    nan_g, nan_w = [np.isnan(_pack_split(v)) for v in (got, want)]
    np.testing.assert_array_equal(nan_g, nan_w)
    np.testing.assert_array_equal(np.where(nan_w, 0, _pack_split(got).view(u16)),
                                  np.where(nan_w, 0, _pack_split(want).view(u16)))


def _pack_split(v: np.ndarray) -> np.ndarray:
    return np.stack(_halves_of(np.asarray(v, dtype=u32)), axis=1).view(f16)


def test_packed_f16_fma_inline_constant_and_clamp():
    a, b = _f16_data(np.random.default_rng(32))
    x, y = _pack(a[:, 0], a[:, 1]), _pack(b[:, 0], b[:, 1])
    got = _pack_split(run("v_pk_fma_f16 v2, v1, v3, 1.0", x, y))
    with np.errstate(all="ignore"):
        want = (a.view(f16).astype(np.float64) * b.view(f16) + 1.0).astype(f16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))
    got = _pack_split(run("v_pk_add_f16 v2, v1, v3 clamp", x, y))
    with np.errstate(all="ignore"):
        s = (a.view(f16) + b.view(f16)).astype(f16)
    np.testing.assert_array_equal(got, np.where(np.isnan(s), 0, np.clip(s, 0, 1)).astype(f16))


def _i16(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64) - ((v.astype(np.int64) & 0x8000) << 1)


PK_INT = [
    ("v_pk_add_u16 v2, v1, v3", lambda a, b: a + b, False),
    ("v_pk_add_u16 v2, v1, v3 clamp", lambda a, b: np.clip(a + b, 0, 65535), False),
    ("v_pk_sub_i16 v2, v1, v3 clamp", lambda a, b: np.clip(a - b, -32768, 32767), True),
    ("v_pk_sub_u16 v2, v1, v3", lambda a, b: a - b, False),
    ("v_pk_mul_lo_u16 v2, v1, v3", lambda a, b: a * b, False),
    ("v_pk_mad_u16 v2, v1, v3, v1", lambda a, b: a * b + a, False),
    ("v_pk_mad_i16 v2, v1, v3, 7", lambda a, b: a * b + 7, True),
    ("v_pk_max_i16 v2, v1, v3", np.maximum, True),
    ("v_pk_min_u16 v2, v1, v3", np.minimum, False),
    ("v_pk_lshlrev_b16 v2, v1, v3", lambda a, b: b << (a & 15), False),
    ("v_pk_lshrrev_b16 v2, v1, v3", lambda a, b: b >> (a & 15), False),
    ("v_pk_ashrrev_i16 v2, v1, v3", lambda a, b: _i16(b) >> (a & 15), None),
]


@pytest.mark.parametrize("asm,fn,signed", PK_INT, ids=[c[0] for c in PK_INT])
def test_packed_i16_u16_wrap_and_saturate(asm, fn, signed):
    rng = np.random.default_rng(33)
    x = rng.integers(0, 2**32, N, dtype=np.uint64).astype(u32)
    y = rng.integers(0, 2**32, N, dtype=np.uint64).astype(u32)
    x[:4], y[:4] = [0x7FFF8000, 0xFFFF0001, 0x00010000, 0x80007FFF], [1, 0xFFFF0002, 0, 0x7FFF0001]
    got = run(asm, x, y)
    out = []
    for h in (0, 1):
        a, b = [(v >> (16 * h)) & 0xFFFF for v in (x, y)]
        a, b = a.astype(np.int64), b.astype(np.int64)
        if signed:
            a, b = _i16(a), _i16(b)
        out.append(fn(a, b) & 0xFFFF)
    np.testing.assert_array_equal(got, (out[0] | out[1] << 16).astype(u32))


def test_fma_mix_sources_f32_or_f16_halves_with_abs_and_neg():
    rng = np.random.default_rng(34)
    a, b = _f16_data(rng)
    x = _pack(a[:, 0], a[:, 1])
    y = (rng.standard_normal(N) * 3).astype(f32).view(u32)
    # src0 = f16 hi of v1, src1 = f32 v3, src2 = -|f16 lo of v1|
    asm = "v_fma_mix_f32 v2, v1, v3, -|v1| op_sel:[1,0,0] op_sel_hi:[1,0,1]"
    got = run(asm, x, y).view(f32)
    with np.errstate(all="ignore"):
        want = (a[:, 1].view(f16).astype(np.float64) * y.view(f32)
                - np.abs(a[:, 0].view(f16).astype(np.float64))).astype(f32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))
    # mixlo: the f16 result replaces the low half of v2 (preset to v3), the high half stays
    got = run("v_mov_b32 v2, v3\nv_fma_mixlo_f16 v2, v1, v1, v3 op_sel_hi:[1,1,0]", x, y)
    with np.errstate(all="ignore"):
        r = (a[:, 0].view(f16).astype(np.float64) ** 2 + y.view(f32)).astype(f32).astype(f16)
    np.testing.assert_array_equal(got >> 16, y >> 16)
    np.testing.assert_array_equal(np.isnan((got & 0xFFFF).astype(u16).view(f16)), np.isnan(r))
    ok = ~np.isnan(r)
    np.testing.assert_array_equal((got & 0xFFFF)[ok], r.view(u16)[ok])


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 → bf16 bits, round to nearest even (finite inputs)."""
    b = x.astype(f32).view(u32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(u32)


def test_dot_products_against_the_pseudo_code():
    rng = np.random.default_rng(35)
    x = rng.integers(0, 2**32, N, dtype=np.uint64).astype(u32)
    y = rng.integers(0, 2**32, N, dtype=np.uint64).astype(u32)
    x[:3], y[:3] = [0x7F7F7F7F, 0x80808080, 0xFFFFFFFF], [0x7F7F7F7F, 0x80808080, 0xFFFFFFFF]

    def fields(v, bits, signed):
        out = []
        for k in range(32 // bits):
            f = (v.astype(np.int64) >> (bits * k)) & ((1 << bits) - 1)
            out.append(np.where(f >> (bits - 1) & 1, f - (1 << bits), f) if signed else f)
        return out

    def dot(bits, sa, sb, c):
        return sum(p * q for p, q in zip(fields(x, bits, sa), fields(y, bits, sb))) + c

    xi = x.view(np.int32).astype(np.int64)
    cases = [
        ("v_dot4_u32_u8 v2, v1, v3, v1", dot(8, False, False, x.astype(np.int64))),
        ("v_dot4_i32_iu8 v2, v1, v3, v1 neg_lo:[1,1,0]", dot(8, True, True, xi)),
        ("v_dot4_i32_iu8 v2, v1, v3, v1 neg_lo:[0,1,0]", dot(8, False, True, xi)),
        ("v_dot8_u32_u4 v2, v1, v3, 5", dot(4, False, False, 5)),
        ("v_dot8_i32_iu4 v2, v1, v3, v1 neg_lo:[1,0,0]", dot(4, True, False, xi)),
        ("v_dot4_i32_iu8 v2, v1, v3, v1 neg_lo:[1,1,0] clamp",
         np.clip(dot(8, True, True, xi), -2**31, 2**31 - 1)),
    ]
    for asm, want in cases:
        np.testing.assert_array_equal(run(asm, x, y), (want & 0xFFFFFFFF).astype(u32),
                                      err_msg=asm)


def test_float_dot2_variants():
    rng = np.random.default_rng(36)
    a, b = _f16_data(rng)
    a, b = a[:, :], b[:, :]
    finite = np.isfinite(a.view(f16)).all(1) & np.isfinite(b.view(f16)).all(1)
    a[~finite], b[~finite] = 0x3C00, 0x4000
    x, y = _pack(a[:, 0], a[:, 1]), _pack(b[:, 0], b[:, 1])
    af, bf = a.view(f16).astype(np.float64), b.view(f16).astype(np.float64)
    prod = af[:, 0] * bf[:, 0] + af[:, 1] * bf[:, 1]
    got = run("v_dot2_f32_f16 v2, v1, v3, 0.5", x, y).view(f32)
    np.testing.assert_array_equal(got, (prod + 0.5).astype(f32))
    got = run("v_dot2_f32_f16 v2, v1, v3, 0.5 neg_lo:[1,0,0] neg_hi:[1,0,0]", x, y).view(f32)
    np.testing.assert_array_equal(got, (0.5 - prod).astype(f32))
    got = run("v_mov_b32 v2, 1.0\nv_dot2acc_f32_f16 v2, v1, v3", x, y).view(f32)
    np.testing.assert_array_equal(got, (prod + 1.0).astype(f32))
    got = run("v_dot2_f16_f16 v2, v1, v3, v1", x, y)
    with np.errstate(over="ignore"):
        want16 = (prod + af[:, 0]).astype(f16)
    np.testing.assert_array_equal((got & 0xFFFF).astype(u16), want16.view(u16))
    # bf16: inputs are the top halves of f32 values
    fa = (rng.standard_normal(2 * N)).astype(f32).reshape(N, 2)
    fb = (rng.standard_normal(2 * N)).astype(f32).reshape(N, 2)
    ba, bb = _bf16(fa), _bf16(fb)
    xb, yb = ba[:, 0] | ba[:, 1] << 16, bb[:, 0] | bb[:, 1] << 16
    av = (ba.astype(u32) << 16).view(f32).astype(np.float64)
    bv = (bb.astype(u32) << 16).view(f32).astype(np.float64)
    got = run("v_dot2_f32_bf16 v2, v1, v3, v1", xb.astype(u32), yb.astype(u32)).view(f32)
    want = (av[:, 0] * bv[:, 0] + av[:, 1] * bv[:, 1] + xb.astype(u32).view(f32)).astype(f32)
    np.testing.assert_array_equal(got, want)


def test_cvt_pk_rtz_rounds_toward_zero_and_other_packings():
    rng = np.random.default_rng(37)
    x = (rng.standard_normal(N) * 100).astype(f32)
    y = (rng.standard_normal(N) * 1e-5).astype(f32)
    x[:8] = [70000.0, -70000.0, np.inf, np.nan, 1.0 + 2**-11, -(1.0 + 2**-11) - 2**-12,
             65519.0, 3e-8]
    got = run("v_cvt_pk_rtz_f16_f32 v2, v1, v3", x, y)

    def rtz(v):
        out = []
        for e in v.astype(np.float64):
            if np.isnan(e) or np.isinf(e):
                out.append(np.float16(e))
                continue
            with np.errstate(over="ignore"):
                h = np.float16(e)
            if abs(float(h)) > abs(e):
                h = np.nextafter(h, np.float16(0))
            out.append(h)
        return np.array(out, dtype=f16)
    lo, hi = rtz(x), rtz(y)
    np.testing.assert_array_equal(np.isnan((got & 0xFFFF).astype(u16).view(f16)), np.isnan(lo))
    ok = ~np.isnan(lo)
    np.testing.assert_array_equal((got & 0xFFFF)[ok], lo.view(u16)[ok])
    np.testing.assert_array_equal(got >> 16, hi.view(u16))
    assert int(got[0] & 0xFFFF) == 0x7BFF and int(got[1] & 0xFFFF) == 0xFBFF   # ±65504

    xs = np.clip(x, -1e6, 1e6).astype(f32)
    got = run("v_cvt_pk_i16_f32 v2, v1, v3", xs, y)
    def sat(v: np.ndarray, lo_: int, hi_: int) -> np.ndarray:
        return np.clip(np.trunc(np.nan_to_num(v.astype(np.float64))), lo_, hi_)
    want = (sat(xs, -32768, 32767).astype(np.int64) & 0xFFFF) | \
        ((sat(y, -32768, 32767).astype(np.int64) & 0xFFFF) << 16)
    np.testing.assert_array_equal(got, want.astype(u32))
    got = run("v_cvt_pknorm_u16_f32 v2, v1, v3", xs, y)
    def un(v: np.ndarray) -> np.ndarray:
        return np.rint(np.clip(np.nan_to_num(v.astype(np.float64)), 0, 1) * 65535)
    np.testing.assert_array_equal(got, (un(xs).astype(np.int64) | un(y).astype(np.int64) << 16)
                                  .astype(u32))


def _wmma_run(asm: str, a_words: np.ndarray, b_words: np.ndarray, c_words: np.ndarray,
              d_init: np.ndarray | None = None) -> np.ndarray:
    """One wave: lane l loads its A, B, C registers (8 dwords each) from rows l of the arrays,
    runs `asm` (D in v[40:47]) and stores D's 8 dwords per lane."""
    text = """
    v_lshlrev_b32 v10, 5, v0
    global_load_b128 v[16:19], v10, s[2:3]
    global_load_b128 v[20:23], v10, s[2:3] offset:16
    global_load_b128 v[24:27], v10, s[4:5]
    global_load_b128 v[28:31], v10, s[4:5] offset:16
    global_load_b128 v[32:35], v10, s[6:7]
    global_load_b128 v[36:39], v10, s[6:7] offset:16
    global_load_b128 v[40:43], v10, s[8:9]
    global_load_b128 v[44:47], v10, s[8:9] offset:16
    s_waitcnt vmcnt(0)
    """ + asm + """
    global_store_b128 v10, v[40:43], s[0:1]
    global_store_b128 v10, v[44:47], s[0:1] offset:16
    s_endpgm
    """
    dev = RawDevice()
    out = dev.alloc(32 * 32)
    ptrs = [dev.upload(np.ascontiguousarray(w, dtype=u32)) for w in
            (a_words, b_words, c_words, d_init if d_init is not None else c_words)]
    user = [out & 0xFFFFFFFF, out >> 32]
    for p in ptrs:
        user += [p & 0xFFFFFFFF, p >> 32]
    dev.launch_raw(assemble(text), user, (1,), (32,), vgprs=64, tgid=(False,))
    return dev.download(out, 32 * 8, u32).reshape(32, 8)


def _lanes_of_rows(m: np.ndarray) -> np.ndarray:
    """[16, K] → [32, K]: lane l holds row l % 16 (both half-waves the same)."""
    return np.concatenate([m, m], axis=0)


def _pack_k(vals: np.ndarray, bits: int) -> np.ndarray:
    """[32, 16] fields of `bits` bits → [32, 16 * bits / 32] dwords, low field first."""
    per = 32 // bits
    v = vals.astype(np.uint64) & ((1 << bits) - 1)
    words = np.zeros((32, 16 // per), dtype=np.uint64)
    for k in range(16):
        words[:, k // per] |= v[:, k] << (bits * (k % per))
    return np.pad(words.astype(u32), ((0, 0), (0, 8 - 16 // per)))


def _c_lanes(c: np.ndarray) -> np.ndarray:
    """16x16 → [32 lanes, 8 VGPRs]: VGPR j of lane l is element [2j + l // 16][l % 16]."""
    out = np.zeros((32, 8), dtype=c.dtype)
    for lane in range(32):
        for j in range(8):
            out[lane, j] = c[2 * j + lane // 16, lane % 16]
    return out


def test_wmma_f32_16x16x16_f16_as_tl_dot_uses_it():
    rng = np.random.default_rng(38)
    a = (rng.standard_normal((16, 16))).astype(f16)
    b = (rng.standard_normal((16, 16))).astype(f16)
    c = (rng.standard_normal((16, 16))).astype(f32)
    a_w = _pack_k(_lanes_of_rows(a).view(u16), 16)
    b_w = _pack_k(_lanes_of_rows(b.T.copy()).view(u16), 16)
    got = _wmma_run("v_wmma_f32_16x16x16_f16 v[40:47], v[16:23], v[24:31], v[32:39]",
                    a_w, b_w, _c_lanes(c).view(u32))
    want = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(f32)
    np.testing.assert_array_equal(got.view(f32), _c_lanes(want))


def test_wmma_f16_bf16_and_integer_shapes():
    rng = np.random.default_rng(39)
    a = (rng.standard_normal((16, 16))).astype(f16)
    b = (rng.standard_normal((16, 16))).astype(f16)
    c = (rng.standard_normal((16, 16))).astype(f16)
    a_w = _pack_k(_lanes_of_rows(a).view(u16), 16)
    b_w = _pack_k(_lanes_of_rows(b.T.copy()).view(u16), 16)
    # f16 result in the high halves (op_sel:[0,0,1]); the low halves of D keep d_init's
    c_hi = (_c_lanes(c).view(u16).astype(u32) << 16) | 0x1234
    got = _wmma_run("v_wmma_f16_16x16x16_f16 v[40:47], v[16:23], v[24:31], v[32:39] "
                    "op_sel:[0,0,1]", a_w, b_w, c_hi.astype(u32))
    want = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)).astype(f16)
    np.testing.assert_array_equal(got >> 16, _c_lanes(want).view(u16))
    np.testing.assert_array_equal(got & 0xFFFF, np.full((32, 8), 0x1234))

    af = rng.standard_normal((16, 16)).astype(f32)
    bf = rng.standard_normal((16, 16)).astype(f32)
    a16, b16 = _bf16(af), _bf16(bf)
    av = (a16 << 16).view(f32).astype(np.float64)
    bv = (b16 << 16).view(f32).astype(np.float64)
    cf = rng.standard_normal((16, 16)).astype(f32)
    got = _wmma_run("v_wmma_f32_16x16x16_bf16 v[40:47], v[16:23], v[24:31], v[32:39]",
                    _pack_k(_lanes_of_rows(a16), 16), _pack_k(_lanes_of_rows(b16.T.copy()), 16),
                    _c_lanes(cf).view(u32))
    np.testing.assert_array_equal(got.view(f32), _c_lanes((av @ bv + cf).astype(f32)))

    ai = rng.integers(-128, 128, (16, 16))
    bi = rng.integers(0, 256, (16, 16))
    ci = rng.integers(-1000, 1000, (16, 16)).astype(np.int32)
    got = _wmma_run("v_wmma_i32_16x16x16_iu8 v[40:47], v[16:19], v[24:27], v[32:39] "
                    "neg_lo:[1,0,0]", _pack_k(_lanes_of_rows(ai), 8),
                    _pack_k(_lanes_of_rows(bi.T.copy()), 8), _c_lanes(ci).view(u32))
    np.testing.assert_array_equal(got.view(np.int32), _c_lanes((ai @ bi + ci).astype(np.int32)))

    a4 = rng.integers(-8, 8, (16, 16))
    b4 = rng.integers(-8, 8, (16, 16))
    got = _wmma_run("v_wmma_i32_16x16x16_iu4 v[40:47], v[16:17], v[24:25], v[32:39] "
                    "neg_lo:[1,1,0]", _pack_k(_lanes_of_rows(a4), 4),
                    _pack_k(_lanes_of_rows(b4.T.copy()), 4), _c_lanes(ci).view(u32))
    np.testing.assert_array_equal(got.view(np.int32), _c_lanes((a4 @ b4 + ci).astype(np.int32)))


def test_wmma_with_a_partial_exec_is_refused_by_name():
    from runtime.drivers.mock.rdna3 import KernelFault
    code = assemble("s_mov_b32 exec_lo, 0xffff\n"
                    "v_wmma_f32_16x16x16_f16 v[40:47], v[16:23], v[24:31], v[32:39]\ns_endpgm")
    with pytest.raises(KernelFault, match="EXEC not all ones") as e:
        RawDevice().launch_raw(code, [], (1,), (32,), vgprs=64, tgid=(False,))
    assert e.value.instruction.startswith("v_wmma_f32_16x16x16_f16 v[40:47]")
