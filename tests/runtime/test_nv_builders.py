"""NVIDIA builders without a device: QMD versions against the generated field tables and the Hopper
guide, pushbuffer headers and GPFIFO entries against their decoders, the cubin loader on cubins from
NVRTC 12.9 (ELF OSABI 0x33) and 13.0 (OSABI 0x41), RM status decoding."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from hcq_bindings.nv import classes as cl
from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv import cubin, methods
from runtime.drivers.nv.qmd import QMDV03, QMDV04, QMDV05, sm_config_value
from runtime.drivers.nv.rm import RmError, escape_request
from runtime.drivers.nv.status import describe_status, status_message, status_name
from runtime.hcq.errors import ProgramError

DATA = Path(__file__).parent / "data"
CUBINS = {"cuda12": DATA / "nv_kernels_cuda12.cubin", "cuda13": DATA / "nv_kernels_cuda13.cubin"}


# ------------------------------------------------------------------------------------ QMD
def test_generation_records_name_their_qmd_version_and_classes() -> None:
    from runtime.drivers.nv.generation import GENERATIONS, pick_generation
    from runtime.hcq.errors import DeviceNotFound
    by = {g.compute_class: g for g in GENERATIONS}
    assert by[rm.HOPPER_COMPUTE_A].qmd is QMDV04
    assert by[rm.AMPERE_COMPUTE_B].qmd is QMDV03 and by[rm.ADA_COMPUTE_A].qmd is QMDV03
    assert by[rm.BLACKWELL_COMPUTE_B].qmd is QMDV05
    assert {g.qmd for g in GENERATIONS} == {QMDV03, QMDV04, QMDV05}
    # picked from the class list RM reports, newest compute class first (GH100's list, RM's
    # g_gpu_class_list.c, also names the Ampere channel and usermode classes)
    gh100 = {rm.AMPERE_CHANNEL_GPFIFO_A, rm.AMPERE_USERMODE_A, rm.HOPPER_CHANNEL_GPFIFO_A,
             rm.HOPPER_COMPUTE_A, rm.HOPPER_DMA_COPY_A, rm.HOPPER_USERMODE_A}
    assert pick_generation(gh100).name == "hopper"
    with pytest.raises(DeviceNotFound, match="no description.*0xc5c0.*generation.py"):
        pick_generation({rm.TURING_COMPUTE_A, rm.TURING_DMA_COPY_A, rm.TURING_USERMODE_A})
    with pytest.raises(DeviceNotFound, match="hopper.*but not 0xc8b5"):
        pick_generation(gh100 - {rm.HOPPER_DMA_COPY_A})


def test_qmd_fields_come_from_the_generated_tables() -> None:
    # Every field the classes write exists in their own version's table, with the same bits.
    assert QMDV04.field("PROGRAM_ADDRESS_LOWER") == cl.NVCBC0_QMDV04_00_PROGRAM_ADDRESS_LOWER
    assert QMDV04.field("CONSTANT_BUFFER_VALID", 3) == cl.NVCBC0_QMDV04_00_CONSTANT_BUFFER_VALID(3)
    assert QMDV03.field("CTA_RASTER_WIDTH") == cl.NVC6C0_QMDV03_00_CTA_RASTER_WIDTH
    assert QMDV05.field("PROGRAM_ADDRESS_LOWER_SHIFTED4") == \
        cl.NVCEC0_QMDV05_00_PROGRAM_ADDRESS_LOWER_SHIFTED4
    with pytest.raises(KeyError):
        QMDV04.field("SM_GLOBAL_CACHING_ENABLE")  # gone in V04 (clcbc0qmd.h)
    assert QMDV04.size_B == 384 and QMDV03.size_B == 256 and QMDV05.size_B == 384


def _launch_qmd(q: type) -> bytes:
    x = q()
    x.set_common(sass_version=0x90)
    x.set_program(0x12_3456_7800)
    x.set_prefetch(0x12_3456_7800, 0x300)
    x.set_registers(40)
    x.set_shared_memory(0x2400)
    x.set_sm_config(0x2400)
    x.set_local_memory(0x260)
    x.set("BARRIER_COUNT", 1)
    x.set_cbuf(0, 0x40_0000_0040, 0x22C)
    x.set_grid(70000, 3, 2)
    x.set_block(128, 2, 1)
    x.set_release(0, 0x55_0000_1230, 77)
    return bytes(x.data)


def test_qmd_v04_matches_the_hopper_guide_positions() -> None:
    d = _launch_qmd(QMDV04)
    u32 = struct.unpack("<96I", d)
    # clcbc0qmd.h: program address unshifted at byte 0x98, grid at 0x80/0x84/0x88, block at
    # 0x90/0x92/0x94, cb0 address >> 6 at byte 0xC0, versions at bits 583:576, QMD_TYPE 25:23.
    assert u32[0x98 // 4] == 0x3456_7800 and u32[0x9C // 4] & 0x1FFFFFF == 0x12
    assert u32[0x80 // 4] == 70000 and d[0x84] == 3 and d[0x88] == 2
    assert struct.unpack_from("<HHH", d, 0x90) == (128, 2, 1)
    assert u32[0xC0 // 4] == (0x40_0000_0040 >> 6) & 0xFFFFFFFF
    assert (u32[576 // 32] >> (576 % 32)) & 0xFF == 0x40  # minor 0 in 579:576, major 4 above
    assert (u32[0] >> 23) & 7 == cl.NVCBC0_QMDV04_00_QMD_TYPE_GRID_CTA
    f = QMDV04(bytearray(d)).decode()
    assert f["REGISTER_COUNT"] == 40 and f["SHARED_MEMORY_SIZE"] == 0x2400
    assert f["SHADER_LOCAL_MEMORY_HIGH_SIZE"] == 0x260 and "SHADER_LOCAL_MEMORY_LOW_SIZE" not in f
    assert f["RELEASE_ENABLE(0)"] == 1 and f["RELEASE_SEMAPHORE0_PAYLOAD_LOWER"] == 77
    assert f["CONSTANT_BUFFER_SIZE_SHIFTED4(0)"] == 0x22C // 16 + 1
    assert f["SASS_VERSION"] == 0x90 and f["QMD_GROUP_ID"] == 0x3F


def test_qmd_versions_place_the_same_launch_differently() -> None:
    v3, v4, v5 = (q(bytearray(_launch_qmd(q))).decode() for q in (QMDV03, QMDV04, QMDV05))
    assert v3["CTA_RASTER_WIDTH"] == v4["GRID_WIDTH"] == v5["GRID_WIDTH"] == 70000
    assert v3["QMD_MAJOR_VERSION"] == 3 and v4["QMD_MAJOR_VERSION"] == 4
    assert v5["QMD_MAJOR_VERSION"] == 5
    assert v3["CONSTANT_BUFFER_ADDR_LOWER(0)"] == 0x40  # unshifted on V03
    assert v4["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)"] == (0x40_0000_0040 >> 6) & 0xFFFFFFFF
    assert v5["PROGRAM_ADDRESS_LOWER_SHIFTED4"] == (0x12_3456_7800 >> 4) & 0xFFFFFFFF
    assert v5["SHARED_MEMORY_SIZE_SHIFTED7"] == 0x2400 >> 7
    assert v3["SM_GLOBAL_CACHING_ENABLE"] == 1 and "SM_GLOBAL_CACHING_ENABLE" not in v4
    assert "QMD_TYPE" in v4 and "QMD_TYPE" not in v3


def test_hopper_qmds_load_the_kernel_arguments_before_the_ctas_launch() -> None:
    """On V04 the constant bank of the kernel arguments is prefetched, all of it (256-B units):
    measured on the H200 to start a dependent grid sooner. V03 and V05 set nothing."""
    v3, v4, v5 = (q(bytearray(_launch_qmd(q))).prefetch_cbuf(0, 0x22C).decode()
                  for q in (QMDV03, QMDV04, QMDV05))
    pre = cl.NVCBC0_QMDV04_00_CONSTANT_BUFFER_PREFETCH_PREFETCH_PRE
    assert v4["CONSTANT_BUFFER_PREFETCH(0)"] == pre
    assert v4["CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8"] == 3  # 0x22C B in 256-B units
    assert not any("PREFETCH" in k and "CONSTANT" in k for k in (*v3, *v5))
    big = QMDV04().prefetch_cbuf(0, 64 * 1024).decode()
    assert big["CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8"] == 63  # the field's largest


def test_qmd_rejects_what_does_not_fit() -> None:
    q = QMDV04()
    with pytest.raises(ProgramError, match="64-byte aligned"):
        q.set_cbuf(0, 0x1000_0020, 0x100)
    with pytest.raises(ProgramError, match="does not fit"):
        q.set("REGISTER_COUNT", 1 << 9)
    with pytest.raises(ProgramError, match="largest carveout"):
        sm_config_value(QMDV04.carveouts_KiB(), 300 * 1024)
    assert sm_config_value(QMDV04.carveouts_KiB(), 1024) == 8 // 4 + 1
    assert sm_config_value(QMDV04.carveouts_KiB(), 100 * 1024 + 1) == 132 // 4 + 1
    assert QMDV04.max_sm_config() == 58 and QMDV03.max_sm_config() == 0x1A


def test_qmd_launch_and_release_fields_are_single_dword_patches() -> None:
    for q in (QMDV03, QMDV04, QMDV05):
        fields = q.launch_fields()
        assert len(fields) == 6
        for f in (*fields, *q.release_fields(0)):
            assert 0 <= f.shift < 32 and f.mask
        lo, hi, shift = q.cbuf_addr_fields(0)
        assert lo.mask == 0xFFFFFFFF and shift in (0, 6)


# ------------------------------------------------------------------------------------ pushbuffers
def test_method_headers_and_decoder_round_trip() -> None:
    pb = methods.nvm(1, cl.NVCBC0_SEND_PCAS_A, 0x1234) + \
        methods.nvm(1, cl.NVCBC0_SEND_SIGNALING_PCAS2_B, 0xA) + \
        methods.nvm(0, cl.NVC56F_SEM_ADDR_LO, 0x1000, 0, 5, 0, 0x1000001)
    hdr = pb[0]
    assert methods.fget(cl.NVC56F_DMA_INCR_OPCODE, hdr) == cl.NVC56F_DMA_INCR_OPCODE_VALUE
    assert methods.fget(cl.NVC56F_DMA_INCR_SUBCHANNEL, hdr) == 1
    assert methods.fget(cl.NVC56F_DMA_INCR_ADDRESS, hdr) << 2 == cl.NVCBC0_SEND_PCAS_A
    assert methods.fget(cl.NVC56F_DMA_INCR_COUNT, pb[4]) == 5
    lines = methods.decode_pushbuffer(pb, {1: rm.HOPPER_COMPUTE_A})
    assert "SEND_PCAS_A = 0x1234" in lines[0]
    assert "PCAS_ACTION=INVALIDATE_PREFETCH_COPY_SCHEDULE" in lines[1]
    assert "SEM_EXECUTE" in lines[-1] and "OPERATION=RELEASE" in lines[-1]
    with pytest.raises(ValueError):
        methods.method_header(0, 0x1002, 1)
    with pytest.raises(ValueError):
        methods.fval((3, 0), 16)


def test_gpfifo_entry_round_trip_and_limits() -> None:
    for va, n in ((0x10_0000_0000, 1), (0xFF_FFFF_FFFC, 0x1FFFFF), (0x1234_5678, 77)):
        assert methods.decode_gp_entry(methods.gp_entry(va, n)) == (va, n)
    with pytest.raises(ValueError, match="2\\^40"):
        methods.gp_entry(1 << 40, 4)
    with pytest.raises(ValueError):
        methods.gp_entry(0x1000, 0)


def test_userd_and_doorbell_offsets_are_the_guides() -> None:
    from runtime.drivers.nv.gpfifo import DOORBELL_OFFSET_B, USERD_GP_GET_B, USERD_GP_PUT_B
    assert (USERD_GP_GET_B, USERD_GP_PUT_B, DOORBELL_OFFSET_B) == (0x88, 0x8C, 0x90)  # section 4


def test_copy_engine_launch_words_are_the_verified_ones() -> None:
    from runtime.drivers.nv.generation import GENERATIONS
    for g in GENERATIONS:  # tinygrad's, valid on C8B5 (the same in every header)
        assert (g.copy.copy_word, g.copy.release_word) == (0x182, 0x14), g.name
        assert g.compute.cache_invalidate == 0x1011, g.name


# ------------------------------------------------------------------------------------ cubins
@pytest.mark.parametrize("abi", sorted(CUBINS))
def test_cubin_attributes(abi: str) -> None:
    c = cubin.parse(CUBINS[abi].read_bytes())
    assert c.sm == 90
    assert c.osabi == (cubin.OSABI_CUDA_V1 if abi == "cuda12" else cubin.OSABI_CUDA_V2)
    vadd = c.kernels["vadd"]
    assert vadd.param_base == 0x210 and vadd.param_size == 28
    assert [(p.offset, p.size) for p in vadd.params] == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert vadd.registers > 0 and vadd.barriers == 0
    assert c.kernels["block_reverse"].barriers == 1
    assert c.kernels["block_reverse"].static_smem_B == 0x800  # 1 KiB of data + 1 KiB reserved
    assert c.kernels["local_array"].local_B >= 96 * 4
    mp = c.kernels["many_params"]
    assert len(mp.params) == 17 and mp.params[-1].offset == 88 and mp.params[-1].size == 8
    assert [(p.offset, p.size) for p in c.kernels["affine"].params][-1] == (16, 24)
    assert set(c.constbanks) == {3, 4}


@pytest.mark.parametrize("abi", sorted(CUBINS))
def test_cubin_relocations_point_at_loaded_sections(abi: str) -> None:
    c = cubin.parse(CUBINS[abi].read_bytes())
    base = 0x10_0000_0000
    img = c.image(base)
    cb4 = c.constbanks[4]
    table = next(s for s in c.symbols if s.name == "table")
    addrs = [struct.unpack_from("<Q", img, c.offset_of(cb4) + r.offset)[0]
             for r in c.relocations if r.symbol.name == "table"]
    want = base + c.layout[table.shndx] + table.value
    assert addrs == [want]
    assert img[want - base:want - base + 32] == struct.pack("<8i", 3, 1, 4, 1, 5, 9, 2, 6)
    for k in c.kernels.values():
        assert c.offset_of(k.text) % 128 == 0


def test_corrupt_cubins_are_reported() -> None:
    good = CUBINS["cuda12"].read_bytes()
    with pytest.raises(ProgramError, match="not an ELF"):
        cubin.parse(b"\x00" * 100)
    bad = bytearray(good)
    bad[18:20] = struct.pack("<H", 62)  # EM_X86_64
    with pytest.raises(ProgramError, match="EM_CUDA"):
        cubin.parse(bytes(bad))
    with pytest.raises(ProgramError, match="run past"):
        cubin.parse(good[:len(good) // 2])
    with pytest.raises(ProgramError, match="format 9"):
        cubin.parse_info(bytes([9, 0x2F, 0, 0]), ".nv.info")
    with pytest.raises(ProgramError, match="claims"):
        cubin.parse_info(bytes([4, 0x0A, 64, 0]) + b"\0" * 8, ".nv.info.k")


# ------------------------------------------------------------------------------------ RM status
def test_status_codes_decode_to_name_and_message() -> None:
    assert status_name(rm.NV_ERR_INVALID_ARGUMENT) == "NV_ERR_INVALID_ARGUMENT"
    assert status_message(rm.NV_ERR_NO_MEMORY) == "Out of memory"
    assert describe_status(0x1F).startswith("NV_ERR_INVALID_ARGUMENT (0x1f): ")
    assert status_name(0xDEAD) == "NV_STATUS_0x0000dead"
    e = RmError("NV_ESC_RM_ALLOC of HOPPER_COMPUTE_A under 0x1", rm.NV_ERR_INVALID_CLASS)
    assert "NV_ERR_INVALID_CLASS" in str(e) and "HOPPER_COMPUTE_A" in str(e)
    assert e.status == rm.NV_ERR_INVALID_CLASS


def test_escape_requests_encode_the_argument_size() -> None:
    import ctypes
    req = escape_request(rm.NV_ESC_RM_ALLOC, ctypes.sizeof(rm.NVOS21_PARAMETERS))
    assert req == 0xC020462B  # _IOWR('F', 0x2b, 32): what tinygrad's nv_iowr computes
