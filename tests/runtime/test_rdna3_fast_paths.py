"""The interpreter's fast paths (machine.Planes: fast_valu, fast_salu, the power-of-two v_fmac)
give what the general path gives, bit for bit.

Every instruction case of test_rdna3_isa runs on one wave (scalar ops on numpy scalars, VALU on
0-d SGPR operands) and on eight (VALU on [n, 1] SGPR operands) with the fast paths on and off
(WaveSet.planes forced to None); the edges the fast paths test for at run time get their own
programs: a lane mask a VALU compare left unpacked read as an SGPR, EXEC partly set, a VOPD
pair whose halves swap registers, v_fmac by 0.5 on lanes where the product is not exact.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.drivers.mock.rdna3 import (KernelFault, PageFaultError, fast_salu, fp, machine,
                                         ops_mem, ops_salu)

from .test_rdna3_isa import (EPILOGUE, FLOAT_CASES, INT_CASES, PROLOGUE, SALU_CASES, _floats,
                             _ints, assemble, pytestmark)  # noqa: F401  (pytestmark: llvm-mc)
from .test_rdna3_gds import assemble_labels
from .test_rdna3_kernels import round_f32
from .rdna3_device import RawDevice

u32, f32 = np.uint32, np.float32


def launch(code: bytes, x: np.ndarray, y: np.ndarray, waves: int) -> np.ndarray:
    dev = RawDevice()
    vo = dev.alloc(4 * 32 * waves)
    vx, vy = dev.upload(x[:32 * waves].view(u32)), dev.upload(y[:32 * waves].view(u32))
    user = [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32, vy & 0xFFFFFFFF, vy >> 32]
    dev.launch_raw(code, user, (waves,), (32,))
    return dev.download(vo, 32 * waves, u32)


def both_paths(monkeypatch: pytest.MonkeyPatch, snippet: str, x: np.ndarray, y: np.ndarray,
               waves: int) -> tuple[np.ndarray, np.ndarray]:
    """(fast paths on, fast paths off) results of a snippet."""
    code = assemble(PROLOGUE + snippet + EPILOGUE)
    fast = launch(code, x, y, waves)
    with monkeypatch.context() as m:
        m.setattr(machine, "Planes", lambda *a: None)
        m.setattr(machine, "_POOL", {})   # (a kept machine would bring its planes along)
        slow = launch(code, x, y, waves)
    return fast, slow


CASES = [(c[0], "int") for c in INT_CASES] + [(c[0], "float") for c in FLOAT_CASES] + \
    [(c[0] + "\nv_mov_b32 v2, s10", "int") for c in SALU_CASES]


@pytest.mark.parametrize("waves", [1, 8])
@pytest.mark.parametrize("asm,kind", CASES, ids=[c[0].split("\n")[0] for c in CASES])
def test_fast_paths_match_general_path(monkeypatch, asm, kind, waves):
    rng = np.random.default_rng(5)
    x, y = _ints(rng) if kind == "int" else _floats(rng)
    fast, slow = both_paths(monkeypatch, asm, x, y, waves)
    np.testing.assert_array_equal(fast, slow)


def test_fast_path_sees_lane_masks_a_compare_left_unpacked(monkeypatch):
    """VCC written by v_cmp is kept unpacked; a plain VALU op and a scalar op reading it as an
    SGPR value must see the packed bits (the fast paths hand such reads to the general path)."""
    x, y = _ints(np.random.default_rng(1))
    snippet = ("v_cmp_gt_u32_e32 vcc_lo, v1, v3\nv_xor_b32 v4, vcc_lo, v1\n"
               "s_and_b32 s10, vcc_lo, s9\nv_xor_b32 v2, s10, v4")
    for waves in (1, 8):
        fast, slow = both_paths(monkeypatch, snippet, x, y, waves)
        xs, ys = x[:32 * waves].reshape(waves, 32), y[:32 * waves].reshape(waves, 32)
        vcc = ((xs > ys).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1)
        vcc = vcc.astype(u32)[:, None]
        want = (vcc & ys[:, :1]) ^ (vcc ^ xs)
        np.testing.assert_array_equal(fast, want.reshape(-1))
        np.testing.assert_array_equal(slow, want.reshape(-1))


def test_fast_path_leaves_inactive_lanes_alone(monkeypatch):
    """EXEC partly set: plain ops, VOPD and v_fmac write only the active lanes."""
    x, y = _ints(np.random.default_rng(2))
    snippet = ("v_mov_b32 v2, 0x3f800000\nv_cmpx_lt_u32_e32 v1, v3\n"
               "v_xor_b32 v2, v1, v3\nv_dual_mov_b32 v5, v2 :: v_dual_add_nc_u32 v4, 1, v2\n"
               "v_fmac_f32_e32 v2, 0.5, v4\ns_mov_b32 exec_lo, -1")
    for waves in (1, 8):
        fast, slow = both_paths(monkeypatch, snippet, x, y, waves)
        xs, ys = x[:32 * waves], y[:32 * waves]
        v2 = xs ^ ys
        v4 = (v2 + u32(1)).astype(u32)
        finite = np.isfinite(v4.view(f32)) & np.isfinite(v2.view(f32))
        fm = [round_f32(Fraction(float(a)) / 2 + Fraction(float(b))) if ok else 0.0
              for a, b, ok in zip(v4.view(f32), v2.view(f32), finite)]
        want = np.where(xs < ys, np.array(fm, f32).view(u32), u32(0x3F800000))
        np.testing.assert_array_equal(fast, slow)
        np.testing.assert_array_equal(slow[finite | (xs >= ys)], want[finite | (xs >= ys)])


def test_vopd_halves_read_before_either_writes(monkeypatch):
    """v_dual_mov v4, v5 :: v_dual_mov v5, v4 swaps (ISA section 7.6: both halves read first)."""
    x, y = _ints(np.random.default_rng(3))
    snippet = ("v_mov_b32 v4, v1\nv_mov_b32 v5, v3\n"
               "v_dual_mov_b32 v4, v5 :: v_dual_mov_b32 v5, v4\nv_sub_nc_u32 v2, v4, v5")
    for waves in (1, 8):
        fast, slow = both_paths(monkeypatch, snippet, x, y, waves)
        want = (y[:32 * waves] - x[:32 * waves]).astype(u32)
        np.testing.assert_array_equal(slow, want)
        np.testing.assert_array_equal(fast, want)


def test_fmac_by_half_is_correctly_rounded_on_one_wave(monkeypatch):
    """v_fmac_f32 v2, 0.5, v3 where x * 0.5 is inexact (denormal and min-normal odd x), zero, a
    midpoint sum, and ordinary lanes: against exact rationals, fast and general path."""
    x = np.ones(32, f32)
    y = np.linspace(-3, 3, 32).astype(f32)
    y[:6] = (np.array([1, 3, 0x00800001, 0x00800003, 0x80000005, 0], u32)).view(f32)
    x[:6] = (np.array([0x80000001, 2, 0x80000001, 7, 0x00000004, 0], u32)).view(f32)
    y[6], x[6] = f32(2.0 ** -23), f32(1.0)          # 1 + 2^-24: a tie, to even
    y[7], x[7] = f32(3 * 2.0 ** -23), f32(1.0)      # 1 + 3 * 2^-24: a tie, to even (up)
    fast, slow = both_paths(monkeypatch, "v_mov_b32 v2, v1\nv_fmac_f32_e32 v2, 0.5, v3",
                            x, y, 1)
    want = np.array([round_f32(Fraction(float(b)) / 2 + Fraction(float(a)))
                     for a, b in zip(x, y)], f32)
    np.testing.assert_array_equal(slow, want.view(u32))
    np.testing.assert_array_equal(fast, want.view(u32))


def test_scalar_path_moves_exec_through_saveexec_and_back(monkeypatch):
    """One wave's scalar ops on a compare's unpacked VCC and on EXEC: s_and_saveexec, EXEC as an
    s_xor destination, EXEC restored from the saved mask, then a VALU op reading that SGPR."""
    x, y = _ints(np.random.default_rng(4))
    snippet = ("v_cmp_gt_u32_e32 vcc_lo, v1, v3\ns_and_saveexec_b32 s12, vcc_lo\n"
               "v_mov_b32 v2, 1\ns_xor_b32 exec_lo, exec_lo, s12\nv_mov_b32 v2, 2\n"
               "s_mov_b32 exec_lo, s12\nv_add_nc_u32 v2, s12, v2")
    for waves in (1, 8):
        fast, slow = both_paths(monkeypatch, snippet, x, y, waves)
        xs, ys = x[:32 * waves], y[:32 * waves]
        want = np.where(xs > ys, u32(0), u32(1))   # (1 or 2) + 0xFFFFFFFF
        np.testing.assert_array_equal(slow, want)
        np.testing.assert_array_equal(fast, want)


def _run_both(monkeypatch: pytest.MonkeyPatch, run) -> tuple:  # type: ignore[no-untyped-def]
    """run() with the fast paths on, then off (machine.Planes forced to None)."""
    fast = run()
    with monkeypatch.context() as m:
        m.setattr(machine, "Planes", lambda *a: None)
        # (a machine kept from a run above would bring its planes along)
        m.setattr(machine, "_POOL", {})
        slow = run()
    return fast, slow


def _run_with_scratch(code: bytes) -> tuple:  # type: ignore[type-arg]
    """One wave32 of `code` (its output pointer in s[0:1]) with 64 B of scratch per lane: the
    32 words it wrote and its wave and lane instruction counts, or ("fault", the message)."""
    dev = RawDevice()
    vo = dev.alloc(128)
    try:
        st_ = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32], (1,), (32,),
                             scratch_per_lane_B=64)
    except KernelFault as e:
        return ("fault", str(e))
    return dev.download(vo, 32, u32).tolist(), st_.wave_instructions, st_.lane_instructions


def _i32(v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64) - ((v.astype(np.int64) >> 31 & 1) << 32)


# (snippet, numpy reference of v2 from x = v1 and y = v3 as uint32)
CONSTANT_FORMS = [
    ("v_lshlrev_b32 v2, 33, v1", lambda x, y: (x << 1) & 0xFFFFFFFF),  # the amount masked to 1
    ("v_lshrrev_b32 v2, 7, v1", lambda x, y: x >> 7),
    ("v_ashrrev_i32 v2, 31, v1", lambda x, y: _i32(x) >> 31),
    ("v_ashrrev_i32 v2, 0x45, v1", lambda x, y: _i32(x) >> 5),
    ("v_mul_hi_i32 v2, 0x5d9f7391, v1", lambda x, y: (0x5D9F7391 * _i32(x)) >> 32),
    ("v_mul_hi_u32 v2, v1, 0xfffffff3", lambda x, y: (x.astype(object) * 0xFFFFFFF3) >> 32),
    ("v_mul_hi_i32 v2, v1, v3", lambda x, y: (_i32(x).astype(object) * _i32(y)) >> 32),
    # v_add3 with its destination as the third source (read before anything is written) and as
    # the first
    ("v_mov_b32 v2, v3\nv_add3_u32 v2, v1, v3, v2", lambda x, y: x + 2 * y),
    ("v_mov_b32 v2, v3\nv_add3_u32 v2, v2, v1, 5", lambda x, y: x + y + 5),
    ("v_add3_u32 v2, v1, s9, v3", lambda x, y: x + y + y[:, :1]),
]


@pytest.mark.parametrize("waves", [1, 8])
@pytest.mark.parametrize("asm,ref", CONSTANT_FORMS, ids=[c[0] for c in CONSTANT_FORMS])
def test_constant_and_in_place_forms(monkeypatch, asm, ref, waves):
    """Shifts by a constant, the high multiplies and v_add3 computed into the destination."""
    x, y = _ints(np.random.default_rng(6))
    fast, slow = both_paths(monkeypatch, asm, x, y, waves)
    xs, ys = x[:32 * waves].reshape(waves, 32), y[:32 * waves].reshape(waves, 32)
    want = np.array(ref(xs.astype(np.int64), ys.astype(np.int64)), dtype=object)
    want = (want.astype(object) & 0xFFFFFFFF).astype(np.uint64).astype(u32).reshape(-1)
    np.testing.assert_array_equal(slow, want)
    np.testing.assert_array_equal(fast, want)


GLOBAL_FORMS = [
    # the address register is the destination
    "v_mov_b32 v5, v10\nglobal_load_b32 v5, v5, s[2:3]\ns_waitcnt vmcnt(0)\nv_xor_b32 v2, v5, v3",
    # several dwords, one of them the address register; an immediate offset
    "v_mov_b32 v6, v10\nglobal_load_b128 v[4:7], v6, s[2:3] offset:8\ns_waitcnt vmcnt(0)\n"
    "v_add3_u32 v2, v4, v5, v6\nv_xor_b32 v2, v2, v7",
    # stores of two dwords, read back
    "v_lshlrev_b32 v6, 1, v10\nglobal_store_b64 v6, v[1:2], s[4:5]\ns_waitcnt vmcnt(0)\n"
    "v_add_nc_u32 v6, 4, v6\nglobal_load_b32 v2, v6, s[4:5]\ns_waitcnt vmcnt(0)",
    # a misaligned address: the general path
    "v_add_nc_u32 v5, 2, v10\nglobal_load_b32 v2, v5, s[2:3]\ns_waitcnt vmcnt(0)",
]


@pytest.mark.parametrize("waves", [1, 8])
@pytest.mark.parametrize("asm", GLOBAL_FORMS, ids=range(len(GLOBAL_FORMS)))
def test_one_wave_global_loads_and_stores(monkeypatch, asm, waves):
    x, y = _ints(np.random.default_rng(7))
    fast, slow = both_paths(monkeypatch, asm, x, y, waves)
    np.testing.assert_array_equal(fast, slow)


def test_one_wave_load_whose_offsets_or_past_the_mapping(monkeypatch):
    """Offsets 0x1000 and 0x2000 in a 0x3000-byte buffer: their OR (0x3000) bounds the maximum
    past the mapping's end, so the exact maximum decides, and the load is in range."""
    code = assemble("""
    v_and_b32 v5, 1, v0
    v_lshlrev_b32 v5, 12, v5
    v_add_nc_u32 v5, 0x1000, v5
    global_load_b32 v6, v5, s[2:3]
    s_waitcnt vmcnt(0)
    v_lshlrev_b32 v10, 2, v0
    global_store_b32 v10, v6, s[0:1]
    s_endpgm
    """)
    words = np.arange(0x3000 // 4, dtype=u32) * u32(3)

    def run() -> np.ndarray:
        dev = RawDevice()
        vo, vx = dev.alloc(128), dev.upload(words)
        dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32], (1,), (32,))
        return dev.download(vo, 32, u32)
    fast, slow = _run_both(monkeypatch, run)
    want = words[np.where(np.arange(32) & 1, 0x2000, 0x1000) // 4]
    np.testing.assert_array_equal(slow, want)
    np.testing.assert_array_equal(fast, want)


def test_one_wave_scratch_and_its_range_check(monkeypatch):
    """scratch_store/load of one and two dwords at a VGPR offset plus an immediate, and a store
    past the 64 bytes each lane has: the same fault on both paths."""
    ok = assemble("""
    v_lshlrev_b32 v10, 2, v0
    v_mov_b32 v4, 8
    v_add_nc_u32 v5, 100, v0
    v_add_nc_u32 v6, 200, v0
    scratch_store_b64 v4, v[5:6], off offset:4
    scratch_store_b32 v4, v6, off offset:28
    s_waitcnt vmcnt(0)
    scratch_load_b64 v[7:8], v4, off offset:4
    scratch_load_b32 v9, v4, off offset:28
    s_waitcnt vmcnt(0)
    v_lshl_or_b32 v7, v8, 8, v7
    v_lshl_or_b32 v7, v9, 20, v7
    global_store_b32 v10, v7, s[0:1]
    s_endpgm
    """)
    bad = assemble("""
    v_mov_b32 v4, 52
    scratch_store_b64 v4, v[5:6], off offset:8
    s_endpgm
    """)

    def run(code: bytes) -> np.ndarray:
        dev = RawDevice()
        vo = dev.alloc(128)
        dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32], (1,), (32,), scratch_per_lane_B=64)
        return dev.download(vo, 32, u32)
    fast, slow = _run_both(monkeypatch, lambda: run(ok))
    lane = np.arange(32, dtype=u32)
    want = (100 + lane) | (200 + lane) << 8 | (200 + lane) << 20
    np.testing.assert_array_equal(slow, want)
    np.testing.assert_array_equal(fast, want)
    errors = []
    for planes in (machine.Planes, lambda *a: None):
        with monkeypatch.context() as m:
            m.setattr(machine, "Planes", planes)
            m.setattr(machine, "_POOL", {})
            with pytest.raises(KernelFault) as e:
                run(bad)
            errors.append(str(e.value))
    assert errors[0] == errors[1] and "beyond the 64 B per lane" in errors[0]


