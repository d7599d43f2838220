"""AMD GPU architectures: one record per architecture holds what the driver, the program loader and
the mock need to know about it, and is picked once when a device opens from the KFD topology's
gfx_target_version.

A record names the generated binding modules of the architecture (PM4 packets, GC registers, SDMA
packets), the compute SH registers a dispatch writes, the cache-control (GCR) bits of RELEASE_MEM
and ACQUIRE_MEM, the wave size and the dispatch initiator that selects it, the CWSR save-area
sizing, the LDS allocation granule, and the PM4 and SDMA packets the driver may emit. The driver's
modules take the bindings from the record (`GFX11.pm4`, never `import pm4_gfx11`), so that adding
an architecture is one record plus the hardware that is genuinely new (a packet builder whose
packets differ). An architecture with no record is refused by name (`pick_arch`).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from hcq_bindings.amd import gc_11_0_0, pm4_gfx11, sdma_v6

from runtime.hcq.errors import DeviceNotFound


@dataclass(frozen=True)
class AMDArch:
    """Everything architecture-specific this runtime uses (module docstring)."""

    name: str                    # "gfx11"
    gfx_major: int               # gfx_target_version // 10000 of the parts it covers
    pm4: ModuleType              # PM4 type-3 packets (nvd.h, soc15d.h)
    gc: ModuleType               # GC register offsets and fields
    sdma: ModuleType             # SDMA packets
    wave_size: int
    lds_granule_B: int           # COMPUTE_PGM_RSRC2.LDS_SIZE unit
    cwsr_per_cu_B: int           # CWSR save area per CU: VGPRs, SGPRs, LDS, HWREG
    release_mem_gcr: int         # RELEASE_MEM dword 1: end-of-pipe write-back/invalidate bits
    acquire_mem_gcr: int         # ACQUIRE_MEM GCR_CNTL: invalidate everything, write back dirty
    dispatch_initiator: int      # COMPUTE_DISPATCH_INITIATOR: start, from (0,0,0), wave size
    pm4_packets: frozenset[str]  # the PM4 packets (runtime/drivers/amd/packets.py names) it takes
    sdma_packets: frozenset[str]  # the SDMA packets

    def lds_granules(self, lds_B: int) -> int:
        """COMPUTE_PGM_RSRC2.LDS_SIZE's value for `lds_B` bytes of LDS (granules, rounded up)."""
        return -(-lds_B // self.lds_granule_B)


def _gfx11() -> AMDArch:
    p, gc = pm4_gfx11, gc_11_0_0
    # nvd.h: ACQUIRE_MEM_GCR_CNTL_GLI_INV "1:ALL"
    gli_inv_all = 1
    return AMDArch(
        name="gfx11", gfx_major=11, pm4=p, gc=gc, sdma=sdma_v6, wave_size=32,
        lds_granule_B=512,  # tinygrad, amdgpu
        # tinygrad after amdkfd kfd_queue.c: per CU VGPRs, SGPRs, LDS, HWREG
        cwsr_per_cu_B=0x60000 + 0x4000 + 0x10000 + 0x1000,
        release_mem_gcr=(p.PACKET3_RELEASE_MEM_GCR_GLM_WB | p.PACKET3_RELEASE_MEM_GCR_GLM_INV
                         | p.PACKET3_RELEASE_MEM_GCR_GLV_INV | p.PACKET3_RELEASE_MEM_GCR_GL1_INV
                         | p.PACKET3_RELEASE_MEM_GCR_GL2_INV | p.PACKET3_RELEASE_MEM_GCR_GL2_WB
                         | p.PACKET3_RELEASE_MEM_GCR_SEQ),
        acquire_mem_gcr=(p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(gli_inv_all)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1)
                         | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1)),
        dispatch_initiator=(gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK
                            | gc.COMPUTE_DISPATCH_INITIATOR__FORCE_START_AT_000_MASK
                            | gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK),
        pm4_packets=frozenset({"NOP", "SET_SH_REG", "DISPATCH_DIRECT", "WAIT_REG_MEM",
                               "RELEASE_MEM", "ACQUIRE_MEM", "INDIRECT_BUFFER", "EVENT_WRITE",
                               "WRITE_DATA"}),
        sdma_packets=frozenset({"NOP", "COPY_LINEAR", "FENCE", "TRAP", "POLL_REGMEM",
                                "TIMESTAMP_GET", "TIMESTAMP_GET_GLOBAL", "CONSTANT_FILL"}),
    )


GFX11 = _gfx11()

#: every described architecture
ARCHS: tuple[AMDArch, ...] = (GFX11,)


def pick_arch(gfx_target_version: int, what: str = "the GPU") -> AMDArch:
    """The record of a KFD node's gfx_target_version (110000 for gfx1100); DeviceNotFound naming
    the part when no record covers it."""
    major = gfx_target_version // 10000
    for a in ARCHS:
        if a.gfx_major == major:
            return a
    v = gfx_target_version
    part = f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}"
    raise DeviceNotFound(f"{what} is a {part}, an architecture this runtime has no description of "
                         f"(described: {', '.join(a.name for a in ARCHS)}); its packets and "
                         "registers differ: add a record to runtime/drivers/amd/arch.py")
