"""Instruction-level semantics: short gfx1100 programs, assembled with llvm-mc-16, vs numpy.

Every case runs 8 waves (workgroups of 32 lanes). Inputs x and y are loaded into v1 and v3 (as
uint32 bit patterns; float cases use float32 data), the snippet leaves its result in v2, which
is stored and compared. `s` cases compute per wave from lane 0's inputs (read into s8/s9 by
v_readfirstlane) and broadcast their result. VGPRs start at zero, as the mock guarantees.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from runtime.drivers.mock.rdna3 import KernelFault

from .rdna3_device import RawDevice

pytestmark = pytest.mark.skipif(shutil.which("llvm-mc-16") is None,
                                reason="llvm-mc-16 (Debian llvm-16) assembles these tests")
u32, i32, f32 = np.uint32, np.int32, np.float32
WAVES = 8
PROLOGUE = """
v_lshlrev_b32 v10, 2, v0
s_lshl_b32 s7, s6, 7
v_add_nc_u32 v10, s7, v10
global_load_b32 v1, v10, s[2:3]
global_load_b32 v3, v10, s[4:5]
s_waitcnt vmcnt(0)
v_readfirstlane_b32 s8, v1
v_readfirstlane_b32 s9, v3
"""
EPILOGUE = """
global_store_b32 v10, v2, s[0:1]
s_endpgm
"""


def assemble(text: str) -> bytes:
    res = subprocess.run(["llvm-mc-16", "-arch=amdgcn", "-mcpu=gfx1100", "--show-encoding"],
                         input=text, capture_output=True, text=True)
    if res.returncode != 0 or "error" in res.stderr:
        raise AssertionError(f"llvm-mc-16 rejected the test program:\n{res.stderr}")
    out = bytearray()
    for m in re.finditer(r"encoding: \[([^\]]*)\]", res.stdout):
        out += bytes(int(b, 16) for b in m.group(1).split(","))
    return bytes(out)


def run(snippet: str, x: np.ndarray, y: np.ndarray, **kw) -> np.ndarray:
    dev = RawDevice()
    code = assemble(PROLOGUE + snippet + EPILOGUE)
    vo = dev.alloc(4 * 32 * WAVES)
    vx, vy = dev.upload(x.view(u32)), dev.upload(y.view(u32))
    user = [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32, vy & 0xFFFFFFFF, vy >> 32]
    dev.launch_raw(code, user, (WAVES,), (32,), **kw)
    return dev.download(vo, 32 * WAVES, u32)


def _ints(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.integers(0, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    y = rng.integers(0, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    specials = [0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 31, 32, 0x00FFFFFF]
    x[1:1 + len(specials)] = specials
    y[2:2 + len(specials)] = specials[::-1]
    x[64:96] = rng.integers(0, 300, 32)   # small values for comparisons and divisions
    y[64:96] = rng.integers(0, 300, 32)
    return x, y


def _cvt(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Saturating float → int truncation, NaN → 0 (computed in f64)."""
    v = v.astype(np.float64)
    return np.where(np.isnan(v), 0, np.clip(np.trunc(np.nan_to_num(v)), lo, hi)).astype(X)


def _floats(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = (rng.standard_normal(32 * WAVES) * 10).astype(f32)
    y = (rng.standard_normal(32 * WAVES) * 10).astype(f32)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e38, 0.5, 2.5, -2.5, 1.0]
    x[:len(specials)] = specials
    y[3:3 + len(specials)] = specials[::-1]
    return x, y


def _bitlen(v: np.ndarray) -> np.ndarray:
    return np.array([int(a).bit_length() for a in v.astype(np.int64)])


def _sext(v: np.ndarray, bits: int) -> np.ndarray:
    v = v.astype(np.int64) & ((1 << bits) - 1)
    return np.where(v >> (bits - 1) & 1, v - (1 << bits), v)


