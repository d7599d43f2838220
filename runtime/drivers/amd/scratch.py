"""Private-segment (scratch) memory for dispatches, as ROCr and amdkfd set it up on the parts with
architected flat scratch (gfx11, gfx940-gfx942).

A kernel's descriptor gives its per-lane private segment size (`private_segment_fixed_size`)
and RSRC2.SCRATCH_EN. The hardware gives every wave that runs it a slot of the queue's scratch
backing memory: COMPUTE_DISPATCH_SCRATCH_BASE (address >> 8) is where the slots start,
COMPUTE_TMPRING_SIZE.WAVESIZE the size of one slot (in the architecture's units: 256 bytes on gfx11,
1 KiB before) and TMPRING_SIZE.WAVES how many slots there are (the SPI runs no more scratch-using
waves at once). The scratch instructions address the wave's slot directly ("architected flat
scratch"), so no user SGPR has to carry a base.

`ScratchPool` keeps one backing allocation per device, grown (never shrunk) to the largest
per-lane size a loaded program needs. Programs capture the register values of the allocation
that was current when they were loaded; a grown pool keeps older allocations alive until the
device closes, so those programs stay valid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.drivers.amd.arch import AMDArch
from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import Buffer, MemKind, round_up

if TYPE_CHECKING:
    from runtime.drivers.amd.device import AMDDevice

SLOT_LANES = 64             # slots sized for wave64 serve wave32 too (as ROCr does)
POOL_LIMIT_B = 256 << 20    # cap on the backing memory: fewer slots rather than more memory
MIN_SLOTS = 32              # one workgroup of 1024 wave32 threads


@dataclass(frozen=True)
class ScratchSetup:
    """Register values of one scratch allocation."""

    base_va: int
    per_lane_B: int
    wave_B: int
    waves: int
    tmpring_size: int = 0       # COMPUTE_TMPRING_SIZE: WAVES and WAVESIZE (architecture units)


NO_SCRATCH = ScratchSetup(0, 0, 0, 0)


def tmpring_size(arch: AMDArch, waves: int, wave_B: int) -> int:
    """COMPUTE_TMPRING_SIZE of `waves` slots of `wave_B` bytes on `arch`."""
    gc = arch.gc
    return (waves << gc.COMPUTE_TMPRING_SIZE__WAVES__SHIFT) | \
        ((wave_B // arch.scratch_wave_unit_B) << gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT)


class ScratchPool:
    """The device's scratch backing memory."""

    def __init__(self, device: "AMDDevice") -> None:
        self.device = device
        self.current = NO_SCRATCH
        self._buffers: list[Buffer] = []
        arch = self.arch = device.gfx
        gc = arch.gc
        self.max_wavesize = gc.COMPUTE_TMPRING_SIZE__WAVESIZE_MASK \
            >> gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT
        self.max_waves = gc.COMPUTE_TMPRING_SIZE__WAVES_MASK >> gc.COMPUTE_TMPRING_SIZE__WAVES__SHIFT

    def max_slots(self) -> int:
        """Waves that can hold scratch at once: CUs x scratch slots per CU (KFD topology)."""
        props = self.device.node.properties
        cus = props.get("simd_count", 0) // max(1, props.get("simd_per_cu", 2))
        return max(MIN_SLOTS, min(self.max_waves, cus * props.get("max_slots_scratch_cu", 32)))

    def setup_for(self, per_lane_B: int) -> ScratchSetup:
        """A scratch allocation with at least `per_lane_B` bytes per lane (0: none needed)."""
        if per_lane_B <= self.current.per_lane_B:
            return self.current
        per_lane = round_up(max(per_lane_B, 2 * self.current.per_lane_B), 16)
        unit = self.arch.scratch_wave_unit_B
        wave_B = round_up(per_lane * SLOT_LANES, unit)
        if wave_B // unit > self.max_wavesize:
            raise ProgramError(f"a private segment of {per_lane_B} B per lane exceeds the "
                               f"{self.max_wavesize * unit // SLOT_LANES} B that "
                               "COMPUTE_TMPRING_SIZE.WAVESIZE can give a lane")
        waves = max(MIN_SLOTS, min(self.max_slots(), POOL_LIMIT_B // wave_B))
        buf = self.device.alloc(waves * wave_B, kind=MemKind.VRAM)
        if buf.va % 256:
            raise ProgramError(f"scratch memory at {buf.va:#x} is not 256-byte aligned "
                               "(COMPUTE_DISPATCH_SCRATCH_BASE holds address >> 8)")
        self._buffers.append(buf)
        self.current = ScratchSetup(buf.va, per_lane, wave_B, waves,
                                    tmpring_size(self.arch, waves, wave_B))
        return self.current
