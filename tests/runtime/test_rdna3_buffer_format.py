"""Format-converting buffer accesses on the RDNA3 interpreter: MUBUF buffer_*_format_* (format and
component selects from the V#), MTBUF tbuffer_* (format from the instruction), the buffer loads
into LDS, and the opcode-acceptance figure over LLVM's gfx1100 tables.

Programs are assembled with llvm-mc-16. Expected values are written out from the RDNA3 ISA rules
(sections 9.2-9.6 and 10.7): UNORM c/(2^n-1), SNORM with the -1 clamp, SCALED, UINT/SINT
extension, float widening, d16 packing and the out-of-range / unbound rules; they are computed
here independently of `buffer_formats`.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from runtime.drivers.mock.rdna3 import KernelFault
from tools import rdna3_opcode_coverage as opcode_coverage
from runtime.drivers.mock.rdna3.buffer_formats import FORMATS
from runtime.drivers.mock.rdna3.opcodes import TABLES

from .test_rdna3_isa import assemble, pytestmark  # noqa: F401  (llvm-mc-16 needed)
from .rdna3_device import RawDevice

u32, f32, f16 = np.uint32, np.float32, np.float16
LANES = 32
IDENT = (4, 5, 6, 7)   # DST_SEL X, Y, Z, W
# gfx11 format codes (Table 52; the names llvm-mc-16 prints, checked below)
F8_UNORM, F8_UINT, F16_SSCALED, F16_FLOAT, F32_FLOAT = 1, 5, 10, 13, 22
F16_16_UNORM, F16_16_SNORM, F10_11_11_FLOAT, F10_10_10_2_SINT = 23, 24, 30, 35
F2_10_10_10_UNORM, F8_8_8_8_UNORM, F8_8_8_8_UINT, F32_32_UINT, F16X4_FLOAT = 36, 42, 46, 48, 57

# s[0:1] = output (4 dwords per lane: v2..v5), s[2:3] = input, V# in s[4:7], s8.. extra.
HEAD = """
v_lshlrev_b32 v10, 2, v0
v_lshlrev_b32 v11, 3, v0
v_lshlrev_b32 v12, 4, v0
v_mov_b32 v2, 0xdeadbeef
v_mov_b32 v3, 0xdeadbeef
v_mov_b32 v4, 0xdeadbeef
v_mov_b32 v5, 0xdeadbeef
"""
TAIL = """
s_waitcnt vmcnt(0) lgkmcnt(0)
global_store_b128 v12, v[2:5], s[0:1]
s_endpgm
"""


def word3(fmt: int, sel: tuple[int, int, int, int] = IDENT, oob: int = 3) -> int:
    return sel[0] | sel[1] << 3 | sel[2] << 6 | sel[3] << 9 | fmt << 12 | oob << 28


def run(body: str, data: np.ndarray, w3: int, *, num_records: int | None = None,
        stride: int = 0, sgprs: tuple[int, ...] = (), lds_bytes: int = 0
        ) -> tuple[np.ndarray, RawDevice, int]:
    """HEAD + body + TAIL on one wave; (v2..v5 per lane [32, 4], device, input VA)."""
    dev = RawDevice()
    raw = np.ascontiguousarray(data).view(np.uint8)
    vin = dev.upload(raw)
    vout = dev.upload(np.zeros(LANES * 4, u32))
    n = raw.nbytes if num_records is None else num_records
    desc = [vin & 0xFFFFFFFF, (vin >> 32) | stride << 16, n, w3]
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32, *desc, *sgprs]
    dev.launch_raw(assemble(HEAD + body + TAIL), user, (1,), (LANES,), lds_bytes=lds_bytes)
    return dev.download(vout, LANES * 4, u32).reshape(LANES, 4), dev, vin


def bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).view(u32)


def h16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=f16).view(np.uint16).astype(u32)


# -- the format table -----------------------------------------------------------------------------
def test_format_table_matches_llvm_names():
    """Codes 1-63 have the names llvm-mc-16 prints for a tbuffer instruction's format field."""
    lines = []
    for code in range(64):
        w0 = 0b111010 << 26 | code << 19
        lines.append(" ".join(f"{b:#04x}" for w in (w0, 0x80000000)
                              for b in w.to_bytes(4, "little")))
    res = subprocess.run(["llvm-mc-16", "--disassemble", "-arch=amdgcn", "-mcpu=gfx1100"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True)
    printed = [ln for ln in res.stdout.splitlines() if "tbuffer" in ln]
    assert len(printed) == 64
    for code, ln in enumerate(printed):
        m = re.search(r"BUF_FMT_(\w+)\]", ln)
        name = m.group(1) if m else "8_UNORM"   # format 1 is LLVM's default, not printed
        if code == 0:
            assert name == "INVALID" and code not in FORMATS
        else:
            assert FORMATS[code].name == name, (code, ln)


# -- MUBUF loads ---------------------------------------------------------------------------------
def test_load_format_xyzw_unorm_bytes():
    data = (np.arange(LANES * 4) * 37 % 256).astype(np.uint8)
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", data,
                    word3(F8_8_8_8_UNORM))
    want = (data.reshape(LANES, 4).astype(np.float64) / 255).astype(f32)
    np.testing.assert_array_equal(got, bits(want))