_SCRATCH_LOOP = """
v_lshlrev_b32 v10, 2, v0
v_and_b32 v4, 3, v0
v_lshlrev_b32 v4, 2, v4
s_mov_b32 s10, 0
v_mov_b32 v2, 0
loop:
v_add_nc_u32 v5, s10, v0
v_xor_b32 v6, 0x55, v5
scratch_store_b32 v4, v5, off offset:4
scratch_store_b64 v4, v[5:6], off offset:8
s_waitcnt vmcnt(0)
scratch_load_b32 v7, v4, off offset:4
scratch_load_b64 v[8:9], v4, off offset:8
s_waitcnt vmcnt(0)
v_add3_u32 v2, v2, v7, v9
v_add_nc_u32 v4, {step}, v4
s_add_i32 s10, s10, 1
s_cmp_lg_u32 s10, 6
s_cbranch_scc1 loop
global_store_b32 v10, v2, s[0:1]
s_endpgm
"""


@pytest.mark.parametrize("step", [4, 12])
def test_one_wave_scratch_in_a_loop_bound_and_its_range_check(monkeypatch, step):
    """Scratch loads and stores in a loop's straight-line block run bound to the wave set from
    its second pass on: the same bits as the general path, and where a later pass's offsets
    leave the 64 bytes each lane has (step 12), the same fault."""
    code = assemble_labels(_SCRATCH_LOOP.format(step=step))
    fast, slow = _run_both(monkeypatch, lambda: _run_with_scratch(code))
    assert fast == slow
    if step == 12:
        assert fast[0] == "fault" and "beyond the 64 B per lane" in fast[1]
    else:
        lane = np.arange(32)
        want = sum((k + lane) + ((k + lane) ^ 0x55) for k in range(6))
        assert fast[0] == want.tolist()


