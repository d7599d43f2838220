"""gfx942 (MI300, CDNA3), the second AMD architecture record, beside gfx1100 in one process.

The streams the driver emits for gfx942 are checked packet by packet against encodings built here
straight from the upstream definitions (the generated soc15d.h, kfd_pm4_headers_ai.h, GC 9.4.3
and vega10_sdma_pkt_open.h bindings), not through the driver's packet descriptions; the loader's
gfx90a+ kernel-descriptor fields and the CWSR and scratch sizing are checked against amdkfd's and
the registers' definitions. The device contract (test_device_contract.py) runs on a gfx942 mock as
well; the mock does not execute CDNA3 code, so kernels there are Python models.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import DeviceFault, ProgramError

DATA = Path(__file__).resolve().parent / "data" / "amd_reference"
# gfx942 code objects from Triton's own LLVM (scripts/build_triton_kernels.py): vector_add, and
# matmul, whose MFMA accumulators sit in AGPRs after its VGPRs (a non-trivial ACCUM_OFFSET)
GFX942 = Path(__file__).resolve().parent / "data" / "triton" / "gfx942"
GFX942_VADD = GFX942 / "vector_add.hsaco"
GFX942_MATMUL = GFX942 / "matmul.hsaco"
# clang-16 knows gfx940 only, the first CDNA3 target; the gfx942 record runs its code objects too
GFX940_VADD = DATA / "vector_add_gfx940.hsaco"
GFX1100_VADD = DATA / "vector_add.hsaco"
M32 = 0xFFFFFFFF


@pytest.fixture
def pair() -> Iterator[tuple[Any, Any]]:
    """GPU 0 a gfx1100, GPU 1 a gfx942, of one mock machine."""
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import AMDDevice
    mos = MockOS.with_amd_gpus(2, archs=("gfx1100", "gfx942"))
    a = AMDDevice("amd:0", os=mos)
    try:
        b = AMDDevice("amd:1", os=mos)
    except BaseException:
        a.close()
        raise
    yield a, b
    b.close()
    a.close()
    assert all(v == 0 for v in mos.live_objects().values()), mos.live_objects()


@pytest.fixture
def dev(pair: tuple[Any, Any]) -> Any:
    return pair[1]


# ------------------------------------------------------------------------------------ two archs
def test_two_architectures_drive_one_process(pair: tuple[Any, Any]) -> None:
    """Each device runs by its own record: names, encodings, executes_kernels; copies and signals
    interleave on both."""
    from runtime.drivers.amd.arch import GFX11, GFX942
    a, b = pair
    assert (a.gfx, b.gfx, a.arch, b.arch) == (GFX11, GFX942, "gfx1100", "gfx942")
    assert a.executes_kernels and not b.executes_kernels
    assert a.pm4_encoding.arch is GFX11 and b.pm4_encoding.arch is GFX942
    assert len(a.pm4_encoding.pre_dispatch) == 8 and len(b.pm4_encoding.pre_dispatch) == 7
    x = np.arange(50_000, dtype=np.uint32)
    bufs = [(d, d.alloc(x.nbytes)) for d in (a, b, a, b)]
    for i, (d, buf) in enumerate(bufs):
        d.copyin(buf, x + i)
    sigs = [d.new_signal(0) for d in (a, b)]
    for d, s in zip((a, b), sigs):
        d.compute_queue().signal(s, 7).submit()
        d.copy_queue().wait(s, 7).signal(s, 9).submit()
    for i, (d, buf) in enumerate(bufs):
        out = np.zeros_like(x)
        d.copyout(out, buf)
        assert np.array_equal(out, x + i)
    for s in sigs:
        s.wait(9, timeout_ms=5000)
        s.release()


def test_the_mock_topology_presents_an_mi300x(dev: Any) -> None:
    props = dev.node.properties
    assert dev.node.gfx_target_version == 90402 and props["wave_front_size"] == 64
    assert props["num_xcc"] == 8 and props["simd_count"] // props["simd_per_cu"] == 304
    assert dev.gc_bases[0] == 0x2000  # IP discovery's GC segment 0, as the bindings record


# ------------------------------------------------------------------------------------ PM4
def _split(dwords: list[int]) -> list[tuple[int, list[int]]]:
    """(opcode, payload) of each type-3 packet, read with soc15d.h's header macros."""
    from hcq_bindings.amd import pm4_gfx9 as p
    out, i = [], 0
    while i < len(dwords):
        h = dwords[i]
        assert p.CP_PACKET_GET_TYPE(h) == p.PACKET_TYPE3, hex(h)
        n = p.CP_PACKET_GET_COUNT(h) + 1
        out.append((p.CP_PACKET3_GET_OPCODE(h), dwords[i + 1:i + 1 + n]))
        i += 1 + n
    assert i == len(dwords)
    return out