def test_load_format_snorm_clamps_the_most_negative_value():
    vals = np.array([-32768, -32767, -1, 0, 1, 32767, 12345, -20000] * 8, np.int16)
    got, _, _ = run("buffer_load_format_xy v[2:3], v10, s[4:7], 0 offen", vals,
                    word3(F16_16_SNORM))
    pairs = vals.reshape(LANES, 2).astype(np.float64)
    want = np.maximum(pairs / 32767, -1.0).astype(f32)
    np.testing.assert_array_equal(got[:, :2], bits(want))
    assert got[0, 0] == bits(f32(-1.0)) and got[0, 1] == bits(f32(-1.0))


def test_load_format_scaled_float16_and_uint():
    s16 = (np.arange(LANES * 2) * 1031 - 32768).astype(np.int16)
    s16[2], s16[4] = 32767, -1
    got, _, _ = run("buffer_load_format_x v2, v10, s[4:7], 0 offen", s16, word3(F16_SSCALED))
    # v10 = lane * 4 bytes: every second int16
    np.testing.assert_array_equal(got[:, 0], bits(s16[::2].astype(f32)))
    h = np.linspace(-3, 3, LANES * 4).astype(f16)
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v11, s[4:7], 0 offen", h,
                    word3(F16X4_FLOAT))
    np.testing.assert_array_equal(got, bits(h.reshape(LANES, 4).astype(f32)))
    b = (np.arange(LANES * 4) * 11 % 256).astype(np.uint8)
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", b,
                    word3(F8_8_8_8_UINT))
    np.testing.assert_array_equal(got, b.reshape(LANES, 4).astype(u32))


def test_load_packed_formats_put_x_in_the_low_bits():
    rng = np.random.default_rng(3)
    words = rng.integers(0, 2**32, LANES, dtype=np.uint64).astype(u32)
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", words,
                    word3(F2_10_10_10_UNORM))
    w = words.astype(np.int64)
    fields = [(w >> 0) & 1023, (w >> 10) & 1023, (w >> 20) & 1023, (w >> 30) & 3]
    want = np.stack([fields[0] / 1023, fields[1] / 1023, fields[2] / 1023, fields[3] / 3], 1)
    np.testing.assert_array_equal(got, bits(want.astype(f32)))

    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", words,
                    word3(F10_10_10_2_SINT))
    sext = [((f ^ (1 << (n - 1))) - (1 << (n - 1))) for f, n in
            (((w >> 0) & 3, 2), ((w >> 2) & 1023, 10), ((w >> 12) & 1023, 10),
             ((w >> 22) & 1023, 10))]
    np.testing.assert_array_equal(got, np.stack(sext, 1).astype(np.int32).view(u32))