def test_one_wave_compare_and_swap_on_one_address(monkeypatch):
    """Lanes 4-7, 12-15, ... (EXEC 0xF0F0F0F0) swap lane + 1 for lane on one dword holding 4:
    lanes 4-7 succeed in lane order, each seeing the one before's value, the later ones fail and
    see 8; inactive lanes keep their register."""
    code = assemble("""
    v_lshlrev_b32 v10, 2, v0
    v_mov_b32 v1, 0
    v_add_nc_u32 v2, 1, v0
    v_mov_b32 v3, v0
    v_mov_b32 v4, 77
    s_mov_b32 exec_lo, 0xf0f0f0f0
    global_atomic_cmpswap_b32 v4, v1, v[2:3], s[2:3] glc
    s_waitcnt vmcnt(0)
    s_mov_b32 exec_lo, -1
    global_store_b32 v10, v4, s[0:1]
    s_endpgm
    """)

    def run() -> tuple[np.ndarray, int]:
        dev = RawDevice()
        vo, vx = dev.alloc(128), dev.upload(np.array([4], u32))
        dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32], (1,), (32,))
        return dev.download(vo, 32, u32), int(dev.download(vx, 1, u32)[0])
    (fast, fmem), (slow, smem) = _run_both(monkeypatch, run)
    lane = np.arange(32)
    active = (0xF0F0F0F0 >> lane & 1).astype(bool)
    want = np.where(active, np.where((lane >= 4) & (lane <= 7), lane, 8), 77).astype(u32)
    assert fmem == smem == 8
    np.testing.assert_array_equal(slow, want)
    np.testing.assert_array_equal(fast, want)


def test_nops_stepped_over_still_count():
    """s_waitcnt/s_delay_alu/s_nop after an instruction are stepped over at once: ExecStats
    counts them as executed, with the lanes active after that instruction (v_cmpx narrows EXEC
    to 8 lanes before two of them)."""
    code = assemble("""
    v_mov_b32 v1, 0
    s_waitcnt vmcnt(0)
    s_delay_alu instid0(VALU_DEP_1)
    v_cmpx_gt_u32_e32 8, v0
    s_nop 0
    s_waitcnt lgkmcnt(0)
    v_add_nc_u32 v1, 1, v1
    s_endpgm
    """)
    st = RawDevice().launch_raw(code, [], (1,), (32,))
    assert st.wave_instructions == 8   # s_endpgm included
    assert st.lane_instructions == 32 * 4 + 8 * 4


_EDGES = [0, 1, 2, 30, 31, 32, 33, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFE, 0x7FFFFFFF, 0x80000000,
          0x80000001, 0xFFFFFFFE, 0xFFFFFFFF]
_WORDS = st.one_of(st.sampled_from(_EDGES), st.integers(0, 0xFFFFFFFF))


def _same_scalar(got: tuple, want: tuple) -> None:
    """An int op's (result, SCC) against the numpy lane function's on one lane."""
    assert (got[0] is None) == (want[0] is None)
    if got[0] is not None:
        assert 0 <= got[0] <= 0xFFFFFFFF
        assert got[0] == int(np.asarray(want[0]).reshape(-1)[0])
    assert (got[1] is None) == (want[1] is None)
    if got[1] is not None:
        assert bool(got[1]) == bool(np.asarray(want[1]).reshape(-1)[0])


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(fast_salu.INT_SOP2)), a=_WORDS, b=_WORDS, scc=st.booleans())
def test_int_scalar_ops_match_the_numpy_lane_functions(name, a, b, scc):
    """The one-wave scalar path computes on Python ints: each op gives what the general path's
    numpy lane function gives on the same bit patterns (carries, signed overflow, shifts by
    32 and more, signed min/max and select)."""
    ref = ops_salu._sop2_fn(name)
    assert ref is not None
    want = ref(np.array([a], u32), np.array([b], u32), np.array([scc]))
    _same_scalar(fast_salu.INT_SOP2[name](a, b, scc), want)


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(sorted(fast_salu.INT_SOP1)), a=_WORDS)
def test_int_scalar_sop1_match_the_numpy_lane_functions(name, a):
    ref = ops_salu._sop1_fn(name, 32)
    assert ref is not None
    _same_scalar(fast_salu.INT_SOP1[name](a), ref(np.array([a], u32)))


@pytest.mark.parametrize("asm", [
    "s_cmp_lt_i32 s8, s9\ns_cselect_b32 s10, 1, 2",
    "s_cmp_ge_u32 s8, s9\ns_cselect_b32 s10, s8, s9",
    "s_cmp_lg_u32 s8, 0x80000000\ns_cselect_b32 s10, 7, 9",
    "s_cmpk_lt_i32 s8, 0x8001\ns_cselect_b32 s10, 3, 4",
    "s_cmpk_ge_u32 s8, 0x7fff\ns_cselect_b32 s10, 3, 4",
    "s_mov_b32 s10, s8\ns_addk_i32 s10, 0x8000\ns_cselect_b32 s11, 1, 0\ns_xor_b32 s10, s10, s11",
    "s_mov_b32 s10, s8\ns_mulk_i32 s10, 0xfff3",
    "s_movk_i32 s10, 0x9abc\ns_not_b32 s10, s10",
    "s_ashr_i32 s10, s8, s9\ns_cselect_b32 s11, 1, 0\ns_xor_b32 s10, s10, s11",
    "s_subb_u32 s10, s8, s9\ns_addc_u32 s10, s10, s9\ns_cselect_b32 s11, 1, 0\n"
    "s_xor_b32 s10, s10, s11",
])
def test_int_scalar_compares_and_immediates_match_general_path(monkeypatch, asm):
    """Compares (signed order by the flipped sign bit), the SOPK immediate forms and a carry
    chain on one wave's Python ints against the general path."""
    x, y = _ints(np.random.default_rng(11))
    # (s8, s9) are lane 0's x and y
    for s8, s9 in [(0x80000000, 0x7FFFFFFF), (0xFFFFFFFF, 1), (0x7FFF, 0xFFFF8001), (5, 40)]:
        x[0], y[0] = s8, s9
        fast, slow = both_paths(monkeypatch, asm + "\nv_mov_b32 v2, s10", x, y, 1)
        np.testing.assert_array_equal(fast, slow)


