"""AMD GPU architectures: one record per architecture holds what the driver, the program loader and
the mock need to know about it, and is picked when a device opens, from the KFD topology's
gfx_target_version. Nothing in the driver fixes an architecture when it is imported: two devices
of one process may be different architectures.

A record names the generated binding modules of the architecture (PM4 packets, GC registers, SDMA
packets, hardware enumerations), the PM4 family whose packet forms it takes, the cache-control bits
of RELEASE_MEM and ACQUIRE_MEM, the wave size and the dispatch initiator that selects it, the
scratch and CWSR save-area sizing, the LDS allocation granule, and the PM4 and SDMA packets the
driver may emit. The driver's modules take the bindings from the record (`arch.pm4`, never
`import pm4_gfx11`) and build their per-architecture tables once per record (packets.py
`packets_for`, pm4.py `pm4_encoding`, sdma.py `sdma_encoding`), so that adding an architecture
whose packets match an existing family is one record plus its binding specs
(docs/adding-hardware.md). An architecture with no record is refused by name (`pick_arch`).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from hcq_bindings.amd import (gc_9_4_3, gc_11_0_0, pm4_gfx9, pm4_gfx11, sdma_v4, sdma_v6,
                              soc21_enum, vega10_enum)

from runtime.hcq.errors import DeviceNotFound

#: PM4 families: where packet forms differ, the builders and decoders follow the family
#: (packets.py `PM4Forms`). "nv": gfx10 and gfx11 (nvd.h: RELEASE_MEM and ACQUIRE_MEM carry GCR
#: cache-control fields); "soc15": gfx9 (soc15d.h: EOP_* cache actions, ACQUIRE_MEM's
#: CP_COHER_CNTL first and no GCR_CNTL dword).
PM4_FAMILIES = ("nv", "soc15")


@dataclass(frozen=True)
class AMDArch:
    """Everything architecture-specific this runtime uses (module docstring)."""

    name: str                    # "gfx11", "gfx942"
    # Which gfx_target_versions it covers: those whose `version // match[0] == match[1]`
    # (gfx11: (10000, 11), every gfx11xx; gfx942: (100, 904), gfx940 to gfx942).
    match: tuple[int, int]
    pm4_family: str              # one of PM4_FAMILIES
    pm4: ModuleType              # PM4 type-3 packets (nvd.h or soc15d.h, kfd_pm4_headers_ai.h)
    gc: ModuleType               # GC register offsets and fields
    sdma: ModuleType             # SDMA packets
    enums: ModuleType            # hardware enumerations (event types)
    wave_size: int               # the wave size dispatches run in unless a kernel asks for 32
    lds_granule_B: int           # COMPUTE_PGM_RSRC2.LDS_SIZE unit
    scratch_wave_unit_B: int     # COMPUTE_TMPRING_SIZE.WAVESIZE unit
    cwsr_per_cu_B: int           # CWSR save area per CU: VGPRs, SGPRs, LDS, HWREG
    ctl_stack_per_wave_B: int    # CWSR control stack per wave
    cwsr_waves_per_cu: int       # waves per CU the CWSR control stack and debug area hold
    release_mem_gcr: int         # RELEASE_MEM dword 1: end-of-pipe write-back/invalidate bits
    release_mem_inv: int         # of those, the per-CU cache invalidations (the mock checks them)
    acquire_mem_all: int         # ACQUIRE_MEM: invalidate everything, write back dirty lines
    acquire_mem_dispatch: int    # ACQUIRE_MEM before a dispatch: the per-CU caches only
    acquire_mem_inv: int         # the invalidations a dispatch's reads need (the mock checks them)
    dispatch_initiator: int      # COMPUTE_DISPATCH_INITIATOR: start, from (0,0,0), wave size
    initiator_wave32: int        # the initiator bit that selects wave32 (0: no wave32 dispatch)
    sdma_fence_mtype: int | None  # FENCE header MTYPE (uncached) where the packet has the field
    sdma_fill_max_B: int         # CONSTANT_FILL bytes per packet (COUNT field width)
    # The processors whose code objects it runs: EF_AMDGPU_MACH values of the ELF header's e_flags
    # (llvm/BinaryFormat/ELF.h).
    elf_machs: frozenset[int]
    # VGPRs and accumulation VGPRs share one register file (gfx90a and later CDNA): the kernel
    # descriptor's RSRC3 carries ACCUM_OFFSET and TG_SPLIT.
    unified_agprs: bool
    pm4_packets: frozenset[str]  # the PM4 packets (runtime/drivers/amd/packets.py names) it takes
    sdma_packets: frozenset[str]  # the SDMA packets

    def covers(self, gfx_target_version: int) -> bool:
        """Whether this record describes the part with `gfx_target_version` (90402: gfx942)."""
        return gfx_target_version // self.match[0] == self.match[1]

    def lds_granules(self, lds_B: int) -> int:
        """COMPUTE_PGM_RSRC2.LDS_SIZE's value for `lds_B` bytes of LDS (granules, rounded up)."""
        return -(-lds_B // self.lds_granule_B)


_COMMON_PM4 = frozenset({"NOP", "SET_SH_REG", "DISPATCH_DIRECT", "WAIT_REG_MEM", "RELEASE_MEM",
                         "ACQUIRE_MEM", "INDIRECT_BUFFER", "EVENT_WRITE", "WRITE_DATA"})
_COMMON_SDMA = frozenset({"NOP", "COPY_LINEAR", "CONSTANT_FILL", "FENCE", "TRAP", "POLL_REGMEM",
                          "TIMESTAMP_GET", "TIMESTAMP_GET_GLOBAL"})
# Per CU: SGPRs, LDS and HWREG of the CWSR save area (amdkfd kfd_queue.c); the VGPR part differs.
_CWSR_SGPR_LDS_HWREG_B = 0x4000 + 0x10000 + 0x1000


def _gfx11() -> AMDArch:
    p, gc = pm4_gfx11, gc_11_0_0
    # nvd.h: ACQUIRE_MEM_GCR_CNTL_GLI_INV "1:ALL"
    gli_inv_all = 1
    return AMDArch(
        name="gfx11", match=(10000, 11), pm4_family="nv", pm4=p, gc=gc, sdma=sdma_v6,
        enums=soc21_enum, wave_size=32,
        lds_granule_B=512,  # tinygrad, amdgpu
        scratch_wave_unit_B=256,
        # amdkfd kfd_queue.c: VGPRs 0x60000 per CU on gfx11, control stack 12 B per wave and 32
        # waves per CU from gfx10 on
        cwsr_per_cu_B=0x60000 + _CWSR_SGPR_LDS_HWREG_B, ctl_stack_per_wave_B=12,
        cwsr_waves_per_cu=32,
        release_mem_gcr=(p.PACKET3_RELEASE_MEM_GCR_GLM_WB | p.PACKET3_RELEASE_MEM_GCR_GLM_INV
                         | p.PACKET3_RELEASE_MEM_GCR_GLV_INV | p.PACKET3_RELEASE_MEM_GCR_GL1_INV
                         | p.PACKET3_RELEASE_MEM_GCR_GL2_INV | p.PACKET3_RELEASE_MEM_GCR_GL2_WB
                         | p.PACKET3_RELEASE_MEM_GCR_SEQ),
        # per-CU vector cache and GL1 (GL2 is shared by every CU)
        release_mem_inv=p.PACKET3_RELEASE_MEM_GCR_GLV_INV | p.PACKET3_RELEASE_MEM_GCR_GL1_INV,
        acquire_mem_all=(p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(gli_inv_all)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1)),
        # Before a dispatch: invalidate the per-CU vector and scalar caches and GL1 (write back
        # and invalidate GLM/GLK), not GL2, which every CU shares; tinygrad uses this 0x3F0.
        acquire_mem_dispatch=(p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1)
                              | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1)
                              | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(1)
                              | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)
                              | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)
                              | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1)),
        acquire_mem_inv=(p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1)),
        dispatch_initiator=(gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK
                            | gc.COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK
                            | gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK),
        initiator_wave32=gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK,
        # sdma_v6_0.c emit_fence: SDMA_PKT_FENCE_HEADER_MTYPE(0x3) /* Ucached(UC) */
        sdma_fence_mtype=3,
        # sdma_v6_0.c: sdma_v6_0_buffer_funcs.fill_max_bytes (a multiple of 4, so chunks stay
        # aligned)
        sdma_fill_max_B=0x3FFFFFE0,
        # gfx1100, gfx1101, gfx1102, gfx1103
        elf_machs=frozenset({0x041, 0x046, 0x047, 0x044}), unified_agprs=False,
        pm4_packets=_COMMON_PM4, sdma_packets=_COMMON_SDMA,
    )