def test_load_10_11_11_float():
    # X: 11-bit 1.5 (exp 15, mantissa 32/64), Y: 11-bit 2^-14 * 3/64 (a denormal),
    # Z: 10-bit infinity; then X = 0.25, Y = 65024 (largest 11-bit), Z = NaN.
    w0 = (15 << 6 | 32) | (3 << 11) | (31 << 5) << 22
    w1 = (13 << 6) | (30 << 6 | 63) << 11 | (31 << 5 | 1) << 22
    words = np.array([w0, w1] * 16, u32)
    got, _, _ = run("buffer_load_format_xyz v[2:4], v10, s[4:7], 0 offen", words,
                    word3(F10_11_11_FLOAT))
    assert list(got[0, :3].view(f32)[:2]) == [1.5, 3 / 64 * 2.0 ** -14]
    assert np.isposinf(got[0, :3].view(f32)[2])
    assert list(got[1, :2].view(f32)) == [0.25, 65024.0] and np.isnan(got[1, 2:3].view(f32))[0]


def test_missing_components_follow_the_selects():
    x = np.arange(LANES, dtype=f32) + 0.5
    # X, 0, 1, W for a one-component format: W names a component it lacks, so 0
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", x,
                    word3(F32_FLOAT, (4, 0, 1, 7)))
    np.testing.assert_array_equal(got[:, 0], bits(x))
    np.testing.assert_array_equal(got[:, 1:], np.tile(bits(f32([0, 1, 0])), (LANES, 1)))
    # integer formats select integer 1; swizzled selects read the named component
    b = (np.arange(LANES * 4) % 256).astype(np.uint8)
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", b,
                    word3(F8_8_8_8_UINT, (6, 4, 1, 5)))
    q = b.reshape(LANES, 4).astype(u32)
    np.testing.assert_array_equal(got, np.stack([q[:, 2], q[:, 0], np.ones(LANES, u32),
                                                 q[:, 1]], 1))


def test_out_of_range_elements_read_zero_or_one_whole():
    """All or nothing: an element straddling NUM_RECORDS is out of range entirely, and its
    SEL_1 components still read 1."""
    b = (np.arange(LANES * 4) + 1).astype(np.uint8)
    got, _, _ = run("buffer_load_format_xyzw v[2:5], v10, s[4:7], 0 offen", b,
                    word3(F8_8_8_8_UINT, (4, 5, 1, 0)), num_records=10 * 4 + 2)
    q = b.reshape(LANES, 4).astype(u32)
    inr = np.arange(LANES) < 10
    want = np.stack([np.where(inr, q[:, 0], 0), np.where(inr, q[:, 1], 0),
                     np.ones(LANES, u32), np.zeros(LANES, u32)], 1)
    np.testing.assert_array_equal(got, want)


def test_waves_with_different_descriptors_convert_each_by_its_own():
    """Two workgroups run the load together; the second's V# names another format and
    selects (s9 is its workgroup id)."""
    body = """
    s_cmp_eq_u32 s9, 1
    s_cselect_b32 s7, s8, s7
    buffer_load_format_xy v[2:3], v10, s[4:7], 0 offen
    s_lshl_b32 s10, s9, 9
    v_add_nc_u32 v12, s10, v12
    """
    b = (np.arange(LANES * 4) * 7 % 256).astype(np.uint8)
    dev = RawDevice()
    vin = dev.upload(b)
    vout = dev.upload(np.zeros(2 * LANES * 4, u32))
    desc = [vin & 0xFFFFFFFF, vin >> 32, b.nbytes, word3(F8_8_8_8_UNORM)]
    alt = word3(F8_8_8_8_UINT, (5, 1, 0, 0))
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32, *desc, alt]
    dev.launch_raw(assemble(HEAD + body + TAIL), user, (2,), (LANES,))
    got = dev.download(vout, 2 * LANES * 4, u32).reshape(2, LANES, 4)
    q = b.reshape(LANES, 4)
    np.testing.assert_array_equal(got[0, :, :2], bits((q[:, :2] / 255).astype(f32)))
    np.testing.assert_array_equal(got[1, :, 0], q[:, 1].astype(u32))
    np.testing.assert_array_equal(got[1, :, 1], np.ones(LANES, u32))