def _release_mem(payload: list[int]) -> Any:
    """A RELEASE_MEM as amdkfd's gfx9 struct (kfd_pm4_headers_ai.h pm4_mec_release_mem)."""
    from hcq_bindings.amd import pm4_gfx9 as p
    raw = struct.pack("<8I", 0, *payload)
    return p.pm4_mec_release_mem.from_buffer_copy(raw)


def test_pm4_stream_packet_by_packet(dev: Any) -> None:
    """wait, memory_barrier, exec, signal and timestamp on gfx942, each packet against soc15d.h,
    the KFD's gfx9 RELEASE_MEM struct, GC 9.4.3's registers and vega10's event enumeration."""
    from hcq_bindings.amd import gc_9_4_3 as gc, pm4_gfx9 as p, vega10_enum as e
    prg = dev.program(GFX942_VADD.read_bytes(), "vector_add")
    s = dev.new_signal()
    bufs = [dev.alloc(4096) for _ in range(3)]
    # Triton's vector_add: x, y, out, n, then its global and profile scratch pointers (unused)
    ka = prg.fill_kernargs([*bufs, 1024, 0, 0], (4, 1, 1), (256, 1, 1))
    q = dev.compute_queue().wait(s, 3).memory_barrier().exec(prg, ka, (4, 1, 1), (256, 1, 1)) \
        .signal(s, (5 << 32) | 6).timestamp(s)
    pk = _split(list(q.dwords()))
    ops = [op for op, _ in pk]
    ev = dev.signal_event

    # WAIT_REG_MEM: memory, >=, the signal's low 32 bits
    assert pk[0] == (p.PACKET3_WAIT_REG_MEM, [
        p.WAIT_REG_MEM_FUNCTION(5) | p.WAIT_REG_MEM_MEM_SPACE(1) | p.WAIT_REG_MEM_OPERATION(0),
        s.va & M32, s.va >> 32, 3, M32, 4])
    # ACQUIRE_MEM, gfx9 form (gfx_v9_4_3.c emit_mem_sync): CP_COHER_CNTL, size, size_hi, base,
    # base_hi, poll interval -- no GCR_CNTL dword
    coher_all = (p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1))
    assert pk[1] == (p.PACKET3_ACQUIRE_MEM, [coher_all, M32, 0xFFFFFF, 0, 0, 4])
    per_cu = (p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1)
              | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1))
    assert pk[2] == (p.PACKET3_ACQUIRE_MEM, [per_cu, M32, 0xFFFFFF, 0, 0, 4])
    # SET_SH_REG: every register by GC 9.4.3 offset + segment 0 base - SET_SH_REG_START
    regs: dict[int, int] = {}
    i = 3
    while ops[i] == p.PACKET3_SET_SH_REG:
        first, *vals = pk[i][1]
        for k, v in enumerate(vals):
            regs[first + k + p.PACKET3_SET_SH_REG_START - 0x2000] = v
        i += 1
    assert regs[gc.regCOMPUTE_PGM_LO] | regs[gc.regCOMPUTE_PGM_HI] << 32 == prg.pgm_va >> 8
    assert regs[gc.regCOMPUTE_PGM_RSRC1] == prg.kd.rsrc1
    assert regs[gc.regCOMPUTE_PGM_RSRC3] == prg.kd.rsrc3   # ACCUM_OFFSET and TG_SPLIT as built
    assert (regs[gc.regCOMPUTE_NUM_THREAD_X], regs[gc.regCOMPUTE_NUM_THREAD_Y],
            regs[gc.regCOMPUTE_NUM_THREAD_Z]) == (256, 1, 1)
    layout = prg.kd.user_sgpr_layout()
    kslot = layout["kernarg_segment_ptr"]
    assert regs[gc.regCOMPUTE_USER_DATA_0 + kslot] | \
        regs[gc.regCOMPUTE_USER_DATA_0 + kslot + 1] << 32 == ka.va
    # DISPATCH_DIRECT: start the shader from (0,0,0); CDNA has no wave32 bit to set
    initiator = gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK \
        | gc.COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK
    assert pk[i] == (p.PACKET3_DISPATCH_DIRECT, [4, 1, 1, initiator])
    # EVENT_WRITE CS_PARTIAL_FLUSH (EVENT_INDEX 4)
    assert pk[i + 1] == (p.PACKET3_EVENT_WRITE,
                         [p.EVENT_TYPE(e.CS_PARTIAL_FLUSH) | p.EVENT_INDEX(4)])
    # RELEASE_MEM: the signal (64-bit data, caches flushed as gfx_v9_4_3.c ring_emit_fence), then
    # the event mailbox with an interrupt, then the timestamp (GPU clock)
    sig, irq, ts = (_release_mem(pk[j][1]) for j in (i + 2, i + 3, i + 4))
    assert [op for op, _ in pk[i + 2:]] == [p.PACKET3_RELEASE_MEM] * 3
    for rm in (sig, irq, ts):
        b2 = rm.bitfields2
        assert (b2.event_type, b2.event_index) == (p.CACHE_FLUSH_AND_INV_TS_EVENT,
                                                   p.event_index__mec_release_mem__end_of_pipe)
    b2 = sig.bitfields2
    assert (b2.tcl1_action_ena, b2.tc_action_ena, b2.tc_wb_action_ena, b2.tc_md_action_ena,
            b2.tc_nc_action_ena, b2.tcl1_vol_action_ena) == (1, 1, 1, 1, 0, 0)
    assert (sig.bitfields3.data_sel, sig.bitfields3.int_sel) == (
        p.data_sel__mec_release_mem__send_64_bit_data, p.int_sel__mec_release_mem__none)
    assert (sig.bitfields4b.address_lo_64b << 3 | sig.address_hi << 32, sig.data_lo,
            sig.data_hi) == (s.va, 6, 5)
    assert (irq.bitfields3.data_sel, irq.bitfields3.int_sel) == (
        p.data_sel__mec_release_mem__send_32_bit_low,
        p.int_sel__mec_release_mem__send_interrupt_after_write_confirm)
    assert (irq.data_lo, irq.int_ctxid) == (ev.event_id, ev.event_id)
    assert ts.bitfields3.data_sel == p.data_sel__mec_release_mem__send_gpu_clock_counter
    assert ts.bitfields4b.address_lo_64b << 3 | ts.address_hi << 32 == s.timestamp_va
    # and the mock's command processor executes the stream
    s.value = 3
    q.submit()
    s.wait((5 << 32) | 6, timeout_ms=5000)
    assert s.timestamp > 0


