"""Private-segment (scratch) memory for gfx11 dispatches, as ROCr and amdkfd set it up.

A kernel's descriptor gives its per-lane private segment size (`private_segment_fixed_size`)
and RSRC2.SCRATCH_EN. The hardware gives every wave that runs it a slot of the queue's scratch
backing memory: COMPUTE_DISPATCH_SCRATCH_BASE (address >> 8) is where the slots start,
COMPUTE_TMPRING_SIZE.WAVESIZE the size of one slot in 256-byte units and TMPRING_SIZE.WAVES
how many slots there are (the SPI runs no more scratch-using waves at once). gfx11's scratch
instructions address the wave's slot directly ("architected flat scratch"), so no user SGPR has
to carry a base.

`ScratchPool` keeps one backing allocation per device, grown (never shrunk) to the largest
per-lane size a loaded program needs. Programs capture the register values of the allocation
that was current when they were loaded; a grown pool keeps older allocations alive until the
device closes, so those programs stay valid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from runtime.drivers.amd.arch import GFX11
from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import Buffer, MemKind, round_up

if TYPE_CHECKING:
    from runtime.drivers.amd.device import AMDDevice

gc = GFX11.gc              # the gfx11 scratch setup: its registers are the record's
WAVESIZE_UNIT_B = 256       # COMPUTE_TMPRING_SIZE.WAVESIZE granule on gfx11
SLOT_LANES = 64             # slots sized for wave64 serve wave32 too (as ROCr does)
POOL_LIMIT_B = 256 << 20    # cap on the backing memory: fewer slots rather than more memory
_MAX_WAVESIZE = gc.COMPUTE_TMPRING_SIZE__WAVESIZE_MASK >> gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT
_MAX_WAVES = gc.COMPUTE_TMPRING_SIZE__WAVES_MASK >> gc.COMPUTE_TMPRING_SIZE__WAVES__SHIFT
MIN_SLOTS = 32              # one workgroup of 1024 wave32 threads


@dataclass(frozen=True)
class ScratchSetup:
    """Register values of one scratch allocation."""

    base_va: int
    per_lane_B: int
    wave_B: int
    waves: int

    @property
    def tmpring_size(self) -> int:
        """COMPUTE_TMPRING_SIZE: WAVES and WAVESIZE (256-byte units)."""
        return (self.waves << gc.COMPUTE_TMPRING_SIZE__WAVES__SHIFT) | \
            ((self.wave_B // WAVESIZE_UNIT_B) << gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT)


NO_SCRATCH = ScratchSetup(0, 0, 0, 0)


class ScratchPool:
    """The device's scratch backing memory."""

    def __init__(self, device: "AMDDevice") -> None:
        self.device = device
        self.current = NO_SCRATCH
        self._buffers: list[Buffer] = []

    def max_slots(self) -> int:
        """Waves that can hold scratch at once: CUs x scratch slots per CU (KFD topology)."""
        props = self.device.node.properties
        cus = props.get("simd_count", 0) // max(1, props.get("simd_per_cu", 2))
        return max(MIN_SLOTS, min(_MAX_WAVES, cus * props.get("max_slots_scratch_cu", 32)))

    def setup_for(self, per_lane_B: int) -> ScratchSetup:
        """A scratch allocation with at least `per_lane_B` bytes per lane (0: none needed)."""
        if per_lane_B <= self.current.per_lane_B:
            return self.current
        per_lane = round_up(max(per_lane_B, 2 * self.current.per_lane_B), 16)
        wave_B = round_up(per_lane * SLOT_LANES, WAVESIZE_UNIT_B)
        if wave_B // WAVESIZE_UNIT_B > _MAX_WAVESIZE:
            raise ProgramError(f"a private segment of {per_lane_B} B per lane exceeds the "
                               f"{_MAX_WAVESIZE * WAVESIZE_UNIT_B // SLOT_LANES} B that "
                               "COMPUTE_TMPRING_SIZE.WAVESIZE can give a lane")
        waves = max(MIN_SLOTS, min(self.max_slots(), POOL_LIMIT_B // wave_B))
        buf = self.device.alloc(waves * wave_B, kind=MemKind.VRAM)
        if buf.va % 256:
            raise ProgramError(f"scratch memory at {buf.va:#x} is not 256-byte aligned "
                               "(COMPUTE_DISPATCH_SCRATCH_BASE holds address >> 8)")
        self._buffers.append(buf)
        self.current = ScratchSetup(buf.va, per_lane, wave_B, waves)
        return self.current