def test_unbound_descriptor_reads_zero_and_writes_nothing():
    data = np.arange(LANES, dtype=u32) + 100
    body = """
    buffer_load_format_x v2, v10, s[4:7], 0 offen
    v_mov_b32 v6, 7
    buffer_store_format_x v6, v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b32 v3, v10, s[2:3]
    """
    got, _, _ = run(body, data, 0)   # FORMAT 0 (INVALID), every select 0
    np.testing.assert_array_equal(got[:, 0], np.zeros(LANES, u32))
    np.testing.assert_array_equal(got[:, 1], data)


def test_d16_loads_pack_halves_and_keep_the_rest():
    h = (np.arange(LANES * 4) / 8 - 3).astype(f16)
    body = """
    v_mov_b32 v3, 0x1234abcd
    buffer_load_d16_format_xyz v[2:3], v11, s[4:7], 0 offen
    """
    got, _, _ = run(body, h, word3(F16X4_FLOAT))
    q = h.reshape(LANES, 4).view(np.uint16).astype(u32)
    np.testing.assert_array_equal(got[:, 0], q[:, 0] | q[:, 1] << 16)
    np.testing.assert_array_equal(got[:, 1], q[:, 2] | 0x12340000)
    # d16_hi: 8-bit UNORM as float16 (round to nearest even) in the high half
    b = (np.arange(LANES) * 9 % 256).astype(np.uint8)
    body = """
    v_mov_b32 v2, 0x5555aaaa
    v_mov_b32 v13, v0
    buffer_load_d16_hi_format_x v2, v13, s[4:7], 0 offen
    """
    got, _, _ = run(body, b, word3(F8_UNORM))
    np.testing.assert_array_equal(got[:, 0], h16(b / 255) << 16 | 0xAAAA)


def test_d16_load_of_32_bit_floats_truncates():
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -20, -(1 + 2.0 ** -11 + 2.0 ** -20), 70000.0,
                  -1e-9] * 8, f32)
    got, _, _ = run("buffer_load_d16_format_x v2, v10, s[4:7], 0 offen", x, word3(F32_FLOAT))
    want = np.array([1.0, -1.0, 65504.0, -0.0] * 8, f16).view(np.uint16).astype(u32)
    np.testing.assert_array_equal(got[:, 0] & 0xFFFF, want)


def test_misaligned_formatted_access_is_a_memory_violation():
    with pytest.raises(KernelFault, match="not 4-byte aligned"):
        run("buffer_load_format_x v2, v10, s[4:7], 0 offen offset:2", np.zeros(64, u32),
            word3(F32_FLOAT))


def test_reserved_select_is_refused():
    with pytest.raises(KernelFault, match="reserved select"):
        run("buffer_load_format_xy v[2:3], v10, s[4:7], 0 offen", np.zeros(64, u32),
            word3(F32_FLOAT, (4, 2, 0, 0)))


# -- MUBUF stores --------------------------------------------------------------------------------
def test_store_format_unorm_snorm_rounding_and_saturation():
    vals = np.array([0.5, 1.5, -0.2, np.nan, 0.25, 1.0, 0.0, 0.998], f32)
    body = f"""
    v_and_b32 v6, 7, v0
    v_lshlrev_b32 v6, 2, v6
    global_load_b32 v20, v6, s[8:9]
    v_add_nc_u32 v7, 4, v6
    v_and_b32 v7, 31, v7
    global_load_b32 v21, v7, s[8:9]
    s_waitcnt vmcnt(0)
    v_mov_b32 v22, v20
    v_mov_b32 v23, v21
    buffer_store_format_xyzw v[20:23], v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    """
    dev_vals = vals
    got = _run_with_table(body, np.zeros(LANES, u32), word3(F8_8_8_8_UNORM), dev_vals)
    lane = np.arange(LANES)
    a, c = vals[lane % 8], vals[(lane + 1) % 8]
    unorm = [0 if np.isnan(v) else int(np.rint(min(max(float(v), 0.0), 1.0) * 255))
             for v in np.concatenate([a, c])]
    ua, uc = np.array(unorm[:LANES]), np.array(unorm[LANES:])
    np.testing.assert_array_equal(got[:, 0], (ua | uc << 8 | ua << 16 | uc << 24).astype(u32))
    assert unorm[0] == 128   # 127.5 rounds to even