_CAS_ONE_ADDRESS = """
v_lshlrev_b32 v10, 2, v0
global_load_b32 v2, v10, s[2:3]
global_load_b32 v3, v10, s[4:5]
s_load_b32 s8, s[6:7], null
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32 v1, 4
v_mov_b32 v4, 77
s_mov_b32 exec_lo, s8
global_atomic_cmpswap_b32 v4, v1, v[2:3], s[6:7] glc
s_waitcnt vmcnt(0)
s_mov_b32 exec_lo, -1
global_store_b32 v10, v4, s[0:1]
s_endpgm
"""


@settings(max_examples=60, deadline=None)
@given(exec_mask=st.one_of(st.integers(0, 0xFFFFFFFF),   # (contiguous lanes: a retry loop's)
                          st.tuples(st.integers(0, 31), st.integers(1, 32)).map(
                              lambda t: ((1 << t[1]) - 1) << t[0] & 0xFFFFFFFF)),
       start=st.sampled_from([1, 2, 3]),
       srcs=st.lists(st.sampled_from([1, 2, 3, 9]), min_size=32, max_size=32),
       cmps=st.lists(st.sampled_from([1, 2, 3]), min_size=32, max_size=32))
def test_one_address_compare_and_swap_chains(exec_mask, start, srcs, cmps):
    """Lanes of one wave on one dword swap in lane order, each returning the value the lanes
    before it left, whatever chain of successes the compare values make (the one-address path
    finds them with a search, not lane by lane): against a sequential reference and the
    general path."""
    code = assemble(_CAS_ONE_ADDRESS)

    def run() -> tuple[np.ndarray, int]:
        dev = RawDevice()
        vo = dev.alloc(128)
        vs, vc = dev.upload(np.array(srcs, u32)), dev.upload(np.array(cmps, u32))
        vm = dev.upload(np.array([exec_mask, start], u32))
        dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vs & 0xFFFFFFFF, vs >> 32,
                              vc & 0xFFFFFFFF, vc >> 32, vm & 0xFFFFFFFF, vm >> 32], (1,), (32,))
        return dev.download(vo, 32, u32), int(dev.download(vm, 2, u32)[1])
    cur, want = start, np.full(32, 77, u32)
    for lane in range(32):
        if exec_mask >> lane & 1:
            want[lane] = cur
            if cmps[lane] == cur:
                cur = srcs[lane]
    fast, fmem = run()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(machine, "Planes", lambda *a: None)
        m.setattr(machine, "_POOL", {})
        slow, smem = run()
    assert fmem == smem == cur
    np.testing.assert_array_equal(fast, want)
    np.testing.assert_array_equal(slow, want)


def test_fault_inside_a_straight_run_names_its_instruction():
    """Straight-line code runs in one go (no per-step bookkeeping): a fault in the middle of
    such a run still names the instruction that faulted, and the instructions before it ran."""
    code = assemble("""
    v_mov_b32 v1, 0x100
    s_mov_b32 s4, 7
    v_add_nc_u32 v2, 4, v1
    global_load_b32 v3, v2, s[0:1]
    v_mov_b32 v4, 2
    s_endpgm
    """)
    dev = RawDevice()
    with pytest.raises(PageFaultError) as e:
        dev.launch_raw(code, [0x10, 0], (1,), (32,))   # s[0:1] = 0x10: nothing mapped there
    assert "global_load_b32" in e.value.instruction
    assert e.value.address is not None and e.value.address % 256 == 8 + 4 + 4


@pytest.mark.parametrize("waves", [1, 8])
@pytest.mark.parametrize("asm", [
    # a ufunc half computed into its register, beside a move, with a literal
    "v_dual_mov_b32 v4, v1 :: v_dual_and_b32 v5, 0xfff, v3\nv_xor_b32 v2, v4, v5",
    # both halves ufuncs, X's destination one of its own sources
    "v_dual_mul_f32 v1, v1, v3 :: v_dual_and_b32 v6, 0x7f, v0\nv_xor_b32 v2, v1, v6",
    # Y reads X's destination: both read before either writes (no in-place path)
    "v_dual_add_f32 v4, v1, v3 :: v_dual_and_b32 v5, 0xff, v4\nv_xor_b32 v2, v4, v5",
    "v_dual_mul_f32 v4, v1, v3 :: v_dual_add_f32 v5, v3, v1\n"
    "v_dual_sub_f32 v6, v4, v5 :: v_dual_mov_b32 v7, v5\nv_add_f32 v2, v6, v7",
])
def test_vopd_halves_computed_in_place_match_general_path(monkeypatch, asm, waves):
    rng = np.random.default_rng(9)
    for x, y in (_ints(rng), _floats(rng)):
        fast, slow = both_paths(monkeypatch, "v_mov_b32 v4, 5\nv_mov_b32 v5, 6\n" + asm, x, y,
                                waves)
        np.testing.assert_array_equal(fast, slow)


_BOUND_LOOP = """
s_mov_b32 s10, 0
v_mov_b32 v2, v1
v_mov_b32 v5, v3
loop:
v_add_nc_u32 v2, v2, v3
v_lshlrev_b32 v4, 3, v2
v_xor_b32 v2, v4, v2
v_mul_hi_u32 v6, v2, v5
v_add3_u32 v2, v2, v6, s10
v_mov_b32 v7, v2
s_add_i32 s10, s10, 1
s_lshl_b32 s12, s10, 2
s_cmp_gt_u32 s10, 2
s_cselect_b32 s13, s12, 7
v_add_nc_u32 v2, s13, v2
v_cvt_f32_u32 v8, v2
v_fmac_f32 v8, 0.5, v8
v_cvt_u32_f32 v9, v8
v_xor_b32 v2, v2, v9
v_dual_mov_b32 v11, v2 :: v_dual_and_b32 v12, 0x7c, v2
global_load_b32 v13, v12, s[2:3]
s_waitcnt vmcnt(0)
v_dual_mov_b32 v14, v13 :: v_dual_lshlrev_b32 v11, 3, v11
v_add_nc_u32 v2, v2, v14
v_xor_b32 v2, v2, v11
{middle}
v_add_nc_u32 v2, v2, v7
s_nop 1
v_mul_hi_i32 v7, 0x5d9f7391, v2
v_xor_b32 v2, v2, v7
s_cmp_lg_u32 s10, 6
s_cbranch_scc1 loop
"""


@pytest.mark.parametrize("waves", [1, 8])
@pytest.mark.parametrize("middle", [
    "",
    # a lane mask unpacked mid-block (then read by a VALU op and an SALU op)
    "v_cmp_gt_u32 vcc_lo, 8, v0\nv_cndmask_b32 v2, v2, v7, vcc_lo\ns_and_b32 s11, vcc_lo, s10",
    # EXEC narrowed mid-block and restored later in the same block
    "s_mov_b32 exec_lo, 0xffff00f0\ns_nop 0\nv_add_nc_u32 v2, 5, v2\n"
    "s_delay_alu instid0(VALU_DEP_1)\ns_mov_b32 exec_lo, -1",
    # EXEC narrowed by a VALU compare until the loop's next pass (NOPs after it count the
    # narrowed EXEC)
    "v_cmpx_lt_u32 v0, 20\ns_nop 0\ns_nop 1",
], ids=["plain", "lane-mask", "exec-sgpr", "cmpx"])
def test_blocks_bound_to_a_wave_set_match_general_path(monkeypatch, middle, waves):
    """A loop's straight-line block runs bound to the wave set's registers from its second
    pass on (its plain VALU ops one numpy call each, scalar ops, VOPD pairs, one wave's
    global loads and v_fmac by 0.5 with their registers looked up once): the same bits and
    the same lane counts
    as the general path, also where EXEC or a lane mask changes inside the block (the rest of
    it then runs step by step)."""
    code = assemble_labels(PROLOGUE + _BOUND_LOOP.format(middle=middle) +
                           "s_mov_b32 exec_lo, -1\n" + EPILOGUE)
    x, y = _ints(np.random.default_rng(4))

    def run() -> tuple[np.ndarray, int, int]:
        dev = RawDevice()
        vo = dev.alloc(4 * 32 * waves)
        vx, vy = dev.upload(x[:32 * waves]), dev.upload(y[:32 * waves])
        st = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32,
                                   vy & 0xFFFFFFFF, vy >> 32], (waves,), (32,))
        return dev.download(vo, 32 * waves, u32), st.wave_instructions, st.lane_instructions
    (fast, fw, fl), (slow, sw, sl) = _run_both(monkeypatch, run)
    np.testing.assert_array_equal(fast, slow)
    assert (fw, fl) == (sw, sl)


