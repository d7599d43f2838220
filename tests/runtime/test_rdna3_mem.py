"""Memory instructions on the RDNA3 interpreter: short gfx1100 programs assembled with llvm-mc-16.

Buffer (MUBUF) accesses through V# descriptors with each OOB_SELECT range check, per-dword checks
of multi-dword accesses, soffset outside the check, idxen/offen forms and atomics; the d16 and
d16_hi loads and stores of every address space; ds_swizzle_b32's modes; DS mskor/wrap/append;
FLAT on the LDS aperture; scratch. Expected values follow the RDNA3 ISA reference (sections 9-11)
and are computed with numpy from the inputs.
"""
from __future__ import annotations

import numpy as np
import pytest

from runtime.drivers.mock.rdna3 import KernelFault
from runtime.drivers.mock.rdna3.ops_ds import swizzle_lanes
from runtime.drivers.mock.rdna3.ops_mem import PRIVATE_APERTURE, SHARED_APERTURE

from .test_rdna3_isa import assemble, pytestmark  # noqa: F401  (llvm-mc-16 needed)
from .rdna3_device import RawDevice

u32 = np.uint32
LANES = 32
# s[0:1] = output, s[2:3] = input; V# in s[4:7]; lane byte offset (lane * 4) in v10.
HEAD = """
v_lshlrev_b32 v10, 2, v0
"""
TAIL = """
global_store_b32 v10, v2, s[0:1]
s_endpgm
"""


def vsharp(base: int, num_records: int, *, stride: int = 0, oob: int = 3) -> list[int]:
    """A gfx11 buffer descriptor: base, STRIDE [61:48], NUM_RECORDS, OOB_SELECT [125:124]
    (and the 32-bit float format Triton sets, which a raw access ignores)."""
    return [base & 0xFFFFFFFF, (base >> 32) | stride << 16, num_records,
            0x01027000 | oob << 28]


def run(body: str, data: np.ndarray, *, desc: dict | None = None, sgprs: tuple[int, ...] = (),
        lds_bytes: int = 0, vgprs: int = 32, out_words: int = LANES,
        scratch_per_lane_B: int = 0) -> tuple[np.ndarray, RawDevice, int]:
    """Runs HEAD + body + TAIL for one wave; returns (output words, device, input VA)."""
    dev = RawDevice()
    vin = dev.upload(data.view(u32))
    vout = dev.upload(np.full(out_words, 0xDEADBEEF, u32))
    d = vsharp(vin, **(desc or {"num_records": data.nbytes}))
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32, *d, *sgprs]
    dev.launch_raw(assemble(HEAD + body + TAIL), user, (1,), (LANES,), lds_bytes=lds_bytes,
                   vgprs=vgprs, scratch_per_lane_B=scratch_per_lane_B)
    return dev.download(vout, out_words, u32), dev, vin


@pytest.fixture
def data() -> np.ndarray:
    return (np.arange(64, dtype=u32) * 0x01010101 + 0x10203040).astype(u32)


# -- MUBUF ----------------------------------------------------------------------------------------
def test_buffer_raw_out_of_range_loads_return_zero(data):
    n = 20 * 4   # NUM_RECORDS in bytes: lanes 0..19 in range
    got, _, _ = run("buffer_load_b32 v2, v10, s[4:7], 0 offen", data,
                    desc={"num_records": n})
    want = np.where(np.arange(LANES) * 4 + 4 <= n, data[:LANES], 0)
    np.testing.assert_array_equal(got, want)


def test_buffer_masked_offset_like_triton(data):
    """Triton masks a lane by giving it offset 0x80000000, far past NUM_RECORDS."""
    body = """
    v_cmp_gt_u32 vcc_lo, 7, v0
    v_cndmask_b32 v1, 0x80000000, v10, vcc_lo
    buffer_load_b32 v2, v1, s[4:7], 0 offen offset:8
    """
    got, _, _ = run(body, data, desc={"num_records": 0x7FFFFFFE})
    want = np.where(np.arange(LANES) < 7, data[2:LANES + 2], 0)
    np.testing.assert_array_equal(got, want)


def test_buffer_multi_dword_loads_check_each_dword(data):
    # b64 at lane * 4: dword 0 in range while lane * 4 + 4 <= n, dword 1 while lane * 4 + 8 <= n
    n = 10 * 4 + 4
    body = """
    buffer_load_b64 v[4:5], v10, s[4:7], 0 offen
    v_xor_b32 v2, v4, v5
    """
    got, _, _ = run(body, data, desc={"num_records": n})
    lane = np.arange(LANES)
    d0 = np.where(lane * 4 + 4 <= n, data[lane], 0)
    d1 = np.where(lane * 4 + 8 <= n, data[lane + 1], 0)
    np.testing.assert_array_equal(got, d0 ^ d1)