def _run_with_table(body: str, data: np.ndarray, w3: int, table: np.ndarray) -> np.ndarray:
    """run() with a second input table (float32) at s[8:9]."""
    dev = RawDevice()
    vin = dev.upload(np.ascontiguousarray(data).view(np.uint8))
    vt = dev.upload(table.view(u32))
    vout = dev.upload(np.zeros(LANES * 4, u32))
    desc = [vin & 0xFFFFFFFF, vin >> 32, data.nbytes, w3]
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32, *desc,
            vt & 0xFFFFFFFF, vt >> 32]
    dev.launch_raw(assemble(HEAD + body + TAIL), user, (1,), (LANES,), vgprs=32)
    return dev.download(vout, LANES * 4, u32).reshape(LANES, 4)


def test_store_format_integer_saturation_and_snorm():
    body = """
    v_mul_u32_u24 v6, 0x25, v0
    v_sub_nc_u32 v7, 0, v6
    v_mov_b32 v8, 0x7fffffff
    v_mov_b32 v9, 0x3fc00000
    buffer_store_format_xyzw v[6:9], v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    """
    got, _, _ = run(body, np.zeros(LANES, u32), word3(F8_8_8_8_UINT))
    lane = np.arange(LANES, dtype=np.int64)
    x = np.minimum(lane * 0x25, 255)
    y = np.where(lane == 0, 0, 255)          # -k as uint32 is huge: saturates
    want = x | y << 8 | 255 << 16 | 255 << 24   # 0x3fc00000 is a big integer too
    np.testing.assert_array_equal(got[:, 0], want.astype(u32))
    body = """
    v_mov_b32 v6, -1.5
    v_mov_b32 v7, 0.5
    buffer_store_format_xy v[6:7], v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    """
    got, _, _ = run(body, np.zeros(LANES, u32), word3(F16_16_SNORM))
    np.testing.assert_array_equal(got[:, 0], np.full(LANES, 0x8001 | 16384 << 16, u32))


def test_store_format_writes_every_component_of_the_format():
    """store_format_x into a two-dword format: X from the VGPR, Y by its select (0 here), and
    a select of SEL_1 writes integer 1."""
    body = """
    v_add_nc_u32 v6, 1000, v0
    buffer_store_format_x v6, v11, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b64 v[2:3], v11, s[2:3]
    """
    data = np.full(LANES * 2, 0xAAAAAAAA, u32)
    got, _, _ = run(body, data, word3(F32_32_UINT))
    np.testing.assert_array_equal(got[:, 0], 1000 + np.arange(LANES, dtype=u32))
    np.testing.assert_array_equal(got[:, 1], np.zeros(LANES, u32))
    got, _, _ = run(body, data, word3(F32_32_UINT, (4, 1, 0, 0)))
    np.testing.assert_array_equal(got[:, 1], np.ones(LANES, u32))


def test_store_d16_forms_and_out_of_range_drop():
    body = """
    v_cvt_f16_f32 v6, 0.5
    v_cvt_f16_f32 v7, 0.25
    v_lshl_or_b32 v6, v7, 16, v6
    buffer_store_d16_format_xy v6, v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    v_mov_b32 v8, 0x3c000000
    buffer_store_d16_hi_format_x v8, v10, s[4:7], 0 offen offset:128
    s_waitcnt vmcnt(0)
    global_load_b32 v3, v10, s[2:3] offset:128
    """
    data = np.full(LANES * 2, 0x77777777, u32)
    got, _, _ = run(body, data, word3(F16_16_UNORM), num_records=20 * 4)
    inr = np.arange(LANES) < 20
    np.testing.assert_array_equal(got[:, 0], np.where(inr, 32768 | 16384 << 16, 0x77777777))
    # offset 128: lanes 0..31 all past NUM_RECORDS = 80 B, so nothing is written
    np.testing.assert_array_equal(got[:, 1], np.full(LANES, 0x77777777, u32))
    got, _, _ = run(body, data, word3(F16_16_UNORM))
    np.testing.assert_array_equal(got[:, 1], np.full(LANES, 65535, u32))  # 1.0 -> X, Y = 0


