"""The interpreter's public records: the dispatch it is given, its statistics and its fault."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gws import GwsRange


@dataclass(frozen=True)
class DispatchRecord:
    """What the PM4 processor decodes from SET_SH_REG state plus DISPATCH_DIRECT.

    `grid` counts workgroups (DISPATCH_DIRECT without USE_THREAD_DIMENSIONS), `block` threads
    (COMPUTE_NUM_THREAD_X/Y/Z). `user_sgprs` are COMPUTE_USER_DATA_0.. (RSRC2.USER_SGPR of them
    are loaded into s0..; missing ones read as zero). `lds_bytes` is the LDS allocation the PM4 side
    derived from RSRC2.LDS_SIZE; accesses beyond it fault. `scratch_*` describe the private
    segment memory (COMPUTE_DISPATCH_SCRATCH_BASE and COMPUTE_TMPRING_SIZE); 0 means none.
    `gws`: the GWS resources the queue's VMID owns (GDS_GWS_VMID), with their state.
    """

    pgm_addr: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    user_sgprs: tuple[int, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    lds_bytes: int
    scratch_va: int = 0
    scratch_wave_B: int = 0   # COMPUTE_TMPRING_SIZE.WAVESIZE * 256: one wave's scratch slot
    scratch_slots: int = 0    # COMPUTE_TMPRING_SIZE.WAVES: waves that can hold scratch at once
    wave64: bool = False      # DISPATCH_INITIATOR.CS_W32_EN clear: 64-lane waves
    # The queue's GWS range and its resources' state (kept by the queue's owner across
    # dispatches); None: no range, every ds_gws_* faults (a gfx11 KFD queue: see ops_gds).
    gws: GwsRange | None = field(default=None, compare=False)

    def with_user(self, user_sgprs: tuple[int, ...]) -> "DispatchRecord":
        """This record with other user SGPRs (the next launch of the same kernel and shape,
        whose argument pointer differs): a copy of the fields, without the per-field checks of
        a frozen dataclass's constructor, which cost a launch more than the copy."""
        new = object.__new__(DispatchRecord)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields["user_sgprs"] = user_sgprs
        return new


@dataclass
class ExecStats:
    """Work done by one `execute` call.

    `wave_instructions` counts instructions issued per wave; `lane_instructions` counts them per
    lane that was active (in EXEC) when the instruction issued, for every instruction (scalar ones
    too), i.e. what a lane-by-lane emulator would have executed.
    """

    waves: int = 0
    wave_instructions: int = 0
    lane_instructions: int = 0
    workgroups: int = 0

    def __iadd__(self, other: "ExecStats") -> "ExecStats":
        self.waves += other.waves
        self.wave_instructions += other.wave_instructions
        self.lane_instructions += other.lane_instructions
        self.workgroups += other.workgroups
        return self


class KernelFault(Exception):
    """The dispatch stopped: an unknown or unsupported instruction, a memory fault, bad state.

    `address` is the faulting instruction's VA (None for faults found before the first
    instruction), `instruction` its LLVM-syntax text, `cause` the underlying error if any (a
    `runtime.drivers.mock.memory.PageFault` for memory faults).
    """

    def __init__(self, message: str, *, address: int | None = None, instruction: str = "",
                 cause: Exception | None = None) -> None:
        self.address, self.instruction, self.cause = address, instruction, cause
        where = f" at {address:#x}" if address is not None else ""
        what = f" ({instruction})" if instruction else ""
        super().__init__(f"{message}{where}{what}")


class PageFaultError(KernelFault):
    """A GPU memory access outside every mapping (or past the dispatch's LDS allocation)."""