@pytest.mark.parametrize("check_every", [5, 67, 97, 256])
@pytest.mark.parametrize("middle", [
    "",
    "v_cmp_gt_u32 vcc_lo, 8, v0\nv_cndmask_b32 v2, v2, v7, vcc_lo\ns_and_b32 s11, vcc_lo, s10",
    "s_mov_b32 exec_lo, 0xffff00f0\ns_nop 0\nv_add_nc_u32 v2, 5, v2\n"
    "s_delay_alu instid0(VALU_DEP_1)\ns_mov_b32 exec_lo, -1",
    "v_cmpx_lt_u32 v0, 20\ns_nop 0\ns_nop 1",
], ids=["plain", "lane-mask", "exec-sgpr", "cmpx"])
def test_one_wave_loop_matches_the_scheduler_and_pauses_within_it(monkeypatch, middle,
                                                                  check_every):
    """A one-wave loop of straight-line code runs time round after time round in one call
    (interp.Loop; bound while EXEC is full, slot by slot otherwise, leaving to the scheduler
    where a step changes EXEC or unpacks a lane mask): the same registers and counts as
    without it and on the general path; the dispatch still pauses inside the loop, never more
    than a time round or a block past its budget of instructions, and an instruction limit
    inside the loop faults."""
    from runtime.drivers.mock.rdna3 import interp
    from . import rdna3_device
    monkeypatch.setattr(interp, "CHECK_EVERY", check_every)
    # (40 time rounds of about 30 slots: the clock is looked at within the loop's rounds, and
    # from 67 on some whole rounds fit between two looks)
    loop = _BOUND_LOOP.format(middle=middle).replace("s_cmp_lg_u32 s10, 6", "s_cmp_lg_u32 s10, 40")
    code = assemble_labels(PROLOGUE + loop + "s_mov_b32 exec_lo, -1\n" + EPILOGUE)
    x, y = _ints(np.random.default_rng(check_every))
    pauses: list[int] = []

    def paused(rec, mem, *, cache=None, max_wave_instructions=1 << 40):  # type: ignore[no-untyped-def]
        d = interp.Dispatch(rec, mem, cache=cache, max_wave_instructions=max_wave_instructions)
        while not d.advance(0.0):
            pauses.append(d.stats.wave_instructions)
        return d.stats

    monkeypatch.setattr(rdna3_device, "execute", paused)

    def run(limit: int = 1 << 40) -> tuple:  # type: ignore[type-arg]
        pauses.clear()
        dev = RawDevice()
        vo = dev.alloc(4 * 32)
        vx, vy = dev.upload(x[:32]), dev.upload(y[:32])
        try:
            st = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32,
                                       vy & 0xFFFFFFFF, vy >> 32], (1,), (32,),
                                max_wave_instructions=limit)
        except KernelFault as e:
            return ("fault", str(e), list(pauses))
        return (dev.download(vo, 32, u32).tolist(), st.wave_instructions, st.lane_instructions,
                list(pauses))

    def without_loop(run):  # type: ignore[no-untyped-def]
        with monkeypatch.context() as m:
            m.setattr(interp, "one_wave_loop", lambda *a: None)
            return run()
    fast = run()
    plain = without_loop(run)
    assert fast[:3] == plain[:3] == _run_both(monkeypatch, run)[1][:3]
    seen = fast[-1]
    # (where the clock is looked at may differ: without the runner, a block's first run is
    # never cut short where EXEC changes, and the blocks after a cut start new looks)
    assert len(seen) > 3 and max(np.diff([0, *seen])) < check_every + 40
    for limit in (seen[1] - 1, seen[len(seen) // 2] - 1, seen[-1] - 1):
        got = run(limit)
        assert got[0] == "fault" and "instruction limit" in got[1]


_OFFSETS = st.one_of(st.integers(0, 0xFFFFFFFF), st.integers(0, 0x3FFF).map(lambda v: v * 4),
                     st.sampled_from([0, 4, 0x7FFFFFFC, 0x80000000, 0xFFFFFFFC, 1, 2, 3]))


@settings(max_examples=300, deadline=None)
@given(offs=st.lists(_OFFSETS, min_size=32, max_size=32))
def test_offsets_top_matches_numpy(offs):
    """One wave's byte offsets read on the register's bytes: their maximum, or -1 where one is
    misaligned, as numpy's reductions say."""
    off = np.array(offs, dtype=u32).reshape(1, 32)
    bad = (off & 3).any()
    assert ops_mem.dword_offsets_top(off) == (-1 if bad else int(off.max()))


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=32))
def test_exponents_above_1_matches_numpy(words):
    bits = np.array(words, dtype=u32)
    want = bool(((bits & u32(0x7F000000)) != 0).all())
    assert fp.exponents_above_1(bits, np.empty_like(bits)) is want
    assert fp.exponents_above_1(bits.reshape(1, -1), np.empty((1, len(words)), u32)) is want


# A compare-and-swap retry loop adding each lane's v5 to one counter, in clang's shape; the
# tail after the swap (compare, move, OR into DONE, EXEC update) in the VOPC form with VCC and
# in the VOP3 form with an SGPR and the OR's operands swapped. DONE starts with the bits the
# test gives (lanes already done). Afterwards: each lane's registers, and VCC / the mask SGPR,
# DONE and SCC.
_RETRY_LOOP = """
v_lshlrev_b32 v10, 2, v0
s_lshl_b32 s7, s6, 7
v_add_nc_u32 v10, s7, v10
global_load_b32 v5, v10, s[2:3]
s_load_b64 s[8:9], s[4:5], 0x4
s_load_b32 s10, s[4:5], null
s_waitcnt vmcnt(0) lgkmcnt(0)
v_mov_b32 v1, 0
v_mov_b32 v3, s10
s_mov_b32 s12, s9
s_mov_b32 exec_lo, s8
loop:
v_add_nc_u32 v2, v3, v5
global_atomic_cmpswap_b32 v2, v1, v[2:3], s[4:5] glc
s_waitcnt vmcnt(0)
{tail}
s_cbranch_execnz loop
s_cselect_b32 s14, 1, 0
s_mov_b32 exec_lo, -1
v_mov_b32 v6, {mask}
v_mov_b32 v7, s12
v_mov_b32 v8, s14
global_store_b32 v10, v2, s[0:1]
global_store_b32 v10, v3, s[0:1] offset:512
global_store_b32 v10, v6, s[0:1] offset:1024
global_store_b32 v10, v7, s[0:1] offset:1536
global_store_b32 v10, v8, s[0:1] offset:2048
s_endpgm
"""
_TAILS = {
    "vopc": ("v_cmp_eq_u32 vcc_lo, v2, v3\nv_mov_b32 v3, v2\ns_or_b32 s12, vcc_lo, s12\n"
             "s_delay_alu instid0(SALU_CYCLE_1)\ns_and_not1_b32 exec_lo, exec_lo, s12",
             "vcc_lo"),
    "vop3": ("v_cmp_eq_u32_e64 s13, v3, v2\ns_nop 0\nv_mov_b32 v3, v2\n"
             "s_or_b32 s12, s12, s13\ns_and_not1_b32 exec_lo, exec_lo, s12", "s13"),
}


@settings(max_examples=30, deadline=None)
@given(exec_mask=st.one_of(st.integers(0, 0xFFFFFFFF),
                          st.tuples(st.integers(0, 31), st.integers(1, 32)).map(
                              lambda t: ((1 << t[1]) - 1) << t[0] & 0xFFFFFFFF)),
       done=st.sampled_from([0, 1, 0x80000000, 0x00FF0000]),
       start=st.integers(0, 0xFFFFFFFF), waves=st.sampled_from([1, 3]),
       form=st.sampled_from(sorted(_TAILS)), seed=st.integers(0, 1 << 16))