def test_a_bound_queue_is_called_with_soc15_indirect_buffer(dev: Any) -> None:
    from hcq_bindings.amd import pm4_gfx9 as p
    s = dev.new_signal()
    body = dev.compute_queue().signal(s, 1).bind()
    q = dev.compute_queue().call(body)
    ((op, payload),) = _split(list(q.dwords()))
    va = body._ib.va
    assert (op, payload) == (p.PACKET3_INDIRECT_BUFFER,
                             [va & M32, va >> 32, len(body.dwords()) | p.INDIRECT_BUFFER_VALID])
    q.submit()
    s.wait(1, timeout_ms=5000)
    body.unbind()


def test_gfx11_forms_are_refused_by_the_gfx942_command_processor(dev: Any) -> None:
    """The mock checks every packet against gfx942's forms: gfx11's 7-dword ACQUIRE_MEM faults."""
    from runtime.drivers.amd.arch import GFX11
    from runtime.drivers.amd.pm4 import pm4_encoding
    from runtime.hcq.queue import extend_from
    q = dev.compute_queue()
    extend_from(q, pm4_encoding(GFX11).acquire_all)
    q.submit()
    with pytest.raises(DeviceFault, match="PACKET3_ACQUIRE_MEM has 7 payload dwords, expected 6"):
        dev.synchronize(timeout_ms=2000)