# -- MTBUF ---------------------------------------------------------------------------------------
def test_tbuffer_takes_the_format_from_the_instruction():
    vals = np.array([-32768, -32767, 16384, 32767] * 16, np.int16)
    body = "tbuffer_load_format_xyzw v[2:5], v10, s[4:7], 0 format:[BUF_FMT_16_16_SNORM] offen"
    got, _, _ = run(body, vals, word3(F8_8_8_8_UINT, (0, 0, 0, 0)))   # the V# is ignored
    p = vals[:LANES * 2].reshape(LANES, 2).astype(np.float64)
    x, y = np.maximum(p / 32767, -1).astype(f32).T
    want = np.stack([bits(x), bits(y), np.zeros(LANES, u32), np.zeros(LANES, u32)], 1)
    np.testing.assert_array_equal(got, want)   # identity selects: XY00


def test_tbuffer_identity_selects_fill_missing_components_with_zero():
    """MTBUF's identity select is X000 for a one-component format (no 1 in W), whatever the
    V#'s selects say."""
    x = np.arange(LANES, dtype=f32) - 7.25
    body = "tbuffer_load_format_xyzw v[2:5], v10, s[4:7], 0 format:[BUF_FMT_32_FLOAT] offen"
    got, _, _ = run(body, x, word3(F8_UINT, (1, 1, 1, 1)))
    np.testing.assert_array_equal(got[:, 0], bits(x))
    np.testing.assert_array_equal(got[:, 1:], np.zeros((LANES, 3), u32))


def test_structured_format_load_checks_the_index():
    """idxen with an 8-byte stride and OOB_SELECT 1: element i at 8 i, in range while
    i < NUM_RECORDS (in records); Z names a component 16_16 lacks, so it reads 0."""
    h = (np.arange(LANES * 4) * 977 - 30000).astype(np.int16)
    h[0] = -32768
    body = "buffer_load_format_xyz v[2:4], v0, s[4:7], 0 idxen"
    got, _, _ = run(body, h, word3(F16_16_SNORM, oob=1), stride=8, num_records=20)
    lane = np.arange(LANES)
    comps = np.stack([h[4 * lane], h[4 * lane + 1]], 1).astype(np.float64)
    want = np.where((lane < 20)[:, None], np.maximum(comps / 32767, -1), 0).astype(f32)
    np.testing.assert_array_equal(got[:, :2], bits(want))
    np.testing.assert_array_equal(got[:, 2], np.zeros(LANES, u32))


def test_tbuffer_store_and_d16():
    body = """
    v_mov_b32 v6, 300
    v_mov_b32 v7, 5
    tbuffer_store_format_xy v[6:7], v10, s[4:7], 0 format:[BUF_FMT_8_8_UINT] offen
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    tbuffer_load_d16_format_x v3, v10, s[4:7], 0 format:[BUF_FMT_8_UNORM] offen
    """
    data = np.full(LANES, 0x99999999, u32)
    got, _, _ = run(body, data, word3(F32_FLOAT))
    np.testing.assert_array_equal(got[:, 0], np.full(LANES, 0x99990000 | 5 << 8 | 255, u32))
    # the d16 load reads byte 0 (255) as UNORM: 1.0 in the low half, the high half kept
    np.testing.assert_array_equal(got[:, 1] & 0xFFFF, np.full(LANES, 0x3C00, u32))