def test_retry_tail_runs_as_its_instructions(exec_mask, done, start, waves, form, seed):
    """The one-address compare-and-swap runs its retry loop's tail with it (one wave; waves
    racing run one at a time): every register, SGPR and SCC the tail's instructions leave, the
    counter, and the instruction and lane counts are those of the general path."""
    tail, mask = _TAILS[form]
    code = assemble_labels(_RETRY_LOOP.format(tail=tail, mask=mask))
    add = np.random.default_rng(seed).integers(0, 1 << 32, 32 * waves, dtype=np.uint64)

    def run() -> tuple[np.ndarray, int, int, int]:
        dev = RawDevice()
        vo = dev.alloc(2560)
        va = dev.upload(add.astype(u32))
        vm = dev.upload(np.array([start, exec_mask, done], u32))
        stats = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, va & 0xFFFFFFFF, va >> 32,
                                      vm & 0xFFFFFFFF, vm >> 32], (waves,), (32,),
                              max_wave_instructions=200_000)   # (a wrong tail may never end)
        return (dev.download(vo, 640, u32), int(dev.download(vm, 1, u32)[0]),
                stats.wave_instructions, stats.lane_instructions)
    fast, slow = _run_both(pytest.MonkeyPatch(), run)
    np.testing.assert_array_equal(fast[0], slow[0])
    assert fast[1:] == slow[1:]
    if not done:   # (lanes DONE holds at the start leave after one try, swapped or not)
        lanes = [i for i in range(32) if exec_mask >> i & 1]
        total = start + int(sum(int(add[w * 32 + i]) for w in range(waves) for i in lanes))
        assert fast[1] == total & 0xFFFFFFFF


@pytest.mark.parametrize("check_every", [5, 13, 64])
@pytest.mark.parametrize("waves", [1, 2])
def test_retry_loop_pauses_and_faults_where_the_general_path_does(monkeypatch, check_every,
                                                                  waves):
    """A one-wave retry loop runs time round after time round in one call (interp.RetryLoop),
    but stops short of the next look at the clock: here (no block is cut short in the loop)
    the dispatch pauses after the same instructions as without it (every look at the clock
    ends the time slice), ends with the same registers, counter and counts (those also as on
    the general path), and an instruction limit inside the loop faults naming the same
    instruction."""
    from runtime.drivers.mock.rdna3 import interp
    from . import rdna3_device
    monkeypatch.setattr(interp, "CHECK_EVERY", check_every)
    tail, mask = _TAILS["vopc"]
    code = assemble_labels(_RETRY_LOOP.format(tail=tail, mask=mask))
    add = np.random.default_rng(check_every).integers(0, 1 << 32, 32 * waves, dtype=np.uint64)
    pauses: list[int] = []

    def paused(rec, mem, *, cache=None, max_wave_instructions=1 << 40):  # type: ignore[no-untyped-def]
        d = interp.Dispatch(rec, mem, cache=cache, max_wave_instructions=max_wave_instructions)
        while not d.advance(0.0):
            pauses.append(d.stats.wave_instructions)
        return d.stats

    monkeypatch.setattr(rdna3_device, "execute", paused)

    def run(limit: int = 1 << 40) -> tuple:  # type: ignore[type-arg]
        pauses.clear()
        dev = RawDevice()
        vo = dev.alloc(2560)
        va = dev.upload(add.astype(u32))
        vm = dev.upload(np.array([7, 0xFFFFFFFF, 0], u32))
        try:
            stats = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, va & 0xFFFFFFFF, va >> 32,
                                          vm & 0xFFFFFFFF, vm >> 32], (waves,), (32,),
                                   max_wave_instructions=limit)
        except KernelFault as e:
            return ("fault", str(e), list(pauses))
        return (dev.download(vo, 640, u32).tolist(), int(dev.download(vm, 1, u32)[0]),
                stats.wave_instructions, stats.lane_instructions, list(pauses))
    def without_loop(run):  # type: ignore[no-untyped-def]
        with monkeypatch.context() as m:
            m.setattr(interp, "retry_loop", lambda *a: None)
            return run()
    fast = run()
    assert fast == without_loop(run)
    assert len(fast[-1]) > 3   # (it did pause inside the loop)
    # the general path: the same memory and counts (it looks at the clock elsewhere: the tail
    # of its swap is a straight-line block)
    assert fast[:4] == _run_both(monkeypatch, run)[1][:4]
    seen = fast[-1]   # (the counts at each look at the clock, where the limit is checked)
    for limit in (seen[1] - 1, seen[len(seen) // 2] - 1, seen[-1] - 1):
        got = run(limit)
        assert got[0] == "fault" and got == without_loop(lambda: run(limit))


def test_retry_tails_of_clang_cas_loops():
    """clang's compare-and-swap loops (wave32, -O1 and up) have the tail the one-address
    compare-and-swap runs with it."""
    from runtime.drivers.amd import elf
    from runtime.drivers.mock.rdna3 import interp
    clang = Path(__file__).resolve().parent / "data" / "rdna3_real" / "clang"
    names = [f"cas_hist_w32_{o}" for o in ("O1", "O2", "O3", "Os")] + \
        ["float_atomic_add_O2", "float_atomic_add_O3"]
    for name in names:
        co = elf.parse((clang / f"{name}.hsaco").read_bytes())
        (kernel,) = co.kernels.values()
        prog = interp.decode_program(co.image()[kernel.entry_vaddr:], kernel.entry_vaddr)
        tails = [ops_mem.retry_tail(inst, interp._slots_after(prog, i))
                 for i, inst in enumerate(prog.insts) if "cmpswap" in inst.name]
        assert tails and all(t is not None and t.slots == 6 for t in tails), (name, tails)


@pytest.mark.parametrize("name", [f"cas_hist_w32_{o}" for o in ("O0", "O1", "O2", "O3", "Os")]
                         + ["float_atomic_add_O0", "float_atomic_add_O2"])
def test_clang_cas_loops_match_general_path(monkeypatch, name):
    """clang's retry loops through the driver, fast paths on and off: the same memory and the
    same instruction and lane counts."""
    from .rdna3_device import DriverDevice
    clang = Path(__file__).resolve().parent / "data" / "rdna3_real" / "clang"
    co = (clang / f"{name}.hsaco").read_bytes()
    v = np.random.default_rng(2).integers(0, 1 << 20, 96).astype(u32)

    def run() -> tuple[np.ndarray, ...]:
        dev = DriverDevice()
        try:
            prg = dev.load(co)
            if name.startswith("cas_hist"):
                bufs = [dev.upload(v), dev.upload(np.zeros(8, u32)), dev.upload(np.zeros(1, u32))]
                sizes = [96, 8, 1]
            else:
                bufs = [dev.upload(np.zeros(1, u32)), dev.upload(np.ones(96, np.float32))]
                sizes = [1, 96]
            stats = dev.launch(prg, bufs, (3,), (32,))
            return (*[dev.download(b, k, u32) for b, k in zip(bufs, sizes)],
                    np.array([stats.wave_instructions, stats.lane_instructions]))
        finally:
            dev.close()
    fast, slow = _run_both(monkeypatch, run)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)


def test_words_at_notes_every_range_and_sees_unmapping():
    """Machine.words_at answers a range inside the ones it found last without the memory's
    look-up: the dispatch's noted ranges still cover every range asked for (merged, the same
    as noting each), a different access kind is noted on its own, and after a mapping changes
    the look-up runs again (an unmapped buffer is not read through a kept view)."""
    from runtime.drivers.mock.amd_hazards import RecordingMemory, merge
    from runtime.drivers.mock.memory import MockMemory
    mem = MockMemory()
    va = 0x10000
    mem.map(va, 0x1000)
    rec = RecordingMemory(mem)
    m = machine.Machine(rec, 1, 8, 1, 0)   # type: ignore[arg-type]
    asked = [(0, 128), (64, 64), (128, 128), (8, 4), (512, 16), (520, 4), (0, 256), (768, 64),
             (832, 64), (704, 64)]
    for off, size in asked:
        got = m.words_at(va + off, size, "read")
        assert got is not None and got[1] == off // 4
    assert merge(rec.ranges["read"]) == merge([(va + o, va + o + n) for o, n in asked])
    assert m.words_at(va + 8, 4, "atomic") is not None
    assert rec.ranges["atomic"] == [(va + 8, va + 12)]
    mem.unmap(va)
    assert m.words_at(va + 8, 4, "atomic") is None
    assert m.words_at(va, 4, "read") is None


# A float atomic add's retry loop in clang's shape (ops_mem.fadd_retry_rounds runs its rounds
# without its instructions): v_add_f32 of the compare value and the lane's v5 in either order,
# the swap returning into its data register (clang's) or into v4.
_FADD_LOOP = _RETRY_LOOP.replace("v_add_nc_u32 v2, v3, v5", "{add}").replace(
    "global_atomic_cmpswap_b32 v2, v1, v[2:3], s[4:5] glc", "{cas}").replace(
    "global_store_b32 v10, v8, s[0:1] offset:2048",
    "global_store_b32 v10, v8, s[0:1] offset:2048\nglobal_store_b32 v10, v4, s[0:1] offset:2560")
_FADD_FORMS = {
    "clang": ("v_add_f32 v2, v3, v5", "global_atomic_cmpswap_b32 v2, v1, v[2:3], s[4:5] glc",
              "v_cmp_eq_u32 vcc_lo, v2, v3\nv_mov_b32 v3, v2\ns_or_b32 s12, vcc_lo, s12\n"
              "s_and_not1_b32 exec_lo, exec_lo, s12"),
    "swapped_add": ("v_add_f32 v2, v5, v3",
                    "global_atomic_cmpswap_b32 v2, v1, v[2:3], s[4:5] glc",
                    "v_cmp_eq_u32_e64 s13, v3, v2\nv_mov_b32 v3, v2\ns_or_b32 s12, s12, s13\n"
                    "s_and_not1_b32 exec_lo, exec_lo, s12"),
    "own_dest": ("v_add_f32 v2, v3, v5", "global_atomic_cmpswap_b32 v4, v1, v[2:3], s[4:5] glc",
                 "v_cmp_eq_u32 vcc_lo, v4, v3\nv_mov_b32 v3, v4\ns_or_b32 s12, vcc_lo, s12\n"
                 "s_and_not1_b32 exec_lo, exec_lo, s12"),
}
# f32 bit patterns: ordinary values, zeros, denormals, the largest finite, inf and NaN
_F32_EDGES = [0, 0x80000000, 1, 0x007FFFFF, 0x00800000, 0x3F800000, 0xBF800000, 0x4B800000,
              0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0x7FC00001, 0x33800000]
_F32_BITS = st.one_of(st.sampled_from(_F32_EDGES), st.integers(0, 0xFFFFFFFF),
                      st.floats(-4.0, 4.0, width=32).map(
                          lambda v: int(np.array(v, f32).view(u32))))


@settings(max_examples=40, deadline=None)
@given(exec_mask=st.one_of(st.integers(0, 0xFFFFFFFF),
                          st.tuples(st.integers(0, 31), st.integers(1, 32)).map(
                              lambda t: ((1 << t[1]) - 1) << t[0] & 0xFFFFFFFF)),
       done=st.sampled_from([0, 0, 1, 0x00FF0000]), start=_F32_BITS,
       adds=st.one_of(st.lists(_F32_BITS, min_size=96, max_size=96),
                      _F32_BITS.map(lambda b: [b] * 96)),   # (all alike: sums that repeat)
       waves=st.sampled_from([1, 3]), form=st.sampled_from(sorted(_FADD_FORMS)),
       check_every=st.sampled_from([7, 64, 256]))
def test_float_add_retry_rounds_match_the_loop_run_as_instructions(
        exec_mask, done, start, adds, waves, form, check_every):
    """A float atomic add's retry loop run round by round without its instructions
    (interp.RetryLoop.fadd) ends as its instructions leave it: every register, VCC or the mask
    SGPR, DONE, SCC and the counter, the instruction and lane counts and the dispatch's
    pauses (a look at the clock every `check_every` instructions) are those of the loop run
    instruction by instruction, and the memory and counts those of the general path; including
    sums that leave the counter as it was (several lanes swap in one round), sums out of
    f32's range, NaN and inf, and lanes done before the loop."""
    from runtime.drivers.mock.rdna3 import interp
    from . import rdna3_device
    mp = pytest.MonkeyPatch()
    mp.setattr(interp, "CHECK_EVERY", check_every)
    add_i, cas_i, tail = _FADD_FORMS[form]
    code = assemble_labels(_FADD_LOOP.format(add=add_i, cas=cas_i, tail=tail, mask="vcc_lo"
                                             if "vcc_lo" in tail else "s13"))
    pauses: list[int] = []

    def paused(rec, mem, *, cache=None, max_wave_instructions=1 << 40):  # type: ignore[no-untyped-def]
        d = interp.Dispatch(rec, mem, cache=cache, max_wave_instructions=max_wave_instructions)
        while not d.advance(0.0):
            pauses.append(d.stats.wave_instructions)
        return d.stats

    mp.setattr(rdna3_device, "execute", paused)

    def run() -> tuple:  # type: ignore[type-arg]
        pauses.clear()
        dev = RawDevice()
        vo = dev.alloc(3072)
        va = dev.upload(np.array(adds[:32 * waves], u32))
        vm = dev.upload(np.array([start, exec_mask, done], u32))
        stats = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, va & 0xFFFFFFFF, va >> 32,
                                      vm & 0xFFFFFFFF, vm >> 32], (waves,), (32,),
                               max_wave_instructions=400_000)
        return (dev.download(vo, 768, u32).tolist(), int(dev.download(vm, 1, u32)[0]),
                stats.wave_instructions, stats.lane_instructions, list(pauses))
    try:
        fast = run()
        with mp.context() as m:
            m.setattr(interp, "_fadd_rounds", lambda *a: None)
            assert fast == run()
        assert fast[:4] == _run_both(mp, run)[1][:4]
    finally:
        mp.undo()


