"""A dispatch's set-up in the RDNA3 interpreter: machines kept between dispatches of one shape,
the initial wave state kept per layout, and what a dispatch records about memory.

Every wave must start as on a new machine (VGPRs, SGPRs, SCC and LDS zero but for the state the
ABI loads), whatever the dispatch before it on a kept machine left behind; the kept initial
state must equal the one written register by register for large batches.
"""
from __future__ import annotations

import shutil
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runtime.drivers.mock.amd_hazards import QueueOrdering, RecordingMemory
from runtime.drivers.mock.memory import MockMemory
from runtime.drivers.mock.rdna3 import Dispatch, DispatchRecord, interp
from runtime.drivers.mock.rdna3 import machine as machine_mod
from runtime.drivers.mock.rdna3.machine import Machine

from .rdna3_device import RawDevice
from .test_rdna3_isa import assemble as assemble_once

needs_mc = pytest.mark.skipif(shutil.which("llvm-mc-16") is None,
                              reason="llvm-mc-16 (Debian llvm-16) assembles these tests")

VGPRS = 48
LDS_B = 256
N_EXTRA = 9          # user SGPRs s3..s11 carry test values; s12 is the workgroup id
RECORD_DW = 16       # dwords each lane records

# Leaves something in every kind of state a kept machine carries over: VGPRs, SGPRs past the
# ones the ABI loads, SCC and LDS.
DIRTY = """
v_mov_b32 v5, 0x1234
v_mov_b32 v7, -1
s_mov_b32 s20, 0x55
s_mov_b32 s13, 0x77
v_mov_b32 v46, 0
v_mov_b32 v47, 0xabcd
ds_store_b32 v46, v47
s_waitcnt lgkmcnt(0)
s_cmp_eq_u32 0, 0
s_endpgm
"""

# Records, per lane, its state at the start: v0, v5, v7, s20, s13, SCC, the first LDS word,
# then the user SGPRs s3..s11. s[0:1] point to the output, s2 holds the workgroup's size.
RECORD = """
v_mov_b32 v41, v5
v_mov_b32 v42, v7
v_mov_b32 v43, s20
v_mov_b32 v44, s13
s_cselect_b32 s31, 1, 0
v_mov_b32 v45, s31
v_mov_b32 v46, 0
ds_load_b32 v47, v46
v_mov_b32 v30, s3
v_mov_b32 v31, s4
v_mov_b32 v32, s5
v_mov_b32 v33, s6
v_mov_b32 v34, s7
v_mov_b32 v35, s8
v_mov_b32 v36, s9
v_mov_b32 v37, s10
v_mov_b32 v38, s11
s_waitcnt lgkmcnt(0)
s_mul_i32 s30, s12, s2
v_add_nc_u32 v40, s30, v0
v_lshlrev_b32 v40, 6, v40
global_store_b32 v40, v0, s[0:1]
global_store_b32 v40, v41, s[0:1] offset:4
global_store_b32 v40, v42, s[0:1] offset:8
global_store_b32 v40, v43, s[0:1] offset:12
global_store_b32 v40, v44, s[0:1] offset:16
global_store_b32 v40, v45, s[0:1] offset:20
global_store_b32 v40, v47, s[0:1] offset:24
global_store_b32 v40, v30, s[0:1] offset:28
global_store_b32 v40, v31, s[0:1] offset:32
global_store_b32 v40, v32, s[0:1] offset:36
global_store_b32 v40, v33, s[0:1] offset:40
global_store_b32 v40, v34, s[0:1] offset:44
global_store_b32 v40, v35, s[0:1] offset:48
global_store_b32 v40, v36, s[0:1] offset:52
global_store_b32 v40, v37, s[0:1] offset:56
global_store_b32 v40, v38, s[0:1] offset:60
s_endpgm
"""


# the examples assemble the same programs again and again
assemble = lru_cache(maxsize=None)(assemble_once)


def _launch(dev: RawDevice, code: str, out: int, block_x: int, grid_x: int, wave64: bool,
            extra: tuple[int, ...]) -> None:
    user = (out & 0xFFFFFFFF, out >> 32, block_x) + extra
    dev.launch_raw(assemble(code), user, (grid_x,), (block_x,), vgprs=VGPRS, lds_bytes=LDS_B,
                   wave64=wave64)