def _perm(x: np.ndarray, y: np.ndarray, sel: int) -> np.ndarray:
    comb = (x.astype(object) << 32) | y.astype(object)
    out = []
    for c in comb:
        word = 0
        for k in range(4):
            s = sel >> (8 * k) & 0xFF
            if s >= 13:
                b = 0xFF
            elif s == 12:
                b = 0
            elif s >= 8:
                b = 0xFF if c >> (16 * (s - 8) + 15) & 1 else 0
            else:
                b = c >> (8 * s) & 0xFF
            word |= b << (8 * k)
        out.append(word)
    return np.array(out, dtype=np.uint64)


X = np.int64  # reference arithmetic in 64 bits, then wrapped to 32
LANE = np.tile(np.arange(32), WAVES)
INT_CASES = [
    ("v_bfe_u32 v2, v1, 5, 7", lambda x, y: (x >> 5) & 0x7F),
    ("v_bfe_i32 v2, v1, v3, 9", lambda x, y: _sext(x.astype(X) >> (y & 31).astype(X), 9)),
    ("v_alignbit_b32 v2, v1, v3, v3",
     lambda x, y: ((x.astype(np.uint64) << 32 | y) >> (y & 31).astype(np.uint64))),
    ("v_alignbyte_b32 v2, v1, v3, 2", lambda x, y: ((x.astype(np.uint64) << 32 | y) >> 16)),
    ("v_perm_b32 v2, v1, v3, 0x0c050a01", lambda x, y: _perm(x, y, 0x0C050A01)),
    ("v_perm_b32 v2, v1, v3, 0x0b09080d", lambda x, y: _perm(x, y, 0x0B09080D)),
    ("v_clz_i32_u32 v2, v1", lambda x, y: np.where(x == 0, -1, 32 - _bitlen(x))),
    ("v_ctz_i32_b32 v2, v1",
     lambda x, y: np.where(x == 0, -1, _bitlen(x.astype(X) & -x.astype(X)) - 1)),
    ("v_cls_i32 v2, v1", lambda x, y: np.where((x == 0) | (x == 0xFFFFFFFF), -1, 32 - _bitlen(
        np.where(x >> 31 == 1, ~x.astype(X) & 0xFFFFFFFF, x.astype(X))))),
    ("v_bfrev_b32 v2, v1", lambda x, y: np.array([int(f"{int(v):032b}"[::-1], 2) for v in x])),
    ("v_bcnt_u32_b32 v2, v1, v3", lambda x, y: np.array([bin(int(v)).count("1") for v in x]) + y),
    ("v_mul_hi_u32 v2, v1, v3", lambda x, y: (x.astype(object) * y.astype(object)) >> 32),
    ("v_mul_hi_i32 v2, v1, v3",
     lambda x, y: (_sext(x, 32).astype(object) * _sext(y, 32).astype(object)) >> 32),
    ("v_mul_lo_u32 v2, v1, v3", lambda x, y: x.astype(object) * y.astype(object)),
    ("v_mul_u32_u24 v2, v1, v3", lambda x, y: (x & 0xFFFFFF).astype(X) * (y & 0xFFFFFF)),
    ("v_mul_hi_u32_u24 v2, v1, v3", lambda x, y: ((x & 0xFFFFFF).astype(X) * (y & 0xFFFFFF)) >> 32),
    ("v_mul_i32_i24 v2, v1, v3", lambda x, y: _sext(x, 24) * _sext(y, 24)),
    ("v_mad_u32_u24 v2, v1, v3, v1", lambda x, y: (x & 0xFFFFFF).astype(X) * (y & 0xFFFFFF) + x),
    ("v_med3_i32 v2, v1, v3, 0x1000",
     lambda x, y: np.median(np.stack([_sext(x, 32), _sext(y, 32), np.full(len(x), 0x1000)]),
                            axis=0).astype(X)),
    ("v_min3_u32 v2, v1, v3, 77", lambda x, y: np.minimum(np.minimum(x, y), 77)),
    ("v_max3_i32 v2, v1, v3, -5", lambda x, y: np.maximum(np.maximum(_sext(x, 32),
                                                                     _sext(y, 32)), -5)),
    ("v_lshl_add_u32 v2, v1, 3, v3", lambda x, y: (x.astype(X) << 3) + y),
    ("v_add3_u32 v2, v1, v3, 0x12345", lambda x, y: x.astype(X) + y + 0x12345),
    ("v_xad_u32 v2, v1, v3, v1", lambda x, y: (x ^ y).astype(X) + x),
    ("v_lshl_or_b32 v2, v1, v3, 0xf0", lambda x, y: (x.astype(X) << (y & 31)) | 0xF0),
    ("v_and_or_b32 v2, v1, v3, 1", lambda x, y: (x & y) | 1),
    ("v_xor3_b32 v2, v1, v3, -1", lambda x, y: ~(x ^ y)),
    ("v_lshrrev_b32 v2, v3, v1", lambda x, y: x >> (y & 31)),
    ("v_ashrrev_i32 v2, v3, v1", lambda x, y: _sext(x, 32) >> (y & 31).astype(X)),
    ("v_sub_nc_u32 v2, v1, v3", lambda x, y: x.astype(X) - y),
    ("v_subrev_nc_u32 v2, v1, v3", lambda x, y: y.astype(X) - x),
    ("v_mov_b32 v4, v1\nv_mov_b32 v5, v3\nv_lshrrev_b64 v[6:7], 13, v[4:5]\nv_xor_b32 v2, v6, v7",
     lambda x, y: ((y.astype(np.uint64) << 32 | x) >> 13 & 0xFFFFFFFF) ^ (y >> 13)),
    ("v_mov_b32 v4, v1\nv_mov_b32 v5, v3\nv_lshlrev_b64 v[6:7], 13, v[4:5]\nv_xor_b32 v2, v6, v7",
     lambda x, y: (lambda r: (r & 0xFFFFFFFF) ^ ((r >> 32) & 0xFFFFFFFF))(
         (y.astype(object) << 32 | x.astype(object)) << 13)),
    ("v_mov_b32 v4, v1\nv_mov_b32 v5, v3\nv_lshlrev_b64 v[4:5], 40, v[4:5]\nv_xor_b32 v2, v4, v5",
     lambda x, y: x.astype(X) << 8),
    ("v_mov_b32 v4, v1\nv_mov_b32 v5, v3\nv_ashrrev_i64 v[6:7], v1, v[4:5]\nv_xor_b32 v2, v6, v7",
     lambda x, y: (lambda r: (r & 0xFFFFFFFF) ^ ((r >> 32) & 0xFFFFFFFF))(
         ((_sext(y, 32).astype(object) << 32) | x.astype(object)) >> (x & 63).astype(object))),
    ("v_add_co_u32 v2, vcc_lo, v1, v3\nv_cndmask_b32_e64 v2, v2, -1, vcc_lo",
     lambda x, y: np.where(x.astype(X) + y > 0xFFFFFFFF, 0xFFFFFFFF, x.astype(X) + y)),
    # the destination is also the first source: the carry compares with the source as it was
    ("v_mov_b32 v4, v1\nv_add_co_u32 v4, vcc_lo, v4, v3\nv_cndmask_b32_e64 v2, v4, -1, vcc_lo",
     lambda x, y: np.where(x.astype(X) + y > 0xFFFFFFFF, 0xFFFFFFFF, x.astype(X) + y)),
    ("v_sub_co_u32 v4, vcc_lo, v1, v3\nv_sub_co_ci_u32_e32 v5, vcc_lo, v3, v1, vcc_lo\n"
     "v_xor_b32 v2, v4, v5",
     lambda x, y: (x.astype(X) - y) ^ (y.astype(X) - x - (y > x))),
    ("v_add_co_u32 v4, s12, v1, v3\nv_add_co_ci_u32_e64 v5, s13, v1, -1, s12\n"
     "v_cndmask_b32_e64 v2, v5, 7, s13",
     lambda x, y: (lambda c: np.where(x.astype(X) + 0xFFFFFFFF + c > 0xFFFFFFFF, 7,
                                      x.astype(X) + 0xFFFFFFFF + c))(x.astype(X) + y > 0xFFFFFFFF)),
    ("v_mov_b32 v6, v3\nv_mov_b32 v7, v1\nv_mad_u64_u32 v[4:5], s12, v1, v3, v[6:7]\n"
     "v_xor_b32 v2, v4, v5",
     lambda x, y: (lambda r: (r & 0xFFFFFFFF) ^ ((r >> 32) & 0xFFFFFFFF))(
         x.astype(object) * y.astype(object) + ((x.astype(object) << 32) | y.astype(object)))),
    ("v_mbcnt_lo_u32_b32 v2, v1, v3", lambda x, y: np.array(
        [bin(int(v) & ((1 << int(k)) - 1)).count("1") for v, k in zip(x, LANE)]) + y),
    ("v_readlane_b32 s10, v1, 5\nv_mov_b32 v2, s10", lambda x, y: np.repeat(x[5::32], 32)),
    ("v_mov_b32 v2, v1\nv_writelane_b32 v2, s9, 7",
     lambda x, y: np.where(LANE == 7, np.repeat(y[::32], 32), x)),
    ("v_sub_nc_u32 v4, 31, v0\nv_lshlrev_b32 v4, 2, v4\nds_bpermute_b32 v2, v4, v1",
     lambda x, y: x.reshape(WAVES, 32)[:, ::-1].reshape(-1)),
    ("v_cmp_gt_u32_e32 vcc_lo, v1, v3\nv_cndmask_b32_e32 v2, v3, v1, vcc_lo",
     lambda x, y: np.maximum(x, y)),
    ("v_cmp_lt_i32_e64 s12, v1, v3\nv_cndmask_b32_e64 v2, 3, 9, s12",
     lambda x, y: np.where(_sext(x, 32) < _sext(y, 32), 9, 3)),
    ("v_cmpx_lt_u32_e32 v1, v3\nv_mov_b32 v2, 7\ns_mov_b32 exec_lo, -1",
     lambda x, y: np.where(x < y, 7, 0)),
    ("v_cmp_ne_u32_e32 vcc_lo, 0, v1\ns_and_saveexec_b32 s12, vcc_lo\nv_mov_b32 v2, 5\n"
     "s_or_b32 exec_lo, exec_lo, s12\nv_add_nc_u32 v2, 1, v2",
     lambda x, y: np.where(x != 0, 6, 1)),
    ("v_cmp_eq_u32_e32 vcc_lo, 0, v3\ns_cbranch_vccnz 1\nv_mov_b32 v2, 5\nv_add_nc_u32 v2, 1, v2",
     lambda x, y: np.repeat(np.where((y.reshape(WAVES, 32) == 0).any(1), 1, 6), 32)),
]