def test_float_add_retry_rounds_are_taken_in_clang_loops(monkeypatch):
    """clang's float atomic add (the benchmark's contended case) has the loop the rounds run
    for, and they run: fewer than one call of the swap per lane."""
    from runtime.drivers.amd import elf
    from runtime.drivers.mock.rdna3 import interp
    clang = Path(__file__).resolve().parent / "data" / "rdna3_real" / "clang"
    for name in ("float_atomic_add_O2", "float_atomic_add_O3"):
        co = elf.parse((clang / f"{name}.hsaco").read_bytes())
        (kernel,) = co.kernels.values()
        prog = interp.decode_program(co.image()[kernel.entry_vaddr:], kernel.entry_vaddr)
        (cas,) = [i for i, inst in enumerate(prog.insts) if "cmpswap" in inst.name]
        branch = next(i for i in range(cas, len(prog.insts))
                      if prog.insts[i].name == "s_cbranch_execnz")
        loop = interp.retry_loop(prog, cas, branch)
        assert loop is not None and loop.fadd is not None, name


_SCALAR_LOOP = """
s_mov_b32 s10, 0
s_mov_b32 s12, s8
s_mov_b32 s13, s9
v_mov_b32 v2, 0
loop:
{op} s14, s12, s13
{op2} s15, s13, {k}
s_cselect_b32 s16, 1, 2
{cmp} s14, s15
s_cselect_b32 s17, 4, 8
{cmp} s15, {k}
s_cselect_b32 s18, 16, 32
s_add_u32 s12, s12, s14
s_xor_b32 s13, s13, s15
v_xor_b32 v2, s16, v2
v_add_nc_u32 v2, s17, v2
v_xor_b32 v2, s18, v2
v_add_nc_u32 v2, s12, v2
v_xor_b32 v2, s13, v2
v_mul_lo_u32 v2, 0x9e3779b1, v2
s_add_i32 s10, s10, 1
s_cmp_lg_u32 s10, 4
s_cbranch_scc1 loop
"""
_SOP2 = ["s_add_i32", "s_sub_i32", "s_add_u32", "s_sub_u32", "s_and_b32", "s_or_b32",
         "s_xor_b32", "s_lshl_b32", "s_lshr_b32", "s_ashr_i32", "s_min_i32", "s_max_u32",
         "s_mul_i32", "s_lshl1_add_u32", "s_andn2_b32", "s_nor_b32"]
_SOPC = ["s_cmp_eq_u32", "s_cmp_lg_u32", "s_cmp_lt_i32", "s_cmp_ge_u32", "s_cmp_gt_i32",
         "s_cmp_le_u32", "s_bitcmp1_b32"]


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(_SOP2), op2=st.sampled_from(_SOP2), cmp=st.sampled_from(_SOPC),
       k=st.sampled_from(["0", "1", "-16", "31", "64", "0x80000000", "0x12345678"]),
       x=st.integers(0, 0xFFFFFFFF), y=st.integers(0, 0xFFFFFFFF))
