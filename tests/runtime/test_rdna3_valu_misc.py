"""The rarer VALU and SALU opcodes of LLVM's gfx1100 tables (sums of absolute differences, byte
interpolation, cube-map helpers, M0-relative moves, quad masks, 64-bit EXEC forms ...), assembled
with llvm-mc-16 and checked against references written from the RDNA3 ISA pseudo-code; and the
opcode-acceptance measurement over LLVM's tables.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from tools import rdna3_opcode_coverage as opcode_coverage
from tests.runtime.test_rdna3_isa import WAVES, _ints, _s, run

u32, f32 = np.uint32, np.float32


def _b(v: np.ndarray, k: int) -> np.ndarray:
    return (v.astype(np.int64) >> (8 * k)) & 0xFF


def _sad(x, y, c):
    return sum(np.abs(_b(x, k) - _b(y, k)) for k in range(4)) + c


VALU_CASES = [
    ("v_sad_u8 v2, v1, v3, 17", lambda x, y: _sad(x, y, 17)),
    ("v_msad_u8 v2, v1, v3, v1", lambda x, y: sum(np.where(_b(y, k) == 0, 0, np.abs(
        _b(x, k) - _b(y, k))) for k in range(4)) + x.astype(np.int64)),
    ("v_sad_hi_u8 v2, v1, v3, 3", lambda x, y: (_sad(x, y, 0) << 16) + 3),
    ("v_sad_u16 v2, v1, v3, v3", lambda x, y: np.abs((x & 0xFFFF).astype(np.int64) - (y & 0xFFFF))
     + np.abs((x >> 16).astype(np.int64) - (y >> 16)) + y),
    ("v_sad_u32 v2, v1, v3, 1", lambda x, y: np.abs(x.astype(np.int64) - y) + 1),
    ("v_lerp_u8 v2, v1, v3, v1", lambda x, y: sum(
        ((_b(x, k) + _b(y, k) + (_b(x, k) & 1)) >> 1) << (8 * k) for k in range(4))),
    ("v_cvt_pk_u8_f32 v2, 0x42f60000, 2, v3",   # 123.0 into byte 2
     lambda x, y: (y.astype(np.int64) & ~0xFF0000) | (123 << 16)),
    ("v_sat_pk_u8_i16 v2, v1", lambda x, y: np.clip(_i16(x & 0xFFFF), 0, 255)
     | (np.clip(_i16(x >> 16), 0, 255) << 8)),
    ("v_add_nc_i16 v2, v1, v3", lambda x, y: (x + y.astype(np.int64)) & 0xFFFF),
    ("v_mov_b32 v2, v3\nv_cndmask_b16 v2, v1, v3, s12",
     lambda x, y: (y.astype(np.int64) & 0xFFFF0000) | np.where(LANE_S12, y & 0xFFFF,
                                                               x & 0xFFFF)),
    ("v_med3_u16 v2, v1, v3, 0x8000", lambda x, y: np.median(np.stack(
        [x & 0xFFFF, y & 0xFFFF, np.full(len(x), 0x8000)]), axis=0).astype(np.int64)),
    ("v_cvt_off_f32_i4 v2, v1", lambda x, y: np.array(
        [((int(v) & 15) - 16 * ((int(v) >> 3) & 1)) / 16 for v in x], dtype=f32).view(u32)),
]
LANE_S12 = np.tile((0x0F0F3355 >> np.arange(32)) & 1, WAVES).astype(bool)


def _i16(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.int64) & 0xFFFF
    return v - ((v & 0x8000) << 1)


@pytest.mark.parametrize("asm,ref", VALU_CASES, ids=[c[0].split("\n")[-1] for c in VALU_CASES])
def test_rare_valu(asm, ref):
    x, y = _ints(np.random.default_rng(41))
    got = run("s_mov_b32 s12, 0x0f0f3355\n" + asm, x, y)
    np.testing.assert_array_equal(got, (np.asarray(ref(x, y)) & 0xFFFFFFFF).astype(u32))


def test_cube_map_helpers_and_mullit():
    rng = np.random.default_rng(42)
    x = (rng.standard_normal(32 * WAVES) * 3).astype(f32)
    y = (rng.standard_normal(32 * WAVES) * 3).astype(f32)
    z = np.float32(1.25)   # the third coordinate: 1.25 through a literal
    for asm, ref in [
        ("v_cubeid_f32 v2, v1, v3, 0x3fa00000", lambda: np.where(
            (abs(z) >= abs(x)) & (abs(z) >= abs(y)), 4.0,
            np.where(abs(y) >= abs(x), np.where(y < 0, 3.0, 2.0), np.where(x < 0, 1.0, 0.0)))),
        ("v_cubema_f32 v2, v1, v3, 0x3fa00000", lambda: 2 * np.where(
            (abs(z) >= abs(x)) & (abs(z) >= abs(y)), z, np.where(abs(y) >= abs(x), y, x))),
        ("v_cubesc_f32 v2, v1, v3, 0x3fa00000", lambda: np.where(
            (abs(z) >= abs(x)) & (abs(z) >= abs(y)), x,
            np.where(abs(y) >= abs(x), x, np.where(x < 0, z, -z)))),
        ("v_cubetc_f32 v2, v1, v3, 0x3fa00000", lambda: np.where(
            (abs(z) >= abs(x)) & (abs(z) >= abs(y)), -y,
            np.where(abs(y) >= abs(x), np.where(y < 0, -z, z), -y))),
        ("v_mullit_f32 v2, v1, v3, v1", lambda: np.where(
            (x <= 0), -np.finfo(f32).max, x * y)),
    ]:
        got = run(asm, x, y).view(f32)
        np.testing.assert_array_equal(got, np.asarray(ref(), dtype=f32), err_msg=asm)


def test_movrel_swap_and_f16_class():
    x, y = _ints(np.random.default_rng(43))
    # v_movrels reads v[1 + M0]: M0 = 2 → v3; v_movreld writes v[4 + M0]
    got = run("s_mov_b32 m0, 2\nv_movrels_b32 v2, v1", x, y)
    np.testing.assert_array_equal(got, y)
    got = run("s_mov_b32 m0, 2\nv_movreld_b32 v0, v1\nv_mov_b32 v2, v2", x, y)
    np.testing.assert_array_equal(got, x)   # v[0 + 2] = v1
    got = run("v_mov_b32 v2, v3\nv_swap_b32 v2, v1\nv_xor_b32 v2, v2, v1", x, y)
    np.testing.assert_array_equal(got, x ^ y)
    # v_cmp_class_f16: bit 8 (+normal) and bit 2 (-inf)
    h = np.array([1.0, -np.inf, np.inf, 0.0, -2.0, 6e-8, np.nan, 3.0] * (4 * WAVES),
                 dtype=np.float16)
    xs = h.view(np.uint16).astype(u32)
    got = run("v_cmp_class_f16_e64 s12, v1, 0x104\nv_cndmask_b32_e64 v2, 0, 1, s12", xs, xs)
    want = ((h > 0) & np.isfinite(h) & (np.abs(h) >= 2**-14)) | np.isneginf(h)
    np.testing.assert_array_equal(got, want.astype(u32))


def _cls64(v: int) -> int:
    s = v if v < 2**63 else v - 2**64
    t = s ^ (s >> 63)
    return 0xFFFFFFFF if t == 0 else 64 - t.bit_length()   # sign bit included (ISA loop)


def _quad(v: int, n: int) -> int:
    return sum(1 << i for i in range(n) if v >> (4 * i) & 15)


def _wqm(v: int, n: int) -> int:
    return sum(15 << (4 * i) for i in range(n) if v >> (4 * i) & 15)


SALU_CASES = [
    ("s_pack_hl_b32_b16 s10, s8, s9", _s(lambda a, b: (a >> 16) | (b & 0xFFFF) << 16)),
    ("s_quadmask_b32 s10, s8", _s(lambda a, b: _quad(a, 8))),
    ("s_wqm_b32 s10, s8", _s(lambda a, b: _wqm(a, 8))),
    ("s_mov_b32 s10, s8\ns_mov_b32 s11, s9\ns_wqm_b64 s[10:11], s[10:11]\n"
     "s_xor_b32 s10, s10, s11", _s(lambda a, b: _wqm(b << 32 | a, 16) & 0xFFFFFFFF
                                  ^ _wqm(b << 32 | a, 16) >> 32)),
    ("s_bitreplicate_b64_b32 s[10:11], s8\ns_xor_b32 s10, s10, s11",
     _s(lambda a, b: (lambda r: (r & 0xFFFFFFFF) ^ (r >> 32))(
         sum(3 << (2 * i) for i in range(32) if a >> i & 1)))),
    ("s_mov_b32 s10, s8\ns_mov_b32 s11, s9\ns_cls_i32_i64 s10, s[10:11]",
     _s(lambda a, b: _cls64(b << 32 | a))),
    ("s_mov_b32 m0, 1\ns_movrels_b32 s10, s8", _s(lambda a, b: b)),
    ("s_mov_b32 m0, 3\ns_movreld_b32 s7, s9", _s(lambda a, b: b)),
    ("s_mov_b32 m0, 0x20001\ns_movrelsd_2_b32 s8, s8", _s(lambda a, b: b)),   # s10 = s9
    ("s_mov_b32 s12, exec_lo\ns_mov_b32 exec_hi, 0\ns_mov_b32 s14, s8\ns_mov_b32 s15, s9\n"
     "s_and_saveexec_b64 s[16:17], s[14:15]\ns_cselect_b32 s18, 1, 0\n"
     "s_mov_b32 s10, exec_lo\ns_mov_b32 exec_lo, s12\ns_lshl_b32 s18, s18, 31\n"
     "s_xor_b32 s10, s10, s18\ns_xor_b32 s10, s10, s16",
     _s(lambda a, b: a ^ (0x80000000 if a else 0) ^ 0xFFFFFFFF)),
]


@pytest.mark.parametrize("asm,ref", SALU_CASES, ids=[c[0].split("\n")[-1] for c in SALU_CASES])
def test_rare_salu(asm, ref):
    x, y = _ints(np.random.default_rng(44))
    got = run(asm + "\nv_mov_b32 v2, s10", x, y)
    np.testing.assert_array_equal(got, np.asarray(ref(x, y), dtype=np.uint64).astype(u32))


def test_trig_preop_pieces_sum_to_two_over_pi():
    # v_trig_preop_f64 v[4:5], 1.0, k for k = 0, 1, 2: three 53-bit pieces of 2/π
    asm = """
    v_trig_preop_f64 v[4:5], 1.0, 0
    v_trig_preop_f64 v[6:7], 1.0, 1
    v_trig_preop_f64 v[8:9], 1.0, 2
    v_add_f64 v[4:5], v[4:5], v[6:7]
    v_cvt_f32_f64 v2, v[4:5]
    v_cvt_f32_f64 v3, v[8:9]
    v_cmp_gt_f64_e64 s12, v[6:7], 0
    v_cndmask_b32_e64 v3, 0, v3, s12
    v_add_f32 v2, v2, v3
    """
    x = np.zeros(32 * WAVES, dtype=u32)
    got = run(asm, x, x).view(f32)
    np.testing.assert_array_equal(got, np.full(32 * WAVES, 2 / np.pi, dtype=f32))


@pytest.mark.skipif(shutil.which("llvm-mc-16") is None, reason="llvm-mc-16 (Debian llvm-16)")
def test_every_alu_opcode_of_llvms_gfx1100_tables_is_accepted():
    """SALU, SMEM, VALU (all encodings, and their DPP16/DPP8 forms) at 100%; the memory
    encodings are measured by the same tool but not asserted here."""
    rows = [r for r in opcode_coverage.ROWS if r not in opcode_coverage.MEMORY]
    for enc in rows:
        row = opcode_coverage.measure(enc)
        assert not row.refused and not row.undecodable, (enc, row.refused, row.undecodable)
        assert row.total > 0


def test_integer_clamp_saturates():
    x, y = _ints(np.random.default_rng(45))
    xi, yi = x.astype(np.int64), y.astype(np.int64)
    s32 = lambda v: v - ((v >> 31 & 1) << 32)   # noqa: E731
    for asm, want in [
        ("v_add_nc_u32_e64 v2, v1, v3 clamp", np.clip(xi + yi, 0, 2**32 - 1)),
        ("v_sub_nc_u32_e64 v2, v1, v3 clamp", np.clip(xi - yi, 0, 2**32 - 1)),
        ("v_add_nc_i32 v2, v1, v3 clamp", np.clip(s32(xi) + s32(yi), -2**31, 2**31 - 1)),
    ]:
        np.testing.assert_array_equal(run(asm, x, y), (want & 0xFFFFFFFF).astype(u32),
                                      err_msg=asm)
    # a 16-bit result: the low half saturates (v2 starts at 0, so the high half is 0)
    got = run("v_sub_nc_i16 v2, v1, v3 clamp", x, y)
    want16 = np.clip(_i16(x) - _i16(y), -32768, 32767) & 0xFFFF
    np.testing.assert_array_equal(got, want16.astype(u32))


def test_m0_relative_scalar_read_keeps_a_carry_mask_alive():
    """s_movrels reads s[11 + M0]: the carry mask in s13 must be computed even though the next
    write to s13 would otherwise make it look dead to the dead-mask analysis."""
    x, y = _ints(np.random.default_rng(46))
    asm = """
    s_mov_b32 m0, 2
    v_add_co_u32 v4, s13, v1, v3
    s_movrels_b32 s10, s11
    s_mov_b32 s13, 0
    """
    got = run(asm + "\nv_mov_b32 v2, s10", x, y)
    carry = x.astype(np.int64) + y > 0xFFFFFFFF
    want = [sum(1 << i for i in range(32) if carry[w * 32 + i]) for w in range(WAVES)]
    np.testing.assert_array_equal(got, np.repeat(np.array(want, dtype=np.uint64), 32)
                                  .astype(u32))