def test_buffer_soffset_moves_the_address_not_the_range(data):
    # soffset (s8 = 16 B) is added to the address but not to the range check (ISA 9.1.8).
    n = 12 * 4
    got, _, _ = run("buffer_load_b32 v2, v10, s[4:7], s8 offen", data,
                    desc={"num_records": n}, sgprs=(16,))
    lane = np.arange(LANES)
    np.testing.assert_array_equal(got, np.where(lane * 4 + 4 <= n, data[lane + 4], 0))


def test_buffer_stores_out_of_range_are_dropped(data):
    n = 9 * 4
    body = """
    v_add_nc_u32 v3, 1000, v0
    buffer_store_b32 v3, v10, s[4:7], 0 offen
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    s_waitcnt vmcnt(0)
    """
    got, _, _ = run(body, data, desc={"num_records": n})
    lane = np.arange(LANES)
    np.testing.assert_array_equal(got, np.where(lane * 4 + 4 <= n, 1000 + lane, data[lane]))


@pytest.mark.parametrize("oob", [0, 1, 2])
def test_buffer_structured_index_and_offset(data, oob):
    """idxen + offen: v[6] is the index, v[7] the offset; stride 8 B. OOB_SELECT 1 checks the
    index against NUM_RECORDS (in records), 0 also the offset against the stride, 2 nothing."""
    body = """
    v_lshrrev_b32 v6, 1, v0
    v_and_b32 v7, 1, v0
    v_lshlrev_b32 v7, 3, v7
    buffer_load_b32 v2, v[6:7], s[4:7], 0 idxen offen
    """
    records = 10
    got, _, _ = run(body, data, desc={"num_records": records, "stride": 8, "oob": oob})
    lane = np.arange(LANES)
    idx, off = lane >> 1, (lane & 1) * 8
    val = data[(idx * 8 + off) // 4]
    ok = {0: (idx < records) & (off + 4 <= 8), 1: idx < records, 2: np.ones(LANES, bool)}[oob]
    np.testing.assert_array_equal(got, np.where(ok, val, 0))


def test_buffer_atomic_add_returns_old_and_skips_out_of_range(data):
    n = 6 * 4
    body = """
    v_mov_b32 v2, 5
    v_and_b32 v1, 7, v0
    v_lshlrev_b32 v1, 2, v1
    buffer_atomic_add_u32 v2, v1, s[4:7], 0 offen glc
    s_waitcnt vmcnt(0)
    """
    got, dev, vin = run(body, data, desc={"num_records": n})
    lane = np.arange(LANES)
    slot = lane & 7
    inr = slot * 4 + 4 <= n
    # Lanes on one address apply in lane order: lane k sees the value plus 5 per earlier lane.
    rank = lane >> 3
    np.testing.assert_array_equal(got, np.where(inr, data[slot] + 5 * rank, 0).astype(u32))
    mem = dev.download(vin, 8, u32)
    np.testing.assert_array_equal(mem, np.where(np.arange(8) * 4 + 4 <= n,
                                                data[:8] + 20, data[:8]).astype(u32))


def test_atomic_csub_clamps_at_zero_in_lane_order():
    """buffer/global_atomic_csub_u32 (ISA 16.16): old < data gives 0, else old - data; the
    pre-op value returns. Lanes 0-3 share a dword holding 10 and subtract 4 each in lane
    order: 10 -> 6 -> 2 -> 0 -> 0."""
    data = np.array([10, 3, 1000, 7] + [0] * 60, u32)
    body = """
    v_mov_b32 v1, 0
    v_mov_b32 v2, 4
    v_cmp_gt_u32 vcc_lo, 4, v0
    s_and_saveexec_b32 s10, vcc_lo
    buffer_atomic_csub_u32 v2, v1, s[4:7], 0 offen glc
    s_mov_b32 exec_lo, s10
    v_mov_b32 v3, 5
    v_mov_b32 v4, 4
    v_cmp_eq_u32 vcc_lo, 4, v0
    s_and_saveexec_b32 s10, vcc_lo
    global_atomic_csub_u32 v3, v4, v3, s[2:3] glc
    s_mov_b32 exec_lo, s10
    v_cmp_eq_u32 vcc_lo, 4, v0
    v_cndmask_b32 v2, v2, v3, vcc_lo
    s_waitcnt vmcnt(0)
    """
    got, dev, vin = run(body, data, desc={"num_records": data.nbytes})
    np.testing.assert_array_equal(got[:5], [10, 6, 2, 0, 3])
    np.testing.assert_array_equal(dev.download(vin, 4, u32), [0, 0, 1000, 7])


def test_buffer_d16_loads_fill_one_half(data):
    body = """
    v_mov_b32 v2, 0x12345678
    v_mov_b32 v3, 0x9abcdef0
    buffer_load_d16_b16 v2, v10, s[4:7], 0 offen
    buffer_load_d16_hi_i8 v3, v10, s[4:7], 0 offen offset:1
    s_waitcnt vmcnt(0)
    v_xor_b32 v2, v2, v3
    """
    got, _, _ = run(body, data)
    b = data.view(np.uint8)
    lane = np.arange(LANES)
    lo = 0x12340000 | data[lane] & 0xFFFF
    hi = (np.int8(0) + b[lane * 4 + 1].view(np.int8)).astype(np.int64) & 0xFFFF
    np.testing.assert_array_equal(got, (lo ^ (hi << 16 | 0xDEF0)).astype(u32))


def test_buffer_swizzled_descriptor_is_refused(data):
    dev = RawDevice()
    vin = dev.upload(data)
    d = vsharp(vin, 256)
    d[1] |= 1 << 30   # SWIZZLE_ENABLE
    code = assemble(HEAD + "buffer_load_b32 v2, v10, s[4:7], 0 offen\n" + TAIL)
    with pytest.raises(KernelFault, match="SWIZZLE_ENABLE"):
        dev.launch_raw(code, [0, 0, 0, 0, *d], (1,), (LANES,))


def test_buffer_tfe_is_refused_by_name(data):
    with pytest.raises(KernelFault, match="TFE"):
        run("buffer_load_format_x v[2:3], v10, s[4:7], 0 offen tfe", data)


# -- d16 forms of global, scratch and DS ----------------------------------------------------------
def test_global_d16_forms(data):
    body = """
    v_mov_b32 v2, 0xaaaa5555
    global_load_d16_hi_b16 v2, v10, s[2:3] offset:2
    v_mov_b32 v3, 0x11112222
    global_load_d16_u8 v3, v10, s[2:3] offset:3
    s_waitcnt vmcnt(0)
    v_add_nc_u32 v2, v2, v3
    """
    got, _, _ = run(body, data)
    lane = np.arange(LANES)
    a = (data[lane] >> 16) << 16 | 0x5555
    b = 0x11110000 | (data[lane] >> 24)
    np.testing.assert_array_equal(got, (a.astype(np.uint64) + b).astype(u32))


def test_global_store_d16_hi(data):
    body = """
    v_mov_b32 v3, 0xbeef0000
    v_add_nc_u32 v3, v3, v0
    global_store_d16_hi_b16 v10, v3, s[2:3]
    global_store_d16_hi_b8 v10, v3, s[2:3] offset:3
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v10, s[2:3]
    s_waitcnt vmcnt(0)
    """
    got, _, _ = run(body, data)
    lane = np.arange(LANES)
    want = (data[lane] & 0x00FF0000) | 0xBEEF | (0xEF << 24)
    np.testing.assert_array_equal(got, want.astype(u32))


def test_ds_d16_loads_and_stores():
    body = """
    v_mov_b32 v3, 0x8180fffe
    v_add_nc_u32 v3, v3, v0
    ds_store_b32 v10, v3
    ds_store_b16_d16_hi v10, v3 offset:128
    s_waitcnt lgkmcnt(0)
    v_mov_b32 v2, 0x77778888
    ds_load_i8_d16_hi v2, v10 offset:3
    v_mov_b32 v4, 0x44443333
    ds_load_u16_d16 v4, v10 offset:128
    s_waitcnt lgkmcnt(0)
    v_xor_b32 v2, v2, v4
    """
    got, _, _ = run(body, np.zeros(4, u32), lds_bytes=512)
    v3 = (0x8180FFFE + np.arange(LANES)).astype(np.int64)
    top = ((v3 >> 24) & 0xFF).astype(np.uint8).view(np.int8).astype(np.int64) & 0xFFFF
    a = top << 16 | 0x8888
    b = 0x44440000 | (v3 >> 16) & 0xFFFF
    np.testing.assert_array_equal(got, (a ^ b).astype(u32))


# -- DS lane moves and atomics ---------------------------------------------------------------------
@pytest.mark.parametrize("offset", [0x801B, 0x80E4, 0x041F, 0x001F | 1 << 10 | 16 << 5, 0x0010,
                                    0x7C00 | 0x3])
def test_ds_swizzle_modes(offset):
    """Quad-permute (bit 15) and bit-mask modes; a source lane that is inactive reads 0."""
    body = f"""
    v_add_nc_u32 v3, 100, v0
    v_cmp_ne_u32 vcc_lo, 5, v0
    s_and_saveexec_b32 s10, vcc_lo
    ds_swizzle_b32 v2, v3 offset:{offset:#x}
    s_waitcnt lgkmcnt(0)
    s_mov_b32 exec_lo, s10
    """
    got, _, _ = run(body, np.zeros(4, u32))
    src = swizzle_lanes(offset)
    lane = np.arange(LANES)
    want = np.where(src == 5, 0, 100 + src)
    # lane 5 was off: its v2 keeps the 0 VGPRs start with
    want[5] = 0
    np.testing.assert_array_equal(got, want.astype(u32))


def test_swizzle_patterns_match_the_isa_examples():
    lane = np.arange(32)
    np.testing.assert_array_equal(swizzle_lanes(0x8000 | 0b00011011), lane ^ 3)  # quad reverse
    np.testing.assert_array_equal(swizzle_lanes(0x041F), lane ^ 1)             # swap pairs
    np.testing.assert_array_equal(swizzle_lanes(0x0000), np.zeros(32, int))    # broadcast 0
    assert swizzle_lanes(0xE000) is None                                       # FFT: not gfx11


def test_ds_mskor_wrap_and_append():
    body = """
    v_mov_b32 v3, 0xf0f0f0f0
    v_mov_b32 v1, 0
    ds_store_b32 v1, v3
    v_mov_b32 v4, 5
    ds_store_b32 v1, v4 offset:4
    s_waitcnt lgkmcnt(0)
    v_mov_b32 v5, 0xff
    v_lshlrev_b32 v6, 8, v0
    v_cmp_eq_u32 vcc_lo, 0, v0
    s_and_saveexec_b32 s10, vcc_lo
    ds_mskor_b32 v1, v5, v6
    v_mov_b32 v7, 7
    v_mov_b32 v8, 3
    ds_wrap_rtn_b32 v9, v1, v7, v8 offset:4
    s_mov_b32 exec_lo, s10
    s_mov_b32 m0, 8
    ds_append v11
    s_waitcnt lgkmcnt(0)
    ds_load_b32 v2, v1
    ds_load_b32 v12, v1 offset:4
    ds_load_b32 v13, v1 offset:8
    s_waitcnt lgkmcnt(0)
    v_add_nc_u32 v2, v2, v12
    v_lshl_add_u32 v2, v13, 16, v2
    v_add_nc_u32 v2, v2, v11
    """
    got, _, _ = run(body, np.zeros(4, u32), lds_bytes=64)
    mskor = (0xF0F0F0F0 & ~0xFF) | 0   # lane 0: v6 = 0
    wrap = 5 + 3                      # 5 < 7: add data1
    append = 32                       # every lane of the wave counted
    want = (mskor + wrap + (append << 16)) & 0xFFFFFFFF
    np.testing.assert_array_equal(got, np.full(LANES, want, u32))


def test_ds_condxchg32_rtn_b64():
    """ISA 16.15: dwords at (ADDR + offset) & 0xfff8 and + 4 return their old values and take
    the matching half of DATA (bit 31 cleared) where that half's bit 31 is set."""
    body = """
    v_lshlrev_b32 v1, 3, v0
    v_add_nc_u32 v3, 0x100, v0
    v_add_nc_u32 v4, 0x200, v0
    ds_store_2addr_b32 v1, v3, v4 offset1:1
    v_and_b32 v6, 1, v0
    v_lshlrev_b32 v6, 31, v6
    v_or_b32 v6, 0x55, v6
    v_and_b32 v8, 4, v0
    v_lshl_or_b32 v6, v8, 28, v6
    v_and_b32 v7, 2, v0
    v_lshlrev_b32 v7, 30, v7
    v_or_b32 v7, 0x66, v7
    s_waitcnt lgkmcnt(0)
    v_add_nc_u32 v5, 3, v1
    ds_condxchg32_rtn_b64 v[8:9], v5, v[6:7] offset:2
    s_waitcnt lgkmcnt(0)
    ds_load_2addr_b32 v[12:13], v1 offset1:1
    s_waitcnt lgkmcnt(0)
    v_lshl_or_b32 v2, v8, 24, v9
    v_lshl_or_b32 v12, v12, 12, v13
    v_xor_b32 v2, v2, v12
    """
    got, _, _ = run(body, np.zeros(4, u32), lds_bytes=512)
    lane = np.arange(LANES, dtype=np.int64)
    old0, old1 = 0x100 + lane, 0x200 + lane
    # bit 31 of the low half set on odd lanes; bit 30 (lanes 4-7, 12-15, ...) is data only
    new0 = np.where(lane & 1, 0x55 | (lane & 4) << 28, old0)
    new1 = np.where(lane & 2, 0x66, old1)
    want = ((old0 << 24 | old1) ^ (new0 << 12 | new1)) & 0xFFFFFFFF
    np.testing.assert_array_equal(got, want.astype(u32))


def test_ds_bvh_stack_rtn_pushes_valid_nodes_and_pops_when_the_last_is_invalid():
    """Stack address: base dword in bits [31:18], index in the low bits; 8 entries (OFFSET1
    [5:4] = 0), entry k at base + 128 k. Lane 0 pushes A, B, C and returns D; lane 1 then
    has D invalid (0xffffffff) and pops C; lane 2 has last node = B, so pushing stops at B
    and the pop returns what was pushed before (A)."""
    body = """
    s_mov_b32 s10, 0
    v_mov_b32 v20, 0xa
    v_mov_b32 v21, 0xb
    v_mov_b32 v22, 0xc
    v_mov_b32 v23, 0xd
    v_mov_b32 v24, -1
    v_lshlrev_b32 v25, 18, v0
    v_cmp_eq_u32 vcc_lo, 0, v0
    s_and_saveexec_b32 s11, vcc_lo
    ds_bvh_stack_rtn_b32 v2, v25, v24, v[20:23]
    s_mov_b32 exec_lo, s11
    v_mov_b32 v23, -1
    v_cmp_eq_u32 vcc_lo, 1, v0
    s_and_saveexec_b32 s11, vcc_lo
    ds_bvh_stack_rtn_b32 v2, v25, v24, v[20:23]
    s_mov_b32 exec_lo, s11
    v_cmp_eq_u32 vcc_lo, 2, v0
    s_and_saveexec_b32 s11, vcc_lo
    ds_bvh_stack_rtn_b32 v3, v25, v24, v[20:23]
    v_mov_b32 v26, v21
    ds_bvh_stack_rtn_b32 v2, v25, v26, v[20:23]
    s_mov_b32 exec_lo, s11
    s_waitcnt lgkmcnt(0)
    v_and_b32 v4, 0x3ffff, v25
    v_lshl_or_b32 v2, v4, 24, v2
    ds_load_b32 v5, v10
    ds_load_b32 v6, v10 offset:128
    ds_load_b32 v7, v10 offset:256
    s_waitcnt lgkmcnt(0)
    global_store_b96 v12, v[5:7], s[0:1] offset:128
    """
    body = "v_mul_u32_u24 v12, 12, v0\n" + body
    got, _, _ = run(body, np.zeros(4, u32), lds_bytes=4096, out_words=LANES * 4)
    slots = got[LANES:LANES + 9].reshape(3, 3)
    # each lane's entries at base + 128 k (bases 0, 4, 8: interleaved); popped slots invalid
    np.testing.assert_array_equal(slots, [[0xA, 0xB, 0xC], [0xA, 0xB, 0xFFFFFFFF],
                                          [0xA, 0xB, 0xFFFFFFFF]])
    got = got[:LANES]
    # lane 0: 3 pushes, returns D, index 3; lane 1: 3 pushes then pop C, index 2;
    # lane 2: first as lane 1 (index 2, C popped); then last = B: pushes A (index 3), stops at
    # B, D invalid: pops A, index 2.
    assert got[0] == (3 << 24 | 0xD) and got[1] == (2 << 24 | 0xC)
    assert got[2] == (2 << 24 | 0xA)


# -- FLAT on the LDS aperture ------------------------------------------------------------------
def test_flat_load_store_through_the_shared_aperture():
    body = f"""
    v_mov_b32 v5, {SHARED_APERTURE >> 32:#x}
    v_mov_b32 v4, v10
    v_add_nc_u32 v3, 7, v0
    flat_store_b32 v[4:5], v3
    s_waitcnt vmcnt(0) lgkmcnt(0)
    ds_load_b32 v2, v10
    s_waitcnt lgkmcnt(0)
    """
    got, _, _ = run(body, np.zeros(4, u32), lds_bytes=128)
    np.testing.assert_array_equal(got, (7 + np.arange(LANES)).astype(u32))


# -- scratch --------------------------------------------------------------------------------------
def test_scratch_without_private_memory_is_a_named_fault():
    with pytest.raises(KernelFault, match="no private segment memory"):
        run("scratch_store_b32 off, v0, off offset:16", np.zeros(4, u32))


def test_scratch_stores_loads_and_flat_on_the_private_aperture():
    """scratch_store through a VGPR offset, read back through FLAT on the private aperture
    (the same private byte offset), and a d16_hi scratch load."""
    body = f"""
    v_add_nc_u32 v3, 0x500, v0
    v_mov_b32 v1, 64
    scratch_store_b32 v1, v3, off offset:16
    s_waitcnt_vscnt null, 0
    v_mov_b32 v5, {PRIVATE_APERTURE >> 32:#x}
    v_mov_b32 v4, 80
    flat_load_b32 v2, v[4:5]
    v_mov_b32 v6, 0x1234
    scratch_load_d16_hi_b16 v6, off, off offset:80
    s_waitcnt vmcnt(0) lgkmcnt(0)
    v_add_nc_u32 v2, v2, v6
    """
    got, _, _ = run(body, np.zeros(4, u32), scratch_per_lane_B=128)
    lane = np.arange(LANES)
    want = (0x500 + lane) + (((0x500 + lane) & 0xFFFF) << 16 | 0x1234)
    np.testing.assert_array_equal(got, want.astype(u32))


def test_scratch_beyond_the_slot_is_a_page_fault():
    with pytest.raises(KernelFault, match="beyond the"):
        run("scratch_store_b32 off, v0, off offset:1024", np.zeros(4, u32),
            scratch_per_lane_B=64)


def test_buffer_idxen_only_and_store_d16_hi(data):
    """idxen without offen: the VGPR is the index (stride 8); a d16_hi store writes the high
    half of the data VGPR as 16 bits."""
    body = """
    v_lshlrev_b32 v3, 16, v0
    v_or_b32 v3, 0xffff, v3
    buffer_store_d16_hi_b16 v3, v0, s[4:7], 0 idxen offset:2
    s_waitcnt_vscnt null, 0
    buffer_load_b32 v2, v0, s[4:7], 0 idxen
    s_waitcnt vmcnt(0)
    """
    got, _, _ = run(body, data, desc={"num_records": 16, "stride": 8, "oob": 1})
    lane = np.arange(LANES)
    want = np.where(lane < 16, (data[2 * lane] & 0xFFFF) | (lane << 16), 0)
    np.testing.assert_array_equal(got, want.astype(u32))


# -- wave64 ----------------------------------------------------------------------------------------
def _assemble64(text: str) -> bytes:
    import re
    import subprocess
    res = subprocess.run(["llvm-mc-16", "-arch=amdgcn", "-mcpu=gfx1100",
                          "-mattr=+wavefrontsize64", "--show-encoding"], input=text,
                         capture_output=True, text=True)
    assert res.returncode == 0 and "error" not in res.stderr, res.stderr
    out = bytearray()
    for m in re.finditer(r"encoding: \[([^\]]*)\]", res.stdout):
        out += bytes(int(b, 16) for b in m.group(1).split(","))
    return bytes(out)


def test_wave64_ballot_and_exec_halves():
    """A compare into an SGPR pair is a 64-lane ballot (lanes 0-31 in the low SGPR); EXEC with
    only its high half set is not zero for s_cbranch_execz."""
    code = _assemble64("""
    v_lshlrev_b32 v10, 2, v0
    v_cmp_gt_u32_e64 s[10:11], 40, v0
    s_bcnt1_i32_b64 s12, s[10:11]
    v_mov_b32 v2, s12
    v_add_nc_u32 v2, s11, v2
    v_cmpx_lt_u32_e32 47, v0
    s_cbranch_execz 2
    v_add_nc_u32 v2, 0x3e8, v2
    s_mov_b64 exec, -1
    global_store_b32 v10, v2, s[0:1]
    s_endpgm
    """)
    dev = RawDevice()
    vout = dev.upload(np.zeros(64, u32))
    st = dev.launch_raw(code, [vout & 0xFFFFFFFF, vout >> 32], (2,), (64,), wave64=True)
    lane = np.arange(64)
    want = 40 + 0xFF + np.where(lane > 47, 1000, 0)
    np.testing.assert_array_equal(dev.download(vout, 64, u32), want.astype(u32))
    assert st.waves == 2


def test_wave64_readlane_writelane_readfirstlane_mbcnt():
    """Lane numbers run to 63: readlane 40 reads the odd row's lane 8, writelane 50 writes it;
    readfirstlane with only lanes 33+ active reads lane 33; mbcnt_lo/hi count a ballot's bits
    below each of the 64 lanes."""
    code = _assemble64("""
    v_lshlrev_b32 v10, 2, v0
    v_mul_u32_u24 v3, 3, v0
    v_readlane_b32 s12, v3, 40
    v_writelane_b32 v3, 7, 50
    v_cmpx_lt_u32_e32 32, v0
    v_readfirstlane_b32 s13, v3
    s_mov_b64 exec, -1
    v_cmp_gt_u32_e64 s[14:15], 36, v0
    v_mbcnt_lo_u32_b32 v4, s14, 0
    v_mbcnt_hi_u32_b32 v4, s15, v4
    v_add_nc_u32 v2, s12, v3
    v_add_nc_u32 v2, s13, v2
    v_lshl_add_u32 v2, v4, 16, v2
    global_store_b32 v10, v2, s[0:1]
    s_endpgm
    """)
    dev = RawDevice()
    vout = dev.upload(np.zeros(64, u32))
    dev.launch_raw(code, [vout & 0xFFFFFFFF, vout >> 32], (1,), (64,), wave64=True)
    lane = np.arange(64)
    v3 = np.where(lane == 50, 7, 3 * lane)
    below = np.minimum(lane, 36)   # ballot of lanes 0-35: bits below each lane
    want = 3 * 40 + v3 + 3 * 33 + (below << 16)
    np.testing.assert_array_equal(dev.download(vout, 64, u32), want.astype(u32))


def test_wave64_cross_half_instructions_are_refused_by_name():
    code = _assemble64("v_movrels_b32 v1, v2\ns_endpgm\n")
    with pytest.raises(KernelFault, match="wave64 kernel"):
        RawDevice().launch_raw(code, [], (1,), (64,), wave64=True)


def test_wave64_permute_and_bpermute_cross_the_halves():
    """ds_permute_b32 sends each active lane's value to lane 63 - lane (lanes 40-47 inactive:
    lanes 16-23 receive nothing, 0, and lanes 40-47 write nothing); ds_bpermute_b32 then reads
    lane (lane + 17) & 63 of that with every lane active."""
    code = _assemble64("""
    v_lshlrev_b32 v10, 2, v0
    v_sub_nc_u32 v2, 63, v0
    v_lshlrev_b32 v2, 2, v2
    v_add_nc_u32 v3, 100, v0
    v_add_nc_u32 v4, 17, v0
    v_lshlrev_b32 v4, 2, v4
    s_mov_b32 s4, exec_lo
    s_mov_b32 s5, exec_hi
    s_mov_b32 exec_hi, 0xffff00ff
    ds_permute_b32 v5, v2, v3
    s_mov_b32 exec_lo, s4
    s_mov_b32 exec_hi, s5
    s_waitcnt lgkmcnt(0)
    ds_bpermute_b32 v6, v4, v5
    s_waitcnt lgkmcnt(0)
    v_lshlrev_b32 v6, 16, v6
    v_or_b32 v6, v6, v5
    global_store_b32 v10, v6, s[0:1]
    s_endpgm
    """)
    dev = RawDevice()
    vout = dev.upload(np.zeros(64, u32))
    dev.launch_raw(code, [vout & 0xFFFFFFFF, vout >> 32], (1,), (64,), wave64=True)
    lane = np.arange(64)
    src = 63 - lane
    off = (lane >= 40) & (lane < 48)
    # nothing from inactive senders; inactive receivers keep v5's old value (0)
    sent = np.where(off[src] | off, 0, 100 + src)
    read = sent[(lane + 17) & 63]
    np.testing.assert_array_equal(dev.download(vout, 64, u32), (read << 16 | sent).astype(u32))


def test_wave64_permlane64_and_swizzle_with_inactive_lanes():
    """v_permlane64_b32 with lanes 40-47 inactive: active lanes read lane ^ 32 whether that lane
    is active or not, inactive ones keep their value; ds_swizzle_b32 (xor 1 in the bit-mask
    mode, within each 32-lane half) gives 0 from an inactive source lane."""
    code = _assemble64("""
    v_lshlrev_b32 v10, 2, v0
    v_add_nc_u32 v3, 100, v0
    v_mov_b32 v4, 7
    v_mov_b32 v5, 9
    s_mov_b32 s5, exec_hi
    s_mov_b32 exec_hi, 0xffff00ff
    v_permlane64_b32 v4, v3
    ds_swizzle_b32 v5, v3 offset:swizzle(BITMASK_PERM, "ppppi")
    s_mov_b32 exec_hi, s5
    s_waitcnt lgkmcnt(0)
    v_lshl_or_b32 v4, v5, 16, v4
    global_store_b32 v10, v4, s[0:1]
    s_endpgm
    """)
    dev = RawDevice()
    vout = dev.upload(np.zeros(64, u32))
    dev.launch_raw(code, [vout & 0xFFFFFFFF, vout >> 32], (1,), (64,), wave64=True)
    lane = np.arange(64)
    off = (lane >= 40) & (lane < 48)
    perm = np.where(off, 7, 100 + (lane ^ 32))
    swz = np.where(off, 9, np.where(off[lane ^ 1], 0, 100 + (lane ^ 1)))
    np.testing.assert_array_equal(dev.download(vout, 64, u32), (swz << 16 | perm).astype(u32))


def test_wave64_dpp_rows_and_permlanex16():
    """DPP rows are 16 lanes in both halves of a wave64 (row_shr:1 with bound_ctrl gives each
    row's first lane 0), and v_permlanex16 swaps within each 32-lane half."""
    code = _assemble64("""
    v_lshlrev_b32 v10, 2, v0
    v_add_nc_u32 v3, 1, v0
    v_mov_b32_dpp v2, v3 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
    s_mov_b32 s20, 0x76543210
    s_mov_b32 s21, 0xfedcba98
    v_permlanex16_b32 v4, v3, s20, s21
    v_lshl_add_u32 v2, v4, 8, v2
    global_store_b32 v10, v2, s[0:1]
    s_endpgm
    """)
    dev = RawDevice()
    vout = dev.upload(np.zeros(64, u32))
    dev.launch_raw(code, [vout & 0xFFFFFFFF, vout >> 32], (1,), (64,), wave64=True)
    lane = np.arange(64)
    shr = np.where(lane % 16 == 0, 0, lane)            # (lane - 1) + 1 from the lane before
    other = lane ^ 16                                  # the other row of the 32-lane half
    np.testing.assert_array_equal(dev.download(vout, 64, u32),
                                  (shr + ((other + 1) << 8)).astype(u32))


@pytest.mark.parametrize("seed", range(6))
def test_one_wave_global_gathers_and_scatters(seed):
    """One full wave loading and storing through per-lane offsets (an SGPR base): aligned,
    repeated and (odd seeds) unaligned ones, which the one-wave fast path hands to the general
    one; values and the last-lane-wins order of repeated stores are the same either way."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(u32)
    offs = rng.integers(0, 60, LANES) * 4 + (rng.integers(0, 4, LANES) if seed % 2 else 0)
    offs[5] = offs[9]                                  # two lanes on one address
    words[:LANES] = offs                               # the first words: the offsets
    body = """
    global_load_b32 v3, v10, s[2:3]
    s_waitcnt vmcnt(0)
    global_load_b32 v2, v3, s[2:3]
    s_waitcnt vmcnt(0)
    v_and_b32 v4, -4, v3
    global_store_b32 v4, v0, s[2:3] offset:256
    """
    dev = RawDevice()
    vin = dev.upload(np.concatenate([words, np.zeros(64, u32)]))
    vout = dev.upload(np.zeros(LANES, u32))
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32]
    dev.launch_raw(assemble(HEAD + body + TAIL), user, (1,), (LANES,))
    raw = words.view(np.uint8)
    want = np.array([int.from_bytes(raw[o:o + 4].tobytes(), "little") for o in offs], u32)
    np.testing.assert_array_equal(dev.download(vout, LANES, u32), want)
    scattered = dev.download(vin + 256, 64, u32)
    expect = np.zeros(64, u32)
    for lane, o in enumerate(offs):                    # in lane order: the last lane wins
        expect[o // 4] = lane
    np.testing.assert_array_equal(scattered, expect)


def test_one_wave_global_load_of_unmapped_memory_names_the_instruction():
    from runtime.drivers.mock.rdna3 import PageFaultError
    dev = RawDevice()
    vout = dev.upload(np.zeros(LANES, u32))
    far = vout + (1 << 30)
    with pytest.raises(PageFaultError, match="global_load_b32"):
        dev.launch_raw(assemble(HEAD + "global_load_b32 v2, v10, s[2:3]\n" + TAIL),
                       [vout & 0xFFFFFFFF, vout >> 32, far & 0xFFFFFFFF, far >> 32], (1,),
                       (LANES,))


@pytest.mark.parametrize("seed", range(4))
def test_one_wave_global_atomics_in_lane_order(seed):
    """One wave's returning atomic add and compare-and-swap on per-lane addresses with repeats
    (every lane on one address for seed 0): the values each lane gets back and memory after,
    in lane order."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 50, 64).astype(u32)
    offs = np.zeros(LANES, np.int64) if seed == 0 else rng.integers(0, 8, LANES) * 4
    words[:LANES] = offs + 128                         # the first words: offsets into words 32+
    body = """
    global_load_b32 v3, v10, s[2:3]
    s_waitcnt vmcnt(0)
    v_add_nc_u32 v4, 1, v0
    global_atomic_add_u32 v2, v3, v4, s[2:3] glc
    s_waitcnt vmcnt(0)
    v_mov_b32 v6, v2
    v_add_nc_u32 v5, 1000, v0
    global_atomic_cmpswap_b32 v7, v3, v[5:6], s[2:3] offset:64 glc
    s_waitcnt vmcnt(0)
    v_lshlrev_b32 v7, 16, v7
    v_or_b32 v2, v2, v7
    """
    dev = RawDevice()
    vin = dev.upload(words)
    vout = dev.upload(np.zeros(LANES, u32))
    user = [vout & 0xFFFFFFFF, vout >> 32, vin & 0xFFFFFFFF, vin >> 32]
    dev.launch_raw(assemble(HEAD + body + TAIL), user, (1,), (LANES,))
    mem = words.astype(np.int64).copy()
    got_add = np.zeros(LANES, np.int64)
    for lane in range(LANES):                          # the add, in lane order
        w = (offs[lane] + 128) // 4
        got_add[lane] = mem[w]
        mem[w] += lane + 1
    got_cas = np.zeros(LANES, np.int64)
    for lane in range(LANES):                          # then the compare-and-swap 16 words on
        w = (offs[lane] + 128 + 64) // 4
        got_cas[lane] = mem[w]
        if mem[w] == got_add[lane]:
            mem[w] = 1000 + lane
    want = (got_add & 0xFFFF) | (got_cas & 0xFFFF) << 16
    np.testing.assert_array_equal(dev.download(vout, LANES, u32), want.astype(u32))
    np.testing.assert_array_equal(dev.download(vin, 64, u32), mem.astype(u32))