def test_bound_scalar_ops_match_general_path(op, op2, cmp, k, x, y):
    """One wave's scalar ops bound in a loop's block (two SGPRs, an SGPR and a constant, and
    compares of both kinds: their SGPR row and SCC read and written through memoryviews) give
    the general path's SGPRs and SCC, seen through the VGPR each pass folds them into."""
    code = assemble_labels(PROLOGUE + _SCALAR_LOOP.format(op=op, op2=op2, cmp=cmp, k=k) +
                           EPILOGUE)
    xs, ys = np.full(32, x, u32), np.full(32, y, u32)

    def run() -> tuple[np.ndarray, int, int]:
        dev = RawDevice()
        vo = dev.alloc(4 * 32)
        vx, vy = dev.upload(xs), dev.upload(ys)
        st_ = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32,
                                    vy & 0xFFFFFFFF, vy >> 32], (1,), (32,))
        return dev.download(vo, 32, u32), st_.wave_instructions, st_.lane_instructions
    (fast, fw, fl), (slow, sw, sl) = _run_both(pytest.MonkeyPatch(), run)
    np.testing.assert_array_equal(fast, slow)
    assert (fw, fl) == (sw, sl)


_GLOBAL_LOOP = """
v_lshlrev_b32 v10, 2, v0
v_mul_lo_u32 v4, {stride}, v0
v_add_nc_u32 v4, {bias}, v4
s_mov_b32 s10, 0
v_mov_b32 v2, 0
v_mov_b32 v11, 0
loop:
v_and_b32 v5, {mask}, v4
global_load_b32 v6, v5, s[2:3]
global_load_{wide} v[7:{last}], v5, s[2:3] offset:{imm}
s_waitcnt vmcnt(0)
v_dual_mov_b32 v12, v2 :: v_dual_mov_b32 v13, v7
v_add3_u32 v2, v12, v13, v8
v_xor_b32 v11, v11, v6
v_add_nc_u32 v4, {step}, v4
s_add_i32 s10, s10, 1
s_cmp_lg_u32 s10, {rounds}
s_cbranch_scc1 loop
v_xor_b32 v2, v2, v11
global_store_b32 v10, v2, s[0:1]
s_endpgm
"""


@settings(max_examples=40, deadline=None)
@given(stride=st.sampled_from([0, 1, 2, 4, 12, 128]), bias=st.integers(0, 40),
       step=st.sampled_from([0, 3, 4, 128, 0x400]),
       mask=st.sampled_from([0x7FC, 0xFFF, 0xFFC, 0x1FFC, 0xFFFFFFFF]),
       wide=st.sampled_from(["b64", "b96", "b128"]), imm=st.sampled_from([0, 4, 6, 64]),
       rounds=st.sampled_from([3, 40]))
def test_one_wave_global_loads_in_a_loop_match_general_path(stride, bias, step, mask, wide,
                                                            imm, rounds):
    """One-wave GLOBAL loads in a loop whose offsets move, wrap, go misaligned or leave the
    buffer: from their second round on they gather over the range their last look-up noted
    (Machine.noted_dwords) and look it up again where an offset leaves it; the same registers,
    counts and faults as the general path (a VOPD pair of moves bound in the same loop)."""
    last = 7 + {"b64": 1, "b96": 2, "b128": 3}[wide]
    code = assemble_labels(_GLOBAL_LOOP.format(stride=stride, bias=bias, step=step, mask=mask,
                                               wide=wide, last=last, imm=imm, rounds=rounds))
    words = (np.arange(0x1000 // 4, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(u32)

    def run() -> tuple:  # type: ignore[type-arg]
        dev = RawDevice()
        vo, vx = dev.alloc(128), dev.upload(words)
        try:
            got = dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32],
                                 (1,), (32,))
        except KernelFault as e:
            return ("fault", str(e))
        return dev.download(vo, 32, u32).tolist(), got.wave_instructions, got.lane_instructions
    fast, slow = _run_both(pytest.MonkeyPatch, run)   # (a fresh patch per example)
    assert fast == slow


_SCRATCH_FORMS = """
v_lshlrev_b32 v10, 2, v0
v_mul_lo_u32 v4, {stride}, v0
v_add_nc_u32 v4, {bias}, v4
s_mov_b32 s10, 0
v_mov_b32 v2, 0
loop:
v_add_nc_u32 v5, s10, v0
v_xor_b32 v6, 0x55, v5
v_mul_hi_u32 v7, 0x9e3779b1, v5
v_mul_hi_i32 v8, 0xc2b2ae35, v6
scratch_store_{wide} v4, v[5:{last}], off offset:{imm}
s_waitcnt vmcnt(0)
scratch_load_{wide} v[12:{last2}], v4, off offset:{imm}
scratch_load_b32 v4, v4, off offset:{imm}
s_waitcnt vmcnt(0)
v_add3_u32 v2, v2, v12, v{last2}
v_add3_u32 v2, v2, v4, v8
v_mul_lo_u32 v4, {stride}, v0
v_add_nc_u32 v4, {bias}, v4
v_add_nc_u32 v4, s11, v4
s_add_i32 s11, s11, {step}
s_add_i32 s10, s10, 1
s_cmp_lg_u32 s10, 6
s_cbranch_scc1 loop
global_store_b32 v10, v2, s[0:1]
s_endpgm
"""


@settings(max_examples=40, deadline=None)
@given(stride=st.sampled_from([0, 4, 8, 16, 2]), bias=st.sampled_from([0, 4, 8, 1, -4]),
       step=st.sampled_from([0, 4, 8, 16]), wide=st.sampled_from(["b32", "b64", "b128"]),
       imm=st.sampled_from([0, 4, 8]))
def test_one_wave_scratch_forms_match_general_path(stride, bias, step, wide, imm):
    """One-wave scratch loads and stores of one, two and four dwords (one fancy index over the
    wave's slot each), the address VGPR among a load's destinations, offsets that go
    misaligned, negative or past the 64 bytes each lane has, beside v_mul_hi by constants: the
    same registers, counts and faults as the general path."""
    ndw = {"b32": 1, "b64": 2, "b128": 4}[wide]
    code = assemble_labels("s_mov_b32 s11, 0\n" + _SCRATCH_FORMS.format(
        stride=stride, bias=bias & 0xFFFFFFFF, step=step, wide=wide, last=5 + ndw - 1,
        last2=12 + ndw - 1, imm=imm))
    fast, slow = _run_both(pytest.MonkeyPatch,   # (a fresh patch per example)
                           lambda: _run_with_scratch(code))
    assert fast == slow


def test_one_wave_load_looks_up_again_after_the_mapping_changes(monkeypatch):
    """A one-wave load in a loop gathers over the range it noted while the memory's mappings
    stay as they were; once the buffer is unmapped between two time slices of the dispatch
    (and mapped again with other bytes), the next load reads the new mapping, as the general
    path does; unmapped for good, it faults."""
    from runtime.drivers.mock.rdna3 import interp
    from . import rdna3_device
    code = assemble_labels("""
    v_lshlrev_b32 v10, 2, v0
    v_mov_b32 v2, 0
    s_mov_b32 s10, 0
    loop:
    global_load_b32 v6, v10, s[2:3]
    s_waitcnt vmcnt(0)
    v_add_nc_u32 v2, v2, v6
    s_add_i32 s10, s10, 1
    s_cmp_lg_u32 s10, 400
    s_cbranch_scc1 loop
    global_store_b32 v10, v2, s[0:1]
    s_endpgm
    """)
    monkeypatch.setattr(interp, "CHECK_EVERY", 64)
    words = np.arange(32, dtype=u32) + u32(1)

    def run(remap: bool) -> object:
        dev = RawDevice()
        vo, vx = dev.alloc(128), dev.upload(words)
        slices = []

        def sliced(rec, mem, *, cache=None, max_wave_instructions=1 << 40):  # type: ignore[no-untyped-def]
            d = interp.Dispatch(rec, mem, cache=cache,
                                max_wave_instructions=max_wave_instructions)
            while not d.advance(0.0):
                slices.append(d.stats.wave_instructions)
                if len(slices) == 10:   # (inside the loop, its loads bound by now)
                    mem.unmap(vx)
                    if remap:
                        mem.map(vx, 4096)[:128] = (words * u32(1000)).view(np.uint8)
            return d.stats
        with monkeypatch.context() as m:
            m.setattr(rdna3_device, "execute", sliced)
            try:
                dev.launch_raw(code, [vo & 0xFFFFFFFF, vo >> 32, vx & 0xFFFFFFFF, vx >> 32],
                               (1,), (32,))
            except KernelFault as e:
                return ("fault", str(e).split(":")[0])
        assert len(slices) > 10
        return dev.download(vo, 32, u32).tolist()
    for remap in (True, False):
        fast, slow = _run_both(monkeypatch, lambda: run(remap))
        assert fast == slow
        if remap:
            assert fast != (words * u32(400)).tolist()   # the new bytes were read
        else:
            assert fast[0] == "fault"