def _record_after(dirty_first: bool, block_x: int, grid_x: int, wave64: bool,
                  extra: tuple[int, ...]) -> np.ndarray:
    """What RECORD sees at its start, on a device whose last dispatch of the same shape was
    DIRTY (`dirty_first`) or with no machine kept (uint32 [lanes, RECORD_DW])."""
    machine_mod._POOL.clear()
    dev = RawDevice()
    lanes = grid_x * block_x
    out = dev.alloc(lanes * RECORD_DW * 4)
    if dirty_first:
        _launch(dev, DIRTY, out, block_x, grid_x, wave64, extra)
        assert machine_mod._POOL, "the finished dispatch's machine was not kept"
    _launch(dev, RECORD, out, block_x, grid_x, wave64, extra)
    return dev.download(out, lanes * RECORD_DW, np.uint32).reshape(lanes, RECORD_DW)


def _expected(block_x: int, grid_x: int, extra: tuple[int, ...]) -> np.ndarray:
    want = np.zeros((grid_x * block_x, RECORD_DW), np.uint32)
    want[:, 0] = np.tile(np.arange(block_x), grid_x)       # v0: the work-item id
    want[:, 7:] = [u & 0xFFFFFFFF for u in extra]           # the user SGPRs, 32 bits each
    return want


extras = st.tuples(*[st.one_of(st.just(0), st.integers(1, 2**32 - 1),
                               st.integers(2**32, 2**40)) for _ in range(N_EXTRA)])


@needs_mc
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_x=st.integers(1, 64), grid_x=st.integers(1, 3), wave64=st.booleans(),
       extra=extras)
# a few user SGPRs set (written one by one) and all of them set (written as one column), with
# values wider than 32 bits among them
@example(block_x=32, grid_x=1, wave64=False, extra=(2**36 + 5, 0, 0, 0, 0, 0, 0, 0, 7))
@example(block_x=64, grid_x=2, wave64=True, extra=(1, 2, 3, 2**40 + 4, 5, 6, 7, 8, 2**32 - 1))
def test_a_kept_machine_starts_as_a_new_one(block_x: int, grid_x: int, wave64: bool,
                                            extra: tuple[int, ...]) -> None:
    """Whatever a dispatch left in its machine's registers, SCC and LDS, the next dispatch of
    the same shape on that machine starts with the ABI's state only."""
    want = _expected(block_x, grid_x, extra)
    np.testing.assert_array_equal(_record_after(False, block_x, grid_x, wave64, extra), want)
    np.testing.assert_array_equal(_record_after(True, block_x, grid_x, wave64, extra), want)


@needs_mc
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block_x=st.integers(1, 64), grid_x=st.integers(1, 3), wave64=st.booleans(),
       extra=extras)
def test_kept_initial_state_equals_the_one_written_register_by_register(
        block_x: int, grid_x: int, wave64: bool, extra: tuple[int, ...]) -> None:
    """Small batches start from a kept copy of their initial state; large ones have it written
    register by register: both give the same waves."""
    kept = _record_after(True, block_x, grid_x, wave64, extra)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(interp, "START_KEPT_MAX_WAVES", 0)
        written = _record_after(True, block_x, grid_x, wave64, extra)
    np.testing.assert_array_equal(kept, written)


S_ENDPGM = (0xBFB00000).to_bytes(4, "little")
S_NOP = (0xBF800000).to_bytes(4, "little")   # s_nop 0


def _empty_kernel(mem: MockMemory, va: int = 0x10000) -> DispatchRecord:
    mem.map(va, 0x1000)
    mem.write(va, S_ENDPGM)
    return DispatchRecord(va, rsrc1=0, rsrc2=2 << 1 | 1 << 7, rsrc3=0,
                          user_sgprs=(0x1000, 0x10), grid=(1, 1, 1), block=(32, 1, 1),
                          lds_bytes=0)


def test_an_empty_kernel_records_no_memory_access() -> None:
    """Revalidating the decoded program against memory is an instruction fetch: a dispatch
    that runs only s_endpgm records no read, even the second time (a kept program)."""
    mem = MockMemory()
    rec = _empty_kernel(mem)
    cache = interp.ProgramCache()
    for _ in range(2):
        rm = RecordingMemory(mem)
        assert Dispatch(rec, rm, cache=cache).advance()   # type: ignore[arg-type]
        assert rm.ranges == {"read": [], "write": [], "atomic": []} and not rm.unbounded


def test_a_dispatch_that_touched_nothing_is_numbered_but_not_kept() -> None:
    order = QueueOrdering()
    mem = MockMemory()
    mem.map(0x2000, 0x1000)
    order.dispatched(0x100, "ring dword 0", RecordingMemory(mem))
    assert order.seq == 1 and order.running == []
    touched = RecordingMemory(mem)
    touched.read(0x2000, 4)
    order.dispatched(0x100, "ring dword 9", touched)
    assert order.seq == 2 and [d.seq for d in order.running] == [2]