@pytest.mark.parametrize("asm,ref", INT_CASES, ids=[c[0].split("\n")[-1] for c in INT_CASES])
def test_integer_valu(asm, ref):
    x, y = _ints(np.random.default_rng(7))
    y[96:128] = 0  # a wave with VCC all zero for the branch case
    got = run(asm, x, y)
    want = np.array([int(v) & 0xFFFFFFFF for v in ref(x, y)], dtype=np.uint64)
    np.testing.assert_array_equal(got, want)


def _classify(v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = []
    for a, m in zip(v.astype(np.float32), mask):
        bits = int(np.array(a).view(u32))
        neg = bits >> 31
        exp, man = bits >> 23 & 0xFF, bits & 0x7FFFFF
        if exp == 0xFF and man:
            cls = 1 if man & 0x400000 else 0
        elif exp == 0xFF:
            cls = 2 if neg else 9
        elif exp == 0 and man == 0:
            cls = 5 if neg else 6
        elif exp == 0:
            cls = 4 if neg else 7
        else:
            cls = 3 if neg else 8
        out.append(1 if int(m) >> cls & 1 else 0)
    return np.array(out)


FLOAT_CASES = [
    ("v_add_f32_e64 v2, -|v1|, v3", lambda x, y: -np.abs(x) + y, 0),
    ("v_mul_f32_e64 v2, v1, v3 clamp",
     lambda x, y: np.nan_to_num(np.clip(x * y, 0, 1), nan=0.0), 0),
    ("v_fma_f32 v2, v1, v3, 0.5 mul:2", lambda x, y: (x.astype(np.float64) * y + 0.5) * 2, 0),
    ("v_min_f32_e32 v2, v1, v3", np.fmin, 0),
    ("v_max_f32_e32 v2, v1, v3", np.fmax, 0),
    ("v_max3_f32 v2, v1, v3, 1.0", lambda x, y: np.fmax(np.fmax(x, y), 1), 0),
    ("v_cvt_u32_f32_e32 v2, v1", lambda x, y: _cvt(x, 0, 2**32 - 1), 0),
    ("v_cvt_i32_f32_e32 v2, v1", lambda x, y: _cvt(x, -2**31, 2**31 - 1), 0),
    ("v_cvt_i32_f32_e32 v4, v1\nv_cvt_f32_i32_e32 v2, v4",
     lambda x, y: _cvt(x, -2**31, 2**31 - 1).astype(f32), 0),
    ("v_rndne_f32_e32 v2, v1", np.rint, 0),
    ("v_floor_f32_e32 v2, v1", np.floor, 0),
    ("v_trunc_f32_e32 v2, v1", np.trunc, 0),
    ("v_fract_f32_e32 v2, v1",
     lambda x, y: np.where(np.isinf(x), np.nan, np.minimum(x - np.floor(x), f32(1 - 2**-24))), 0),
    ("v_frexp_mant_f32_e32 v2, v1", lambda x, y: np.where(np.isfinite(x), np.frexp(x)[0], x), 0),
    ("v_frexp_exp_i32_f32_e32 v2, v1",
     lambda x, y: np.where(np.isfinite(x), np.frexp(x)[1], 0).astype(X), 0),
    ("v_cvt_i32_f32_e32 v4, v3\nv_ldexp_f32 v2, v1, v4",
     lambda x, y: np.ldexp(x, np.clip(_cvt(y, -2**31, 2**31 - 1), -300, 300)), 0),
    ("v_cvt_u32_f32_e32 v4, v3\nv_cmp_class_f32_e64 s12, v1, v4\n"
     "v_cndmask_b32_e64 v2, 0, 1, s12",
     lambda x, y: _classify(x, _cvt(y, 0, 2**32 - 1)), 0),
    ("v_sqrt_f32_e32 v2, v1", np.sqrt, 0),
    ("v_rcp_f32_e32 v2, v1", lambda x, y: f32(1) / x, 0),
    ("v_rsq_f32_e32 v2, v1", lambda x, y: 1 / np.sqrt(x.astype(np.float64)), 1e-7),
    ("v_exp_f32_e32 v2, v1", lambda x, y: np.exp2(x.astype(np.float64)), 1e-6),
    ("v_log_f32_e32 v2, v1", lambda x, y: np.log2(x.astype(np.float64)), 1e-6),
    ("v_sin_f32_e32 v2, 0x3e800000", lambda x, y: np.ones_like(x), 1e-6),  # sin(2π/4)
    ("v_cos_f32_e32 v2, 0.5", lambda x, y: -np.ones_like(x), 1e-6),
    ("v_cvt_f16_f32_e32 v4, v1\nv_cvt_f32_f16_e32 v2, v4",
     lambda x, y: x.astype(np.float16).astype(f32), 0),
    ("v_cvt_f16_f32_e32 v4, v1\nv_cvt_f16_f32_e32 v5, v3\nv_add_f16_e32 v6, v4, v5\n"
     "v_cvt_f32_f16_e32 v2, v6",
     lambda x, y: (x.astype(np.float16) + y.astype(np.float16)).astype(f32), 0),
    ("v_dual_mul_f32 v4, v1, v3 :: v_dual_add_f32 v5, v3, v1\nv_sub_f32_e32 v2, v4, v5",
     lambda x, y: (x * y) - (x + y), 0),
    ("v_mov_b32 v2, v1\nv_dual_fmac_f32 v2, v3, v3 :: v_dual_mov_b32 v5, v2",
     lambda x, y: (y.astype(np.float64) * y + x), 0),
]


@pytest.mark.parametrize("asm,ref,rtol", FLOAT_CASES,
                         ids=[c[0].split("\n")[-1] for c in FLOAT_CASES])
def test_float_valu(asm, ref, rtol):
    x, y = _floats(np.random.default_rng(11))
    got = run(asm, x, y)
    with np.errstate(all="ignore"):
        want = np.asarray(ref(x, y))
        if want.dtype.kind in "iu" or want.dtype == object:
            np.testing.assert_array_equal(got, np.array([int(v) & 0xFFFFFFFF for v in want]))
            return
        want = want.astype(f32)
    if rtol:
        np.testing.assert_allclose(got.view(f32), want, rtol=rtol)
    else:
        np.testing.assert_array_equal(got, want.view(u32))


def _s(fn):
    """A per-wave reference: fn(a, b) on lane 0's x and y (as Python ints), broadcast."""
    def ref(x, y):
        return np.repeat([fn(int(a), int(b)) & 0xFFFFFFFF for a, b in zip(x[::32], y[::32])], 32)
    return ref


def _si(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


SALU_CASES = [
    ("s_bfe_u32 s10, s8, 0x80005", _s(lambda a, b: a >> 5 & 0xFF)),
    ("s_bfe_i32 s10, s8, 0x50003", _s(lambda a, b: _si(((a >> 3 & 31) << 27) & 0xFFFFFFFF) >> 27)),
    ("s_add_u32 s10, s8, s9\ns_cselect_b32 s11, 1, 0\ns_xor_b32 s10, s10, s11",
     _s(lambda a, b: ((a + b) & 0xFFFFFFFF) ^ (1 if a + b > 0xFFFFFFFF else 0))),
    ("s_sub_i32 s10, s8, s9\ns_cselect_b32 s10, 1, 2",
     _s(lambda a, b: 1 if not -2**31 <= _si(a) - _si(b) < 2**31 else 2)),
    ("s_add_u32 s10, s8, s9\ns_addc_u32 s11, s9, 0\ns_xor_b32 s10, s10, s11",
     _s(lambda a, b: ((a + b) & 0xFFFFFFFF) ^ ((b + (a + b > 0xFFFFFFFF)) & 0xFFFFFFFF))),
    ("s_mov_b32 s10, s8\ns_mov_b32 s11, s9\ns_lshl_b64 s[10:11], s[10:11], 7\n"
     "s_xor_b32 s10, s10, s11",
     _s(lambda a, b: (((b << 32 | a) << 7) & 0xFFFFFFFF) ^ (((b << 32 | a) << 7) >> 32))),
    ("s_mov_b32 s10, s8\ns_mov_b32 s11, s9\ns_ashr_i64 s[10:11], s[10:11], 40\ns_mov_b32 s10, s10",
     _s(lambda a, b: (_si(b) << 32 | a) >> 40)),
    ("s_mov_b32 s10, s8\ns_mov_b32 s11, s9\ns_bcnt1_i32_b64 s10, s[10:11]",
     _s(lambda a, b: bin(b << 32 | a).count("1"))),
    ("s_ctz_i32_b32 s10, s8", _s(lambda a, b: (a & -a).bit_length() - 1 if a else -1)),
    ("s_clz_i32_u32 s10, s8", _s(lambda a, b: 32 - a.bit_length() if a else -1)),
    ("s_brev_b32 s10, s8", _s(lambda a, b: int(f"{a:032b}"[::-1], 2))),
    ("s_sext_i32_i8 s10, s8", _s(lambda a, b: (a & 0xFF) - (256 if a & 0x80 else 0))),
    ("s_min_i32 s10, s8, s9\ns_cselect_b32 s11, 0x100, 0\ns_or_b32 s10, s10, s11",
     _s(lambda a, b: min(_si(a), _si(b)) | (0x100 if _si(a) < _si(b) else 0))),
    ("s_cmp_lt_u32 s8, s9\ns_cselect_b32 s10, s8, s9", _s(lambda a, b: min(a, b))),
    ("s_absdiff_i32 s10, s8, s9", _s(lambda a, b: abs(_si(a) - _si(b)))),
    ("s_mul_hi_i32 s10, s8, s9", _s(lambda a, b: (_si(a) * _si(b)) >> 32)),
    ("s_mul_i32 s10, s8, s9", _s(lambda a, b: a * b)),
    ("s_bitcmp1_b32 s8, 3\ns_cselect_b32 s10, 11, 22", _s(lambda a, b: 11 if a >> 3 & 1 else 22)),
    ("s_movk_i32 s10, 0x8001\ns_addk_i32 s10, 0x10", _s(lambda a, b: -0x7FFF + 0x10)),
    ("s_cmpk_gt_u32 s8, 0x7fff\ns_cselect_b32 s10, 1, 0", _s(lambda a, b: int(a > 0x7FFF))),
    ("s_mov_b32 s10, s8\ns_bitset1_b32 s10, 4\ns_lshl2_add_u32 s10, s10, s9",
     _s(lambda a, b: (a | 16) * 4 + b)),
    ("s_getpc_b64 s[10:11]\ns_add_u32 s10, s10, 16\ns_addc_u32 s11, s11, 0\n"
     "s_setpc_b64 s[10:11]\nv_mov_b32 v2, 1\ns_mov_b32 s10, 2", _s(lambda a, b: 2)),
    ("s_cmp_lt_u32 s8, 0x80000000\ns_cbranch_scc1 2\ns_mov_b32 s10, 5\ns_branch 1\n"
     "s_mov_b32 s10, 6", _s(lambda a, b: 6 if a < 0x80000000 else 5)),
]


@pytest.mark.parametrize("asm,ref", SALU_CASES, ids=[c[0].split("\n")[0] for c in SALU_CASES])
def test_scalar_alu(asm, ref):
    x, y = _ints(np.random.default_rng(3))
    got = run(asm + "\nv_mov_b32 v2, s10", x, y)
    np.testing.assert_array_equal(got, np.asarray(ref(x, y), dtype=np.uint64).astype(u32))


def test_lds_atomics_and_two_address_ops():
    snippet = """
    v_mov_b32 v4, 0
    ds_add_u32 v4, v1
    ds_max_rtn_u32 v5, v4, v3 offset:4
    s_waitcnt lgkmcnt(0)
    s_barrier
    ds_load_2addr_b32 v[6:7], v4 offset1:1
    s_waitcnt lgkmcnt(0)
    v_xor_b32 v2, v6, v7
    """
    x = np.random.default_rng(5).integers(0, 1000, 32 * WAVES).astype(u32)
    y = np.random.default_rng(6).integers(0, 1000, 32 * WAVES).astype(u32)
    got = run(snippet, x, y, lds_bytes=512)
    sums = x.reshape(WAVES, 32).sum(1)
    maxs = y.reshape(WAVES, 32).max(1)
    np.testing.assert_array_equal(got, np.repeat(sums ^ maxs, 32).astype(u32))


def test_global_atomic_returns_pre_op_values_in_lane_order():
    snippet = """
    v_mov_b32 v4, 0
    v_mov_b32 v5, 1
    global_atomic_add_u32 v2, v4, v5, s[0:1] offset:2048 glc
    s_waitcnt vmcnt(0)
    """
    x = np.zeros(32 * WAVES, u32)
    got = run(snippet, x, x)
    np.testing.assert_array_equal(np.sort(got), np.arange(32 * WAVES))
    # within a wave, lanes are served in order
    assert all((np.diff(w) == 1).all() for w in got.reshape(WAVES, 32))


def test_unsupported_instruction_names_itself():
    x = np.zeros(32 * WAVES, u32)
    with pytest.raises(KernelFault, match="image_load") as e:
        run("image_load v[4:7], v[4:5], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D", x, x)
    assert e.value.address is not None
