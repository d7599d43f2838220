"""Hand-written OpenCL C kernels at every clang-16 -O level (-O0, -O1, -O2, -O3, -Os) in wave32
and wave64, from the committed code objects tests/runtime/data/rdna3_real/clang/
NAME_{w32,w64}_O?.hsaco (built by build.py there), run through the AMD runtime on the mock GPU
and checked against numpy:
  cas_hist       compare-and-swap retry loops (global_atomic_cmpswap_b32 with return) under
                 contention, across both halves of a wave64
  call_helper    s_swappc_b64 into a function the linker placed before the kernel's entry
  bpermute_scan  ds_bpermute_b32 across the whole wave (a prefix sum and a reversal)
  xlane_ops      v_permlane64_b32, ds_swizzle_b32 (bit-mask and quad-permute modes) and
                 ds_append / ds_consume, with every lane active and with inactive ones
and the static audit over the same files (functions before the entry, per-function ranges).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from runtime.drivers.amd import elf
from runtime.drivers.mock.rdna3.audit import audit, functions, main as audit_main
from runtime.drivers.mock.rdna3.decode import decode_one
from .rdna3_device import ArrayDevice

CLANG = Path(__file__).resolve().parent / "data" / "rdna3_real" / "clang"
BUILDS = [(w, o) for w in ("w32", "w64") for o in ("O0", "O1", "O2", "O3", "Os")]
IDS = [f"{w}-{o}" for w, o in BUILDS]
f32, i32, u32 = np.float32, np.int32, np.uint32


def code(name: str, wave: str, opt: str) -> bytes:
    return (CLANG / f"{name}_{wave}_{opt}.hsaco").read_bytes()


@pytest.fixture
def dev():  # type: ignore[no-untyped-def]
    d = ArrayDevice()
    yield d
    d.close()


@pytest.mark.parametrize(("wave", "opt"), BUILDS, ids=IDS)
@pytest.mark.parametrize("lanes", [33, 160])
def test_cas_loops_under_contention(dev, wave, opt, lanes):
    """Every lane's increment is a compare-and-swap loop on one of 8 bins, and every lane adds
    1.0 to one float through a loop on its bits: lanes of one wave and of several waves race,
    in both halves of a wave64 (33 lanes: one wave64 with a single lane in its upper half)."""
    rng = np.random.default_rng(lanes)
    v = rng.integers(0, 1 << 20, lanes).astype(u32)
    prg = dev.d.program(code("cas_hist", wave, opt), "cas_hist")
    hist, total = dev.put(np.zeros(8, u32)), dev.put(np.zeros(1, f32))
    block = 33 if lanes == 33 else 32
    prg(dev.put(v), hist, total, global_size=(lanes // block, 1, 1),
        local_size=(block, 1, 1), wait=True)
    np.testing.assert_array_equal(dev.get(hist, 8, u32), np.bincount(v & 7, minlength=8))
    assert dev.get(total, 1, f32)[0] == lanes


def _poly(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """poly(x, k) of call_helper.cl, each step rounded once or (where clang contracts the
    multiply-add) fused: both are returned for the comparison."""
    sep, fused = np.zeros_like(x), np.zeros_like(x)
    for j in range(4):
        on = j <= k
        c = np.float32(j + 1)
        sep = np.where(on, (sep * x).astype(f32) + c, sep).astype(f32)
        fused = np.where(on, (fused.astype(np.float64) * x + c).astype(f32), fused)
    return np.stack([sep + f32(0.5), fused + f32(0.5)])


@pytest.mark.parametrize(("wave", "opt"), BUILDS, ids=IDS)
def test_call_into_a_function_before_the_entry(dev, wave, opt):
    co = code("call_helper", wave, opt)
    parsed = elf.parse(co)
    helper, kernel = parsed.symbols["poly"], parsed.kernels["call_helper"]
    assert helper.value < kernel.entry_vaddr   # what the test is about: the callee comes first
    n = 256
    x = np.random.default_rng(3).standard_normal(n).astype(f32)
    prg = dev.d.program(co, "call_helper")
    out = dev.put(np.zeros(n, f32))
    prg(dev.put(x), out, global_size=(n // 64, 1, 1), local_size=(64, 1, 1), wait=True)
    got = dev.get(out, n, f32)
    want = _poly(x, np.arange(n) & 3)
    assert ((got == want[0]) | (got == want[1])).all()


@pytest.mark.parametrize(("wave", "opt"), BUILDS, ids=IDS)
def test_bpermute_across_the_whole_wave(dev, wave, opt):
    w = 64 if wave == "w64" else 32
    n = 256
    x = np.random.default_rng(5).integers(-1000, 1000, n).astype(i32)
    prg = dev.d.program(code("bpermute_scan", wave, opt), "bpermute_scan")
    scan, rev = dev.put(np.zeros(n, i32)), dev.put(np.zeros(n, i32))
    prg(dev.put(x), scan, rev, global_size=(n // 128, 1, 1), local_size=(128, 1, 1), wait=True)
    np.testing.assert_array_equal(dev.get(scan, n, i32), np.cumsum(x.reshape(-1, w), 1).ravel())
    np.testing.assert_array_equal(dev.get(rev, n, i32), x.reshape(-1, w)[:, ::-1].ravel())


def test_bpermute_with_inactive_lanes_in_wave64(dev):
    """48 of 64 lanes active: lanes that read an inactive lane get 0 (the reversal reads lanes
    63..16, so lanes 0-15 read inactive ones; the scan only reads lanes below)."""
    x = np.arange(1, 49, dtype=i32)
    prg = dev.d.program(code("bpermute_scan", "w64", "O2"), "bpermute_scan")
    scan, rev = dev.put(np.zeros(48, i32)), dev.put(np.zeros(48, i32))
    prg(dev.put(x), scan, rev, global_size=(1, 1, 1), local_size=(48, 1, 1), wait=True)
    np.testing.assert_array_equal(dev.get(scan, 48, i32), np.cumsum(x))
    src = 63 - np.arange(48)
    want_rev = np.where(src < 48, x[np.minimum(src, 47)], 0)
    np.testing.assert_array_equal(dev.get(rev, 48, i32), want_rev)


@pytest.mark.parametrize(("wave", "opt"), BUILDS, ids=IDS)
def test_dynamic_lds_from_the_launch(dev, wave, opt):
    """A __local pointer argument: the launch gives the LDS (dynamic_lds_B) and passes the
    pointer as its offset in the workgroup's LDS (0: the kernel has no static LDS)."""
    co = code("dyn_lds", wave, opt)
    assert elf.parse(co).kernels["dyn_lds"].group_segment_size == 0
    block, n_wg = 128, 6
    x = np.random.default_rng(9).integers(-50, 50, block * n_wg).astype(f32)
    prg = dev.d.program(co, "dyn_lds", dynamic_lds_B=4 * block)
    out = dev.put(np.zeros(n_wg, f32))
    prg(dev.put(x), out, 0, global_size=(n_wg, 1, 1), local_size=(block, 1, 1), wait=True)
    np.testing.assert_array_equal(dev.get(out, n_wg, f32), x.reshape(n_wg, block).sum(1))