# ------------------------------------------------------------------------------------ SDMA
def test_sdma_stream_packet_by_packet(dev: Any) -> None:
    """copy, wait, signal and timestamp on gfx942's SDMA 4.4, each packet the vega10 struct with
    the same fields (FENCE has no MTYPE there)."""
    from hcq_bindings.amd import sdma_v4 as sd

    def enc(struct_: Any, **f: int) -> list[int]:
        return list(struct.unpack(f"<{len(bytes(struct_(**f))) // 4}I", bytes(struct_(**f))))

    s = dev.new_signal()
    q = dev.copy_queue().copy(0x7_0000_0010, 0x2003, 0x400005).wait(s, 9) \
        .signal(s, (1 << 32) | 2).timestamp(s)
    ev = dev.signal_event
    mb = ev.mailbox_va
    want = (
        enc(sd.SDMA_PKT_COPY_LINEAR, op=sd.SDMA_OP_COPY, sub_op=sd.SDMA_SUBOP_COPY_LINEAR,
            count=0x3FFFFF, src_addr_31_0=0x2003, dst_addr_31_0=0x10, dst_addr_63_32=7)
        + enc(sd.SDMA_PKT_COPY_LINEAR, op=sd.SDMA_OP_COPY, sub_op=sd.SDMA_SUBOP_COPY_LINEAR,
              count=4, src_addr_31_0=0x402003, dst_addr_31_0=0x400010, dst_addr_63_32=7)
        + enc(sd.SDMA_PKT_POLL_REGMEM, op=sd.SDMA_OP_POLL_REGMEM, func=5, mem_poll=1,
              addr_31_0=s.va & M32, addr_63_32=s.va >> 32, value=9, mask=M32, interval=4,
              retry_count=0xFFF)
        + enc(sd.SDMA_PKT_FENCE, op=sd.SDMA_OP_FENCE, addr_31_0=s.va & M32,
              addr_63_32=s.va >> 32, data=2)
        + enc(sd.SDMA_PKT_FENCE, op=sd.SDMA_OP_FENCE, addr_31_0=(s.va + 4) & M32,
              addr_63_32=s.va >> 32, data=1)
        + enc(sd.SDMA_PKT_FENCE, op=sd.SDMA_OP_FENCE, addr_31_0=mb & M32, addr_63_32=mb >> 32,
              data=ev.event_id)
        + enc(sd.SDMA_PKT_TRAP, op=sd.SDMA_OP_TRAP, int_context=ev.event_id)
        + enc(sd.SDMA_PKT_TIMESTAMP_GET_GLOBAL, op=sd.SDMA_OP_TIMESTAMP,
              sub_op=sd.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL,
              write_addr_31_3=(s.timestamp_va & M32) >> 3, write_addr_63_32=s.timestamp_va >> 32))
    assert list(q.dwords()) == want
    src, dst = dev.alloc(64), dev.alloc(64)
    dev.copyin(src, np.arange(16, dtype=np.uint32))
    s.value = 9
    dev.copy_queue().wait(s, 9).copy(dst.va, src.va, 64).signal(s, 10).submit()
    s.wait(10, timeout_ms=5000)
    out = np.zeros(16, np.uint32)
    dev.copyout(out, dst)
    assert np.array_equal(out, np.arange(16, dtype=np.uint32))


