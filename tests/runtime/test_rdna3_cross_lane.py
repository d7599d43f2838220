"""Cross-lane VALU: DPP16, DPP8 and v_permlane16/x16, assembled with llvm-mc-16, vs a per-lane
reference written from the RDNA3 ISA's rules (section 7.7):

* a lane whose row (16 lanes) or bank (4 lanes of a row) is masked off writes nothing;
* a source lane that is out of its row, or inactive in EXEC while FI=0, is invalid: with
  BOUND_CTRL=1 the lane reads 0 (and writes), otherwise it writes nothing;
* DPP8 sources are always in range; an inactive one reads 0 unless FI=1.

Each case runs 8 waves whose EXEC masks differ (all on, one lane off, alternating, random), with
v2 preset to y so that lanes which must not write are seen keeping it.

tinygrad's emulator (test/mockgpu/amd/emu.py, read at a9069c1) disagrees on three points these
tests pin to the ISA: a disabled DPP lane there computes with its old destination as src0 and
writes (here it writes nothing: the bank-masked v_add_nc_u32_dpp and v_add_f32_dpp cases), it
ignores EXEC of the source lane (here an inactive source is invalid unless FI: the partial-EXEC
waves), and its permlane16/x16 follow the pseudo-code's copy of every lane, ignoring OP_SEL's
FI/BOUND_CTRL (the permlane cases with partial EXEC).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.test_rdna3_isa import WAVES, run

from .rdna3_device import DriverDevice, RawDevice

u32 = np.uint32
f32 = np.float32
EXECS = [0xFFFFFFFF, 0xFFFFFFFE, 0x55555555, 0x0F0F0F0F, 0xFFFF0000, 0x12345678, 0xFFFFFFFF,
         0x8000FFFF]


def _exec_prologue(asm: str) -> str:
    """v2 = y, EXEC from the per-wave table (selected by the workgroup id s6), then asm, then
    EXEC all on again."""
    lines = ["v_mov_b32 v2, v3", "s_mov_b32 s20, exec_lo"]
    for w, e in enumerate(EXECS):
        lines += [f"s_cmp_eq_u32 s6, {w}", f"s_cselect_b32 s20, {e:#x}, s20"]
    return "\n".join(lines + ["s_mov_b32 exec_lo, s20", asm, "s_mov_b32 exec_lo, -1"])


def _lane_exec() -> np.ndarray:
    return np.array([[(e >> i) & 1 for i in range(32)] for e in EXECS], dtype=bool)


def _ref(x: np.ndarray, y: np.ndarray, src_of, *, row_mask=0xF, bank_mask=0xF, bc=False,
         fi=False, dpp8=False, op=lambda a, b: a) -> np.ndarray:
    """Per-lane reference: src_of(lane) → (source lane, in range)."""
    out = y.copy().reshape(WAVES, 32)
    xs, ys = x.reshape(WAVES, 32), y.reshape(WAVES, 32)
    ex = _lane_exec()
    for w in range(WAVES):
        for lane in range(32):
            if not ex[w, lane]:
                continue
            if not (row_mask >> (lane // 16) & 1 and bank_mask >> (lane % 16 // 4) & 1):
                continue
            s, ok = src_of(lane)
            if ok and not fi and not ex[w, s]:
                ok = False
            if not ok:
                if not (bc or dpp8):
                    continue
                val = 0
            else:
                val = xs[w, s]
            out[w, lane] = op(np.asarray(val, dtype=u32), ys[w, lane])
    return out.reshape(-1)


def _quad(sel):
    return lambda lane: ((lane & ~3) | sel[lane & 3], True)


def _shl(n):
    return lambda lane: (lane + n, lane % 16 + n <= 15)


def _shr(n):
    return lambda lane: (lane - n, lane % 16 >= n)


def _ror(n):
    return lambda lane: ((lane & ~15) | ((lane - n) & 15), True)


def _row(fn):
    return lambda lane: ((lane & ~15) | fn(lane & 15), True)


MOV_CASES = [
    # (asm tail after "v_mov_b32_dpp v2, v1", source rule, options)
    ("quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf", _quad([1, 0, 3, 2]), {}),
    ("quad_perm:[2,3,0,1] row_mask:0xf bank_mask:0xf bound_ctrl:1", _quad([2, 3, 0, 1]),
     {"bc": True}),
    ("quad_perm:[3,3,0,1] row_mask:0xf bank_mask:0xf fi:1", _quad([3, 3, 0, 1]), {"fi": True}),
    ("row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1", _shr(1), {"bc": True}),
    ("row_shr:2 row_mask:0xf bank_mask:0xf bound_ctrl:1", _shr(2), {"bc": True}),
    ("row_shr:4 row_mask:0xf bank_mask:0xf bound_ctrl:1", _shr(4), {"bc": True}),
    ("row_shr:8 row_mask:0xf bank_mask:0xf bound_ctrl:1", _shr(8), {"bc": True}),
    ("row_shr:3 row_mask:0xf bank_mask:0xf", _shr(3), {}),
    ("row_shl:1 row_mask:0xf bank_mask:0x5", _shl(1), {"bank_mask": 0x5}),
    ("row_shl:8 row_mask:0xa bank_mask:0xc", _shl(8), {"row_mask": 0xA, "bank_mask": 0xC}),
    ("row_shr:8 row_mask:0x2 bank_mask:0xf", _shr(8), {"row_mask": 0x2}),
    ("row_shl:15 row_mask:0xf bank_mask:0xf bound_ctrl:1 fi:1", _shl(15), {"bc": True,
                                                                          "fi": True}),
    ("row_ror:5 row_mask:0xf bank_mask:0xf", _ror(5), {}),
    ("row_ror:12 row_mask:0xf bank_mask:0xf bound_ctrl:1", _ror(12), {"bc": True}),
    ("row_mirror row_mask:0xf bank_mask:0xf", _row(lambda i: 15 - i), {}),
    ("row_half_mirror row_mask:0xf bank_mask:0xf bound_ctrl:1",
     _row(lambda i: (i & 8) | (7 - (i & 7))), {"bc": True}),
    ("row_share:3 row_mask:0xf bank_mask:0xf fi:1", _row(lambda i: 3), {"fi": True}),
    ("row_share:14 row_mask:0xf bank_mask:0xf", _row(lambda i: 14), {}),
    ("row_xmask:5 row_mask:0xf bank_mask:0xf", _row(lambda i: i ^ 5), {}),
    ("row_xmask:15 row_mask:0xf bank_mask:0xf bound_ctrl:1", _row(lambda i: i ^ 15),
     {"bc": True}),
]


@pytest.mark.parametrize("tail,src_of,opts", MOV_CASES, ids=[c[0].split()[0] + str(i)
                                                             for i, c in enumerate(MOV_CASES)])
def test_dpp16_mov_patterns_masks_bound_ctrl_and_fetch_inactive(tail, src_of, opts):
    rng = np.random.default_rng(21)
    x = rng.integers(1, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)   # no zeros: 0 = bound
    y = rng.integers(1, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    got = run(_exec_prologue(f"v_mov_b32_dpp v2, v1 {tail}"), x, y)
    np.testing.assert_array_equal(got, _ref(x, y, src_of, **opts))


DPP8_CASES = [
    ("dpp8:[7,6,5,4,3,2,1,0]", [7, 6, 5, 4, 3, 2, 1, 0], False),
    ("dpp8:[1,1,3,3,5,5,7,0] fi:1", [1, 1, 3, 3, 5, 5, 7, 0], True),
    ("dpp8:[0,0,0,0,0,0,0,0]", [0] * 8, False),
]


@pytest.mark.parametrize("tail,sel,fi", DPP8_CASES, ids=[c[0] for c in DPP8_CASES])
def test_dpp8_lane_selects_and_inactive_sources(tail, sel, fi):
    rng = np.random.default_rng(22)
    x = rng.integers(1, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    y = rng.integers(1, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    got = run(_exec_prologue(f"v_mov_b32_dpp v2, v1 {tail}"), x, y)
    want = _ref(x, y, lambda lane: ((lane & ~7) | sel[lane & 7], True), fi=fi, dpp8=True)
    np.testing.assert_array_equal(got, want)


def test_dpp_reduction_steps_as_triton_emits_them():
    """The wave32 sum of Triton's reductions: quad_perm / row_shr:1,2,4,8 with bound_ctrl, a
    bank-masked row_shr, then v_permlanex16 to combine the two rows (all lanes active)."""
    rng = np.random.default_rng(23)
    x = rng.integers(0, 1000, 32 * WAVES).astype(u32)
    y = np.zeros_like(x)
    asm = """
    v_mov_b32 v2, v1
    v_add_nc_u32_dpp v2, v2, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_add_nc_u32_dpp v2, v2, v2 quad_perm:[2,3,0,1] row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_add_nc_u32_dpp v2, v2, v2 row_half_mirror row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_add_nc_u32_dpp v2, v2, v2 row_mirror row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_permlanex16_b32 v4, v2, 0, 0
    v_add_nc_u32 v2, v2, v4
    """
    got = run(asm, x, y).reshape(WAVES, 32)
    np.testing.assert_array_equal(got, np.repeat(x.reshape(WAVES, 32).sum(1, keepdims=True),
                                                 32, axis=1))
    # Inclusive prefix sum within each row: row_shr:1/2/4/8 with bound_ctrl (zeros shift in).
    scan = """
    v_mov_b32 v2, v1
    v_add_nc_u32_dpp v2, v2, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_add_nc_u32_dpp v2, v2, v2 row_shr:2 row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_add_nc_u32_dpp v2, v2, v2 row_shr:4 row_mask:0xf bank_mask:0xf bound_ctrl:1
    v_add_nc_u32_dpp v2, v2, v2 row_shr:8 row_mask:0xf bank_mask:0xf bound_ctrl:1
    """
    got = run(scan, x, y).reshape(WAVES, 2, 16)
    np.testing.assert_array_equal(got, np.cumsum(x.reshape(WAVES, 2, 16), axis=2))
    # Without bound_ctrl a bank-masked shift leaves the other lanes alone: row_shr:4 into banks
    # 1-3 (bank_mask 0xe) is the next step of a 16-lane scan, LLVM's wave-reduce form.
    masked = """
    v_mov_b32 v2, v1
    v_add_nc_u32_dpp v2, v2, v2 row_shr:4 row_mask:0xf bank_mask:0xe
    """
    got = run(masked, x, y).reshape(WAVES, 32)
    xs = x.reshape(WAVES, 32)
    lane = np.arange(32)
    want = np.where(lane % 16 >= 4, xs + np.roll(xs, 4, axis=1), xs)
    np.testing.assert_array_equal(got, want)


def test_dpp_source_modifiers_vop3_dpp_and_compare_keeps_disabled_mask_bits():
    rng = np.random.default_rng(24)
    x = (rng.standard_normal(32 * WAVES) * 8).astype(f32)
    y = (rng.standard_normal(32 * WAVES) * 8).astype(f32)
    got = run("v_mov_b32 v2, v3\nv_add_f32_dpp v2, -v1, |v3| row_mirror row_mask:0x1 "
              "bank_mask:0xf", x, y)
    xs, ys = x.reshape(WAVES, 32), y.reshape(WAVES, 32)
    lane = np.arange(32)
    mirrored = xs[:, (lane & ~15) | (15 - (lane & 15))]
    want = np.where(lane < 16, -mirrored + np.abs(ys), ys)   # row 1 is masked off: keeps v2 = y
    np.testing.assert_array_equal(got.view(f32), want.astype(f32).reshape(-1))

    xi = rng.integers(0, 100, 32 * WAVES).astype(u32)
    yi = rng.integers(0, 100, 32 * WAVES).astype(u32)
    got = run("v_add3_u32_e64_dpp v2, v1, v3, 5 row_ror:3 row_mask:0xf bank_mask:0xf", xi, yi)
    xr = xi.reshape(WAVES, 32)[:, (lane & ~15) | ((lane - 3) & 15)]
    np.testing.assert_array_equal(got, (xr + yi.reshape(WAVES, 32) + 5).reshape(-1))

    # VOPC DPP: banks 2 and 3 of each row are disabled, so their VCC bits keep 0x5a5a5a5a's.
    cmp = """
    s_mov_b32 vcc_lo, 0x5a5a5a5a
    v_cmp_gt_u32_dpp vcc_lo, v1, v3 row_xmask:5 row_mask:0xf bank_mask:0x3
    v_cndmask_b32_e64 v2, 0, 1, vcc_lo
    """
    got = run(cmp, xi, yi).reshape(WAVES, 32)
    xx = xi.reshape(WAVES, 32)[:, (lane & ~15) | ((lane & 15) ^ 5)]
    new = (xx > yi.reshape(WAVES, 32)).astype(u32)
    old = (0x5A5A5A5A >> lane) & 1
    np.testing.assert_array_equal(got, np.where((lane % 16) // 4 < 2, new, old))


def _permlane_ref(x, y, sel_lo, sel_hi, cross, fi, bc):
    sel = sel_lo | sel_hi << 32

    def src_of(lane):
        row = (lane // 16) ^ (1 if cross else 0)
        return row * 16 + (sel >> (4 * (lane % 16)) & 15), True
    return _ref(x, y, src_of, fi=fi, bc=bc)


PERMLANE_CASES = [
    ("v_permlane16_b32 v2, v1, s10, s11", 0x01234567, 0x89ABCDEF, False, False, False),
    ("v_permlanex16_b32 v2, v1, s10, s11", 0x76543210, 0xFEDCBA98, True, False, False),
    ("v_permlanex16_b32 v2, v1, s10, s11 op_sel:[1,0]", 0x00000000, 0xFFFFFFFF, True, True,
     False),
    ("v_permlane16_b32 v2, v1, s10, s11 op_sel:[0,1]", 0x13579BDF, 0x02468ACE, False, False,
     True),
    ("v_permlanex16_b32 v2, v1, s10, s11 op_sel:[1,1]", 0xF0E1D2C3, 0xB4A59687, True, True,
     True),
]


@pytest.mark.parametrize("asm,lo,hi,cross,fi,bc", PERMLANE_CASES,
                         ids=[c[0].split()[0] + str(i) for i, c in enumerate(PERMLANE_CASES)])
def test_permlane16_and_x16_lane_selects_fi_and_bound_ctrl(asm, lo, hi, cross, fi, bc):
    rng = np.random.default_rng(25)
    x = rng.integers(1, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    y = rng.integers(1, 2**32, 32 * WAVES, dtype=np.uint64).astype(u32)
    got = run(_exec_prologue(f"s_mov_b32 s10, {lo:#x}\ns_mov_b32 s11, {hi:#x}\n{asm}"), x, y)
    np.testing.assert_array_equal(got, _permlane_ref(x, y, lo, hi, cross, fi, bc))


def test_vop3p_dpp_dot2():
    """v_dot2_f32_f16 with a DPP16 source 0 (VOP3P DPP, gfx11): mirrored within each row;
    bank 0 of every row is masked off and keeps v2 = y."""
    rng = np.random.default_rng(26)
    h = rng.standard_normal((32 * WAVES, 2)).astype(np.float16)
    x = h.view(np.uint16).astype(u32)
    x = x[:, 0] | x[:, 1] << 16
    y = (rng.standard_normal(32 * WAVES)).astype(f32).view(u32)
    # op_sel_hi spelled out: llvm-mc-16 encodes the DPP form's default as all zeros
    got = run("v_mov_b32 v2, v3\nv_dot2_f32_f16_e64_dpp v2, v1, v1, v3 op_sel_hi:[1,1,1] "
              "row_mirror row_mask:0xf bank_mask:0xe", x, y).view(f32)
    lane = np.arange(32)
    hs = h.reshape(WAVES, 32, 2).astype(np.float64)
    src = hs[:, (lane & ~15) | (15 - (lane & 15))]
    dot = (src * hs).sum(2) + y.view(f32).reshape(WAVES, 32)
    want = np.where((lane % 16) // 4 == 0, y.view(f32).reshape(WAVES, 32), dot.astype(f32))
    np.testing.assert_array_equal(got, want.astype(f32).reshape(-1))


def test_permlanex16_with_inline_constant_selects():
    """Triton's form: v_permlanex16_b32 vD, vS, -1, -1 (every lane reads lane 15 of the other
    row)."""
    x = np.arange(32 * WAVES, dtype=u32)
    got = run("v_permlanex16_b32 v2, v1, -1, -1", x, x).reshape(WAVES, 32)
    xs = x.reshape(WAVES, 32)
    want = np.concatenate([np.repeat(xs[:, 31:32], 16, 1), np.repeat(xs[:, 15:16], 16, 1)], 1)
    np.testing.assert_array_equal(got, want)


def test_reserved_dpp_control_is_refused_by_name():
    from runtime.drivers.mock.rdna3 import KernelFault
    # row_bcast:15 (0x142) exists on GFX9 only; gfx11 reserves it. Hand-encoded: llvm-mc would
    # not assemble it for gfx1100.
    word = 0xFA | 2 << 17 | 1 << 9 | 0b0111111 << 25   # v_mov_b32 v2, DPP16
    dpp = 1 | 0x142 << 8 | 0xF << 24 | 0xF << 28
    dev = RawDevice()
    code = word.to_bytes(4, "little") + dpp.to_bytes(4, "little") + \
        (0xBFB00000).to_bytes(4, "little")
    with pytest.raises(KernelFault, match="DPP_CTRL 0x142"):
        dev.launch_raw(code, [], (1,), (32,))


DISASM_LINES = """
v_mov_b32_dpp v2, v1 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf
v_add_nc_u32_dpp v2, v2, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1
v_add_f32_dpp v2, -v1, |v3| row_mirror row_mask:0x1 bank_mask:0xf
v_mov_b32_dpp v2, v1 row_half_mirror row_mask:0xf bank_mask:0xf
v_max_f32_dpp v5, v5, v5 row_shl:4 row_mask:0xa bank_mask:0xc
v_mov_b32_dpp v2, v1 row_share:3 row_mask:0xf bank_mask:0xf fi:1
v_mov_b32_dpp v2, v1 row_xmask:15 row_mask:0xf bank_mask:0xf
v_mov_b32_dpp v2, v1 dpp8:[7,6,5,4,3,2,1,0] fi:1
v_mov_b32_dpp v2, v1 dpp8:[1,0,0,0,0,0,0,0]
v_add3_u32_e64_dpp v2, v1, v3, 5 row_ror:3 row_mask:0xf bank_mask:0xf
v_permlanex16_b32 v2, v1, -1, -1 op_sel:[1,1]
v_permlane16_b32 v2, v1, s10, s11
v_pk_add_f16 v2, v1, v3 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0] neg_hi:[0,1]
v_pk_fma_f16 v2, v1, v3, 1.0
v_pk_mad_u16 v2, v1, v3, v1 clamp
v_wmma_f32_16x16x16_f16 v[40:47], v[16:23], v[24:31], v[32:39]
v_wmma_f16_16x16x16_f16 v[40:47], v[16:23], v[24:31], v[32:39] op_sel:[0,0,1]
v_wmma_i32_16x16x16_iu4 v[40:47], v[16:17], v[24:25], v[32:39] neg_lo:[1,1,0]
v_dot4_i32_iu8 v2, v1, v3, v1 neg_lo:[1,1,0] clamp
v_dot2_f32_f16 v2, v1, v3, 0.5
v_fma_mix_f32 v2, v1, v3, -|v1| op_sel:[1,0,0] op_sel_hi:[1,0,1]
v_fma_mixlo_f16 v2, v1, v1, v3 op_sel_hi:[1,1,0]
v_fma_mix_f32_e64_dpp v0, v1, v2, v3 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf
v_dot2_f32_f16_e64_dpp v2, v1, v3, v1 op_sel_hi:[1,1,1] row_mirror row_mask:0x3 bank_mask:0xe
"""


def test_dpp_and_vop3p_disassemble_as_llvm_prints_them():
    """Fault messages name these instructions in LLVM's syntax: the decoder's text must be the
    text llvm-mc-16 prints for the same encoding."""
    import re
    import subprocess

    from runtime.drivers.mock.rdna3.decode import decode_one
    res = subprocess.run(["llvm-mc-16", "-arch=amdgcn", "-mcpu=gfx1100", "--show-encoding"],
                         input=DISASM_LINES, capture_output=True, text=True, check=True)
    seen = 0
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(.*?)\s*; encoding: \[([^\]]*)\]", line)
        if m:
            code = bytes(int(b, 16) for b in m.group(2).split(","))
            inst = decode_one(code, 0, 0)
            assert inst.size == len(code), m.group(1)
            assert " ".join(str(inst).split()) == " ".join(m.group(1).split())
            seen += 1
    assert seen == len(DISASM_LINES.split("\n")) - 2


DPP_BUILTINS_CL = """
__kernel void dpp_ops(__global const int *a, __global int *out) {
  int i = get_global_id(0);
  int x = a[i];
  if (x & 1) {   /* odd inputs return here: EXEC is partial for the cross-lane ops below */
    out[4 * i] = 7; out[4 * i + 1] = 7; out[4 * i + 2] = 7; out[4 * i + 3] = 7;
    return;
  }
  out[4 * i] = __builtin_amdgcn_update_dpp(-1, x, 0x111, 0xf, 0xf, false);     /* row_shr:1 */
  out[4 * i + 1] = __builtin_amdgcn_update_dpp(-1, x, 0x102, 0xf, 0xf, true);  /* row_shl:2 bc */
  out[4 * i + 2] = __builtin_amdgcn_update_dpp(-1, x, 0x1b, 0xf, 0x5, false);  /* quad_perm */
  out[4 * i + 3] = __builtin_amdgcn_permlanex16(-1, x, 0x76543210, 0xfedcba98, false, false);
}
"""


def test_clang_dpp_builtins_with_inactive_source_lanes():
    """clang-16's code for __builtin_amdgcn_update_dpp / permlanex16 (the `old` value lands
    where the ISA writes nothing), with a third of the lanes inactive."""
    from runtime.drivers.amd.compiler import AMDCompiler
    if AMDCompiler().available() is not None:
        pytest.skip(f"OpenCL compiler unavailable: {AMDCompiler().available()}")
    co = AMDCompiler().compile(DPP_BUILTINS_CL)
    n = 64
    a = (np.random.default_rng(27).integers(0, 1000, n) * 2).astype(np.int32)
    a[::3] |= 1
    dev = DriverDevice()
    try:
        pa, po = dev.upload(a), dev.upload(np.zeros(4 * n, np.int32))
        dev.launch(dev.load(co, "dpp_ops"), [pa, po], (n // 32,), (32,))
        got = dev.download(po, 4 * n, np.int32).reshape(n, 4)
    finally:
        dev.close()
    act = (a & 1) == 0
    want = np.full((n, 4), 7, np.int64)
    sel = 0x76543210 | 0xFEDCBA98 << 32
    for i in map(int, np.flatnonzero(act)):
        w, lane = i - i % 32, i % 32

        def val(src: int, ok: bool, invalid: int) -> int:
            return int(a[w + src]) if ok and act[w + src] else invalid
        want[i, 0] = val(lane - 1, lane % 16 >= 1, -1)
        want[i, 1] = val(lane + 2, lane % 16 <= 13, 0)
        want[i, 2] = val((lane & ~3) | (3 - (lane & 3)), True, -1) \
            if (0x5 >> (lane % 16 // 4)) & 1 else -1
        want[i, 3] = val(((lane // 16) ^ 1) * 16 + (sel >> (4 * (lane % 16)) & 15), True, -1)
    np.testing.assert_array_equal(got, want)