def _gfx942() -> AMDArch:
    p, gc = pm4_gfx9, gc_9_4_3
    # soc15d.h CP_COHER_CNTL actions. All: instruction and scalar caches, the vector L1 (TCL1),
    # and L2 invalidated with its dirty lines written back, as gfx_v9_4_3.c emit_mem_sync does.
    coher_all = (p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1)
                 | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1))
    per_cu = (p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1)
              | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1))
    return AMDArch(
        name="gfx942", match=(100, 904), pm4_family="soc15", pm4=p, gc=gc, sdma=sdma_v4,
        enums=vega10_enum, wave_size=64,
        lds_granule_B=512,  # RSRC2.LDS_SIZE in 128-dword units on gfx7 and later (AMDGPUUsage)
        scratch_wave_unit_B=1024,  # TMPRING_SIZE.WAVESIZE in 256-dword units before gfx11
        # amdkfd kfd_queue.c: VGPRs 0x80000 per CU on gfx940-gfx942 (512 unified VGPRs per lane),
        # control stack 8 B per wave and 40 waves per CU before gfx10
        cwsr_per_cu_B=0x80000 + _CWSR_SGPR_LDS_HWREG_B, ctl_stack_per_wave_B=8,
        cwsr_waves_per_cu=40,
        # gfx_v9_4_3.c ring_emit_fence without writeback: TCL1, TC (L2) and its metadata
        release_mem_gcr=(p.EOP_TCL1_ACTION_EN | p.EOP_TC_ACTION_EN | p.EOP_TC_WB_ACTION_EN
                         | p.EOP_TC_MD_ACTION_EN),
        release_mem_inv=p.EOP_TCL1_ACTION_EN,
        acquire_mem_all=coher_all,
        acquire_mem_dispatch=per_cu,
        acquire_mem_inv=p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1),
        dispatch_initiator=(gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK
                            | gc.COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK),
        initiator_wave32=0,  # CDNA runs wave64 only
        sdma_fence_mtype=None,  # vega10_sdma_pkt_open.h's FENCE header has no MTYPE
        # CONSTANT_FILL's COUNT is 22 bits on SDMA 4 (vega10_sdma_pkt_open.h): the largest
        # multiple of 32 below 4 MiB, as SDMA 6's limit is below its 1 GiB
        sdma_fill_max_B=0x3FFFE0,
        # gfx940, gfx941, gfx942 (clang-16 knows gfx940 only; LLVM 17 added the other two)
        elf_machs=frozenset({0x040, 0x04B, 0x04C}), unified_agprs=True,
        pm4_packets=_COMMON_PM4, sdma_packets=_COMMON_SDMA,
    )


GFX11 = _gfx11()
GFX942 = _gfx942()

#: every described architecture
ARCHS: tuple[AMDArch, ...] = (GFX11, GFX942)


def find_arch(gfx_target_version: int) -> AMDArch | None:
    """The record describing `gfx_target_version`, None when none does."""
    for a in ARCHS:
        if a.covers(gfx_target_version):
            return a
    return None


def part_name(gfx_target_version: int) -> str:
    """The LLVM processor name of a gfx_target_version (110000: "gfx1100", 90402: "gfx942")."""
    v = gfx_target_version
    return f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"


def pick_arch(gfx_target_version: int, what: str = "the GPU") -> AMDArch:
    """The record of a KFD node's gfx_target_version (110000 for gfx1100); DeviceNotFound naming
    the part when no record covers it."""
    a = find_arch(gfx_target_version)
    if a is not None:
        return a
    raise DeviceNotFound(f"{what} is a {part_name(gfx_target_version)}, an architecture this "
                         f"runtime has no description of (described: "
                         f"{', '.join(a.name for a in ARCHS)}); its packets and registers differ: "
                         "add a record to runtime/drivers/amd/arch.py")