# ------------------------------------------------------------------------------------ loader
def test_code_objects_load_with_the_cdna3_descriptor_fields(dev: Any) -> None:
    """Triton's gfx942 code objects: an MI300 ELF (EF_AMDGPU_MACH gfx942), wave64, ACCUM_OFFSET
    and TG_SPLIT read from RSRC3, the launch's LDS from the kernel's Triton-given shared size."""
    from runtime.drivers.amd.program import E_FLAGS_OFFSET, EF_AMDGPU_MACH
    for path in (GFX942_VADD, GFX942_MATMUL):
        e_flags = struct.unpack_from("<I", path.read_bytes(), E_FLAGS_OFFSET)[0]
        assert e_flags & EF_AMDGPU_MACH == 0x04C   # gfx942
    prg = dev.program(GFX942_VADD.read_bytes(), "vector_add")
    assert not prg.kd.wave32 and prg.dispatch_initiator == dev.gfx.dispatch_initiator
    # no accumulation registers: ACCUM_OFFSET is the encoding's first granule past the VGPRs
    assert (prg.accum_offset, prg.tg_split) == (4 * ((prg.kd.rsrc3 & 0x3F) + 1), False)
    prg.free()
    # matmul: its MFMA accumulators in AGPRs after the VGPRs; the metadata's .vgpr_count covers
    # both files (48 VGPRs + 16 AGPRs), so they start at VGPR 48
    mm = dev.program(GFX942_MATMUL.read_bytes(), "matmul")
    meta = mm.kernel.metadata
    assert (meta[".vgpr_count"], meta[".agpr_count"]) == (64, 16)
    assert (mm.accum_offset, mm.tg_split, mm.kd.rsrc3 & 0x3F) == (48, False, 11)
    mm.free()


def test_clang16_gfx940_code_objects_load_too(dev: Any) -> None:
    """The record covers gfx940 to gfx942: clang-16's gfx940 code object loads on the MI300."""
    prg = dev.program(GFX940_VADD.read_bytes(), "vector_add")
    assert not prg.kd.wave32
    assert (prg.accum_offset, prg.tg_split) == (4 * ((prg.kd.rsrc3 & 0x3F) + 1), False)
    prg.free()


def test_code_objects_for_another_architecture_are_refused(pair: tuple[Any, Any]) -> None:
    a, b = pair
    with pytest.raises(ProgramError, match="EF_AMDGPU_MACH 0x041, not a gfx942 processor"):
        b.program(GFX1100_VADD.read_bytes(), "vector_add")
    with pytest.raises(ProgramError, match="EF_AMDGPU_MACH 0x04c, not a gfx11 processor"):
        a.program(GFX942_VADD.read_bytes(), "vector_add")
    with pytest.raises(ProgramError, match="EF_AMDGPU_MACH 0x040, not a gfx11 processor"):
        a.program(GFX940_VADD.read_bytes(), "vector_add")


def test_an_accumulation_offset_beyond_the_vgprs_is_refused(dev: Any) -> None:
    from runtime.drivers.amd import elf
    lib = bytearray(GFX942_VADD.read_bytes())
    co = elf.parse(bytes(lib))
    kd_off = next(off + co.kernels["vector_add"].kd_vaddr - va for off, va, size, _ in co.loads
                  if va <= co.kernels["vector_add"].kd_vaddr < va + size)
    rsrc3 = struct.unpack_from("<I", lib, kd_off + 44)[0]
    struct.pack_into("<I", lib, kd_off + 44, rsrc3 | 0x3F)   # ACCUM_OFFSET 63: VGPR 256
    with pytest.raises(ProgramError, match="ACCUM_OFFSET puts the accumulation registers at "
                                           "VGPR 256, beyond the 8 VGPRs"):
        dev.program(bytes(lib), "vector_add")