def _counter_ok(got: np.ndarray, took: np.ndarray, wave_of: np.ndarray, start: int, sign: int
                ) -> int:
    """ds_append/ds_consume results of one workgroup: every wave whose lanes took part returns
    one value to all of them, the counter before its add of its lane count; the hardware may
    take the waves in any order, so sorted by that value each must follow the ones before.
    Returns the counter after all of them."""
    counts, values = [], []
    for w in np.unique(wave_of[took]):
        lanes = took & (wave_of == w)
        vals = np.unique(got[lanes])
        assert len(vals) == 1, (w, vals)
        counts.append(int(lanes.sum()))
        values.append(int(vals[0]))
    cur = start
    for v, k in sorted(zip(values, counts), key=lambda vk: sign * vk[0]):
        assert v == cur
        cur += sign * k
    assert (got[~took] == -1).all()
    return cur


@pytest.mark.parametrize(("wave", "opt"), BUILDS, ids=IDS)
@pytest.mark.parametrize("block", [128, 80])
def test_cross_lane_ops_across_the_whole_wave(dev, wave, opt, block):
    """v_permlane64_b32 (lane i reads lane i ^ 32 in wave64), ds_swizzle_b32
    within each 32-lane half (inactive source lanes give 0) and ds_append/ds_consume counters
    in LDS, against numpy. block 80: a wave with inactive lanes (wave64: its upper half)."""
    w = 64 if wave == "w64" else 32
    n_wg = 3
    n = block * n_wg
    x = np.random.default_rng(block).integers(0, 1 << 16, n).astype(i32)
    prg = dev.d.program(code("xlane_ops", wave, opt), "xlane_ops")
    outs = [dev.put(np.zeros(n, i32)) for _ in range(5)]
    counts = dev.put(np.zeros(2 * n_wg, i32))
    prg(dev.put(x), *outs, counts, global_size=(n_wg, 1, 1), local_size=(block, 1, 1),
        wait=True)
    perm, swz_x, swz_q, app, con = (dev.get(o, n, i32) for o in outs)
    final = dev.get(counts, 2 * n_wg, i32)
    lid = np.arange(block)
    wave_of, lane = lid // w, lid % w
    for g in range(n_wg):
        v = x[g * block:(g + 1) * block]
        part = slice(g * block, (g + 1) * block)

        def read(src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(the value lane `src` of each lane's wave holds, whether that lane is active)"""
            at = wave_of * w + src
            live = at < block
            return np.where(live, v[np.minimum(at, block - 1)], 0), live

        if w == 64:
            want, live = read(lane ^ 32)
            np.testing.assert_array_equal(perm[part][live], want[live])
        # (wave32: clang-16 still emits v_permlane64_b32, which the hardware executes as a NOP,
        # so the stored value is whatever its destination VGPR held: nothing to compare)
        np.testing.assert_array_equal(swz_x[part], read(lane ^ 1)[0])
        np.testing.assert_array_equal(swz_q[part], read((lane & ~3) | (3 - (lane & 3)))[0])
        assert final[2 * g] == _counter_ok(app[part], (v & 1) != 0, wave_of, 0, 1)
        assert final[2 * g + 1] == _counter_ok(con[part], (v & 2) != 0, wave_of, 1000, -1)


# -- the audit ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("wave", "opt"), BUILDS, ids=IDS)
@pytest.mark.parametrize("name", ["bpermute_scan", "call_helper", "cas_hist", "dyn_lds",
                                  "xlane_ops"])
def test_audit_is_clean_on_every_build(name, wave, opt):
    assert audit(code(name, wave, opt)) == []


def _spoil_one(co: bytes, fn: str) -> tuple[bytes, int]:
    """The code object with one 4-byte instruction of function `fn` replaced by an opcode gfx11
    does not have (SOPC op 127); and that instruction's address."""
    parsed = elf.parse(co)
    image = parsed.image()
    f = next(f for f in functions(parsed) if f.name == fn)
    pos = f.start
    while pos < f.end:
        inst = decode_one(image, pos, pos)
        if inst.size == 4 and inst.name not in ("s_setpc_b64", "s_endpgm"):
            break
        pos += inst.size
    off, va, _, _ = next(seg for seg in parsed.loads if seg[1] <= pos < seg[1] + seg[2])
    out = bytearray(co)
    out[off + pos - va:off + pos - va + 4] = (0xBF7F0000).to_bytes(4, "little")
    return bytes(out), pos


@pytest.mark.parametrize("opt", ["O0", "O2"])
def test_audit_charges_code_before_the_entry_to_its_function(opt):
    spoiled, at = _spoil_one(code("call_helper", "w32", opt), "poly")
    found = audit(spoiled)
    assert [(u.function, u.address) for u in found] == [("poly", at)]
    assert "unknown instruction" in found[0].reason


def test_audit_charges_each_kernel_its_own_code():
    """Two kernels in one code object (the clang build of two files' worth of kernels): an
    instruction of the first is reported once, for the first, not again for the second."""
    from runtime.drivers.amd.compiler import AMDCompiler
    if AMDCompiler().available():
        pytest.skip(AMDCompiler().available() or "")
    src = """
__kernel void first(__global int *o) { o[get_global_id(0)] = 1; }
__kernel void second(__global int *o) { o[get_global_id(0)] = 2; }
"""
    co = AMDCompiler().compile(src)
    fns = {f.name: f for f in functions(elf.parse(co))}
    assert set(fns) == {"first", "second"} and fns["first"].end <= fns["second"].start
    for victim in ("first", "second"):
        spoiled, at = _spoil_one(co, victim)
        assert [(u.function, u.address) for u in audit(spoiled)] == [(victim, at)]


def test_audit_exit_status(tmp_path, capsys):
    clean = CLANG / "call_helper_w32_O0.hsaco"
    spoiled = tmp_path / "spoiled.hsaco"
    spoiled.write_bytes(_spoil_one(clean.read_bytes(), "poly")[0])
    assert audit_main([str(clean)]) == 0
    assert audit_main([str(spoiled)]) == 1
    assert "poly+0x" in capsys.readouterr().out
    truncated = tmp_path / "truncated.hsaco"
    truncated.write_bytes(clean.read_bytes()[:300])     # headers point past the end
    garbage = tmp_path / "garbage.hsaco"
    garbage.write_bytes(clean.read_bytes()[:64] + bytes(range(256)) * 8)
    for bad in (truncated, garbage, tmp_path / "missing.hsaco", tmp_path):
        assert audit_main([str(bad), str(spoiled)]) == 2, bad
        out = capsys.readouterr()
        assert f"{bad}: cannot audit" in out.err and "Traceback" not in out.err
        assert "1 unsupported instruction(s)" in out.out   # the other file is still audited


def test_contended_cas_splits_the_waves_once(monkeypatch):
    """The scheduler looks at a contended compare-and-swap's addresses when a group of several
    waves reaches it, then runs the waves one after another: 16 waves hitting two addresses
    cost a few looks, not one per wave (each look scans every lane, so that was quadratic)."""
    from runtime.drivers.mock.rdna3 import interp

    from .rdna3_device import DriverDevice
    looks = 0
    real = interp.flat_contention

    def counting(inst):  # type: ignore[no-untyped-def]
        check = real(inst)

        def contended(g):  # type: ignore[no-untyped-def]
            nonlocal looks
            looks += 1
            return check(g)
        return contended
    monkeypatch.setattr(interp, "flat_contention", counting)
    dev = DriverDevice()
    try:
        n = 512
        v = np.arange(n, dtype=u32)
        prg = dev.load(code("cas_hist", "w32", "O2"), "cas_hist")
        hist, total = dev.upload(np.zeros(8, u32)), dev.upload(np.zeros(1, f32))
        dev.interpret(prg, [dev.upload(v), hist, total], (n // 256,), (256,))
        np.testing.assert_array_equal(dev.download(hist, 8, u32), np.full(8, n // 8))
        assert dev.download(total, 1, f32)[0] == n
    finally:
        dev.close()
    assert 1 <= looks <= 4, looks