def test_a_kept_machine_holds_no_memory() -> None:
    """A machine given back keeps no reference to the memory it ran on (nor views of it)."""
    machine_mod._POOL.clear()
    mem = MockMemory()
    rec = _empty_kernel(mem)
    mem.write(rec.pgm_addr, S_NOP + S_ENDPGM)   # (a lone s_endpgm builds no waves)
    run = Dispatch(rec, mem)
    assert run.advance() and run.machine is None
    (kept,) = [m for ms in machine_mod._POOL.values() for m in ms]
    assert not hasattr(kept, "mem") and kept._words == {} and kept.scratch is None
    again = Machine.take(mem, kept.n_waves, kept.n_vgprs, 1, kept.lds_bytes)
    assert again is kept and again.mem is mem


def test_only_small_machines_are_kept() -> None:
    machine_mod._POOL.clear()
    mem = MockMemory()
    big = Machine.take(mem, 64, 256, 2, 0)   # 64 waves of 256 VGPRs: 2 MiB of registers
    big.give_back()
    assert machine_mod._POOL == {}


def test_a_record_with_other_user_data_equals_a_new_one() -> None:
    rec = DispatchRecord(0x1000, 1, 2, 3, (4, 5), (1, 2, 3), (32, 1, 1), 256, 0x9000,
                         scratch_wave_B=512, scratch_slots=8, wave64=True)
    other = rec.with_user((6, 7, 8))
    assert other == DispatchRecord(0x1000, 1, 2, 3, (6, 7, 8), (1, 2, 3), (32, 1, 1), 256,
                                   0x9000, scratch_wave_B=512, scratch_slots=8, wave64=True)
    assert rec.user_sgprs == (4, 5) and hash(other) == hash(rec.with_user((6, 7, 8)))


def _stats_of(rec: DispatchRecord, mem: MockMemory, general: bool) -> tuple[int, ...]:
    with pytest.MonkeyPatch.context() as m:
        if general:
            m.setattr(Dispatch, "_end_at_entry", lambda self: False)
        run = Dispatch(rec, mem, cache=interp.ProgramCache())
        assert run.advance() and run.describe() == "no waves running"
    s = run.stats
    return s.waves, s.workgroups, s.wave_instructions, s.lane_instructions


@settings(max_examples=60, deadline=None)
@given(grid=st.tuples(st.integers(0, 5), st.integers(1, 3), st.integers(1, 2)),
       block=st.tuples(st.integers(1, 70), st.integers(1, 4), st.integers(1, 3)),
       wave64=st.booleans(), lds=st.sampled_from([0, 512]))
@example(grid=(130, 1, 1), block=(1024, 1, 1), wave64=False, lds=0)   # two batches
def test_a_lone_s_endpgm_runs_as_its_waves_would(grid: tuple[int, int, int],
                                                 block: tuple[int, int, int], wave64: bool,
                                                 lds: int) -> None:
    """A dispatch of a program that starts with s_endpgm builds no waves when its workgroups
    fit one batch; what it reports (waves, workgroups, wave- and lane-instructions) is what
    the waves run one by one report."""
    mem = MockMemory()
    rec = _empty_kernel(mem)
    rec = DispatchRecord(rec.pgm_addr, 0, rec.rsrc2, 0, rec.user_sgprs, grid, block, lds,
                         wave64=wave64)
    taken: list[int] = []
    take = Machine.take.__func__   # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Machine, "take", classmethod(lambda cls, *a, **k: taken.append(1) or
                                               take(cls, *a, **k)))
        fast = _stats_of(rec, mem, general=False)
    one_batch = grid[0] * grid[1] * grid[2] <= interp._batches(interp.Layout.of(rec), rec)
    assert (not taken) == (one_batch or 0 in grid)   # no machine taken for its waves
    assert fast == _stats_of(rec, mem, general=True)


def test_a_lone_s_endpgm_still_needs_scratch_slots_for_a_workgroup() -> None:
    """What the dispatch's set-up refuses is refused without waves too."""
    mem = MockMemory()
    base = _empty_kernel(mem)
    rec = DispatchRecord(base.pgm_addr, 0, base.rsrc2 | 1, 0, base.user_sgprs, (1, 1, 1),
                         (256, 1, 1), 0, scratch_va=0x10000, scratch_wave_B=256,
                         scratch_slots=2)
    with pytest.raises(interp.KernelFault, match="scratch slots"):
        Dispatch(rec, mem, cache=interp.ProgramCache()).advance()