# ------------------------------------------------------------------------------------ sizing
def test_cwsr_sizes_follow_amdkfd(dev: Any) -> None:
    """kfd_queue.c kfd_queue_ctx_save_restore_size for an MI300X (per XCC: 38 CUs, 40 waves per
    CU, 8-byte control-stack entries, 0x80000 VGPR bytes per CU); the queue's save area holds one
    per XCC."""
    page = 4096
    cus, waves = 1216 // 4 // 8, 1216 // 4 // 8 * 40
    ctl = -(-(40 + waves * 8 + 8) // page) * page
    wg = -(-(cus * (0x80000 + 0x4000 + 0x10000 + 0x1000)) // page) * page
    debug = -(-(waves * 32) // 64) * 64
    assert dev._cwsr_sizes() == (ctl + wg, ctl, debug, 8)
    assert dev.compute_ring.mem.ctx_save.size >= (ctl + wg + debug) * 8


def test_scratch_uses_the_gfx9_wavesize_unit(dev: Any) -> None:
    """COMPUTE_TMPRING_SIZE.WAVESIZE counts 1 KiB on gfx942 (256 B on gfx11)."""
    from hcq_bindings.amd import gc_9_4_3 as gc
    sc = dev.scratch.setup_for(64)
    wavesize = (sc.tmpring_size & gc.COMPUTE_TMPRING_SIZE__WAVESIZE_MASK) \
        >> gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT
    waves = sc.tmpring_size & gc.COMPUTE_TMPRING_SIZE__WAVES_MASK
    assert (sc.wave_B, wavesize, waves) == (64 * 64, 4, sc.waves)


def test_the_mock_kfd_checks_the_cwsr_sizes_as_newer_kernels_do(dev: Any) -> None:
    """CREATE_QUEUE on the gfx942 node refuses a save area of another size (amdkfd from 6.12
    requires the node's sizes), and a save area too small for every XCC."""
    from runtime.drivers.amd.ring import RPTR_OFFSET_B, WPTR_OFFSET_B
    from runtime.drivers.mock.amd_kfd import cwsr_sizes
    from runtime.hcq import IoctlError, MemKind
    from hcq_bindings.linux import kfd_ioctl as kfd
    cwsr, ctl, debug, xccs = cwsr_sizes(dev.node.properties)
    assert dev._cwsr_sizes() == (cwsr, ctl, debug, xccs)   # what the driver sends
    ring = dev.alloc(4096, kind=MemKind.GTT, cpu_access=True)
    ptrs = dev.alloc(4096, kind=MemKind.GTT, cpu_access=True)
    eop = dev.alloc(4096)
    small = dev.alloc(cwsr + debug)   # one XCC's worth
    big = dev.alloc((cwsr + debug) * xccs)

    def create(save: Any, size: int) -> Any:
        return dev.kfd.create_queue(
            ring_base_address=ring.va, ring_size=4096, gpu_id=dev.node.gpu_id,
            queue_percentage=kfd.KFD_MAX_QUEUE_PERCENTAGE, queue_priority=7,
            write_pointer_address=ptrs.va + WPTR_OFFSET_B,
            read_pointer_address=ptrs.va + RPTR_OFFSET_B,
            queue_type=kfd.KFD_IOC_QUEUE_TYPE_COMPUTE, eop_buffer_address=eop.va,
            eop_buffer_size=4096, ctx_save_restore_address=save.va,
            ctx_save_restore_size=size, ctl_stack_size=ctl)

    with pytest.raises(IoctlError, match="EINVAL|errno 22|Invalid argument"):
        create(big, cwsr + 4096)
    with pytest.raises(IoctlError):
        create(small, cwsr)
    q = create(big, cwsr)
    dev.kfd.destroy_queue(q.queue_id)
    for b in (ring, ptrs, eop, small, big):
        dev.free(b)