def test_tbuffer_reserved_format_is_named():
    with pytest.raises(KernelFault, match="data format 100"):
        run("tbuffer_load_format_x v2, v10, s[4:7], 0 format:100 offen", np.zeros(64, u32),
            word3(F32_FLOAT))


# -- loads into LDS ------------------------------------------------------------------------------
@pytest.mark.parametrize("op, dt", [("b32", np.uint32), ("i8", np.int8), ("u16", np.uint16),
                                    ("i16", np.int16), ("u8", np.uint8)])
def test_buffer_load_lds(op, dt):
    """Lane l's value lands at M0[15:0] + offset + 4 l, extended to a dword; lanes past
    NUM_RECORDS write 0."""
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, 512, dtype=np.int64).astype(np.uint8)
    size = np.dtype(dt).itemsize
    body = f"""
    s_mov_b32 m0, 0x10040
    v_mul_u32_u24 v13, {size}, v0
    buffer_load_lds_{op} v13, s[4:7], 0 offen offset:8
    s_waitcnt vmcnt(0)
    v_add_nc_u32 v14, 0x48, v10
    ds_load_b32 v2, v14
    """
    n = 20 * size + 8
    got, _, _ = run(body, raw, word3(F32_FLOAT), num_records=n, lds_bytes=1024)
    vals = raw[8:8 + LANES * size].view(dt).astype(np.int64).astype(u32)
    want = np.where(np.arange(LANES) < 20, vals, 0)
    np.testing.assert_array_equal(got[:, 0], want)


def test_buffer_load_lds_format_x():
    b = (np.arange(256) % 251).astype(np.uint8)
    body = """
    s_mov_b32 m0, 0
    buffer_load_lds_format_x v0, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    ds_load_b32 v2, v10
    """
    got, _, _ = run(body, b, word3(F8_UNORM), lds_bytes=256)
    np.testing.assert_array_equal(got[:, 0], bits((b[:LANES] / 255).astype(f32)))


def test_buffer_load_lds_in_a_wave64():
    """Lane numbers run to 63: the odd row's lanes land at 4 * (32 + l)."""
    code = assemble("""
    v_lshlrev_b32 v10, 2, v0
    s_mov_b32 m0, 0
    buffer_load_lds_b32 v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    v_sub_nc_u32 v11, 252, v10
    ds_load_b32 v2, v11
    s_waitcnt lgkmcnt(0)
    global_store_b32 v10, v2, s[0:1]
    s_endpgm
    """)   # no lane masks in it: the wave32 encoding is the wave64 one
    dev = RawDevice()
    data = np.arange(64, dtype=u32) * 3 + 1
    vin, vout = dev.upload(data), dev.upload(np.zeros(64, u32))
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32,
            vin & 0xFFFFFFFF, vin >> 32, 256, word3(F32_FLOAT)]
    dev.launch_raw(code, user, (1,), (64,), lds_bytes=256, wave64=True)
    np.testing.assert_array_equal(dev.download(vout, 64, u32), data[::-1])


# -- acceptance -----------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("llvm-mc-16") is None, reason="llvm-mc-16 (Debian llvm-16)")
def test_every_memory_opcode_of_llvms_gfx1100_tables_is_accepted():
    """FLAT, SCRATCH, GLOBAL, MUBUF, MTBUF and DS at 100%, the GDS-only DS opcodes included
    (their semantics for a KFD compute queue is a named fault: test_rdna3_gds); the ALU rows are
    asserted in test_rdna3_valu_misc. The whole figure outside MIMG: all 1386 opcodes llvm-mc-16
    decodes for gfx1100."""
    refused: dict[str, str] = {}
    for enc in opcode_coverage.MEMORY:
        if enc == "MIMG":
            continue
        row = opcode_coverage.measure(enc)
        assert not row.undecodable, (enc, row.undecodable)
        refused.update(row.refused)
    assert not refused, refused
    total = sum(len(TABLES[e]) for e in opcode_coverage.ROWS if "+" not in e and e != "MIMG")
    assert total == 1386
