"""Faults stop the dispatch with an error that names the instruction, its address and the cause."""
from __future__ import annotations

import numpy as np
import pytest

from runtime.drivers.mock.memory import MockMemory, PageFault
from runtime.drivers.mock.rdna3 import DispatchRecord, KernelFault, PageFaultError, execute

from .rdna3_device import DriverDevice, RawDevice
from .rdna3_util import compiled, needs_compiler, reference

S_ENDPGM, S_NOP, S_BRANCH_SELF, S_TRAP = 0xBFB00000, 0xBF800000, 0xBFA0FFFF, 0xBF900002


def words(*ws: int) -> bytes:
    return b"".join(w.to_bytes(4, "little") for w in ws)


@pytest.fixture
def dev():  # type: ignore[no-untyped-def]
    """Code objects: the driver's dispatch, run by the interpreter so its faults arrive as
    they are."""
    d = DriverDevice()
    yield d
    d.close()


@pytest.fixture
def raw() -> RawDevice:
    return RawDevice()


@needs_compiler
def test_store_to_unmapped_memory_is_a_page_fault(dev):
    k = dev.load(compiled("vadd_f32"))
    a = dev.upload(np.ones(256, np.float32))
    with pytest.raises(PageFaultError) as e:
        dev.interpret(k, [a, a, 0xDEAD0000], (1,), (256,))
    err = e.value
    assert isinstance(err, KernelFault) and isinstance(err.cause, PageFault)
    assert "global_store_b32" in err.instruction and err.address is not None
    assert "0xdead0000" in str(err) and "lane" in str(err)


@needs_compiler
def test_read_past_the_end_of_a_buffer_faults(dev):
    k = dev.load(compiled("vadd_f32"))
    small = dev.upload(np.ones(1024, np.float32))      # one page; a guard page follows
    big = dev.upload(np.ones(4096, np.float32))
    out = dev.alloc(4 * 4096)
    with pytest.raises(PageFaultError, match="global_load_b32"):
        dev.interpret(k, [small, big, out], (16,), (256,))


def test_lds_size_left_at_zero_faults_with_a_hint(dev):
    """The compiler leaves RSRC2.LDS_SIZE at 0; a runtime that forgets to set it gets told."""
    k = dev.load(reference("reduce_sum"))
    vin, vout = dev.upload(np.ones(64, np.float32)), dev.alloc(4)
    rec = dev.dispatch_record(k, [vin, vout], (1,), (64,))
    bad = DispatchRecord(rec.pgm_addr, rec.rsrc1, rec.rsrc2 & ~(0x1FF << 15), rec.rsrc3,
                         rec.user_sgprs, rec.grid, rec.block, lds_bytes=0)
    with pytest.raises(PageFaultError, match="LDS_SIZE") as e:
        execute(bad, dev.mem)
    assert "ds_store_b32" in e.value.instruction
    execute(rec, dev.mem)  # with LDS allocated the same dispatch runs
    assert dev.download(vout, 1, np.float32)[0] == 64.0


def test_unknown_instruction_names_it_and_its_address(raw):
    with pytest.raises(KernelFault, match=r"unknown instruction <VOP2 op 0>") as e:
        raw.launch_raw(words(S_NOP, 0x00000000, S_ENDPGM), [], (1,), (32,))
    assert e.value.address is not None and e.value.address % 256 == 4


def test_unknown_instruction_after_the_end_is_never_reached(raw):
    stats = raw.launch_raw(words(S_ENDPGM, 0x00000000), [], (2,), (64,))
    assert stats.waves == 4 and stats.wave_instructions == 4


def test_running_off_the_end_of_the_program(raw):
    with pytest.raises(KernelFault, match="past the end"):
        raw.launch_raw(words(S_NOP), [], (1,), (32,))


def test_a_kernel_that_never_ends_hits_the_instruction_limit(raw):
    with pytest.raises(KernelFault, match="instruction limit"):
        raw.launch_raw(words(S_BRANCH_SELF), [], (1,), (32,), max_wave_instructions=10_000)


def test_trap_is_a_fault(raw):
    with pytest.raises(KernelFault, match="s_trap"):
        raw.launch_raw(words(S_TRAP, S_ENDPGM), [], (1,), (32,))


def test_program_address_must_be_mapped():
    rec = DispatchRecord(0x1234500, 0, 0, 0, (), (1, 1, 1), (32, 1, 1), 0)
    with pytest.raises(PageFaultError, match="instruction fetch"):
        execute(rec, MockMemory())


def test_bad_workgroup_size_is_rejected(raw):
    with pytest.raises(KernelFault, match="1024"):
        raw.launch_raw(words(S_ENDPGM), [], (1,), (2048,))


def test_code_rewritten_at_the_same_address_is_decoded_again():
    """The program cache revalidates the bytes: a new kernel loaded at the same VA runs."""
    mem = MockMemory()
    mem.map(0x10000, 0x1000)
    out = 0x20000
    mem.map(out, 0x1000)
    # s_mov_b32 s2, <k>; v_mov_b32 v1, s2; v_mov_b32 v0, 0; global_store_b32 v0, v1, s[0:1];
    # s_endpgm
    def prog(k: int) -> bytes:
        return words(0xBE8200FF, k, 0x7E020202, 0x7E000280, 0xDC6A0000, 0x00000100, S_ENDPGM,
                     0xBF9F0000)
    rec = DispatchRecord(0x10000, 0, 2 << 1, 0, (out, 0), (1, 1, 1), (32, 1, 1), 0)
    for k in (7, 99):
        mem.write(0x10000, prog(k))
        execute(rec, mem)
        assert mem.read_u32(out) == k
