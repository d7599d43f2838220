"""PM4 type-3 command building for the gfx11 compute engine (MEC), from the generated bindings.

Every header and field comes from `hcq_bindings.amd.pm4_gfx11` (nvd.h, soc15d.h, kfd_pm4_headers_ai.h)
and `hcq_bindings.amd.gc_11_0_0` (register offsets and fields). Headers are computed once at import;
the builder methods only `extend` a preallocated `array('I')` (the hot path: see
scripts/bench_hcq.py).

The few encodings the headers give only as comments are named here, each citing its comment:
`WaitFunc` (nvd.h, WAIT_REG_MEM "0 - always ... 6 - >"), `MEM_SPACE_MEMORY` ("1 - mem"); the
full cache-control bits and the dispatch initiator are the architecture record's (arch.py).
"""
from __future__ import annotations

import enum
from array import array
from typing import TYPE_CHECKING, Sequence

from hcq_bindings.amd import soc21_enum

from runtime.drivers.amd.arch import GFX11
from runtime.drivers.amd.packets import IB_SIZE_MASK, PM4
from runtime.hcq.errors import QueueError
from runtime.hcq.memory import Buffer, MemKind
from runtime.hcq.program import KernArgs
from runtime.hcq.queue import HWQueue, Value, as_tuple3
from runtime.hcq.signal import TIMESTAMP_OFFSET_B

if TYPE_CHECKING:
    from typing import Self

    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.amd.program import AMDProgram
    from runtime.drivers.amd.ring import HwRing
    from runtime.hcq.signal import Signal

_M32 = 0xFFFFFFFF
# The gfx11 packet builder: its bindings, cache-control bits and initiator are the architecture
# record's.
ARCH = GFX11
p, gc = ARCH.pm4, ARCH.gc


class WaitFunc(enum.IntEnum):
    """WAIT_REG_MEM / POLL_REGMEM compare functions (nvd.h comment under WAIT_REG_MEM_FUNCTION)."""

    ALWAYS = 0
    LT = 1
    LE = 2
    EQ = 3
    NE = 4
    GE = 5
    GT = 6


MEM_SPACE_REGISTER, MEM_SPACE_MEMORY = 0, 1   # nvd.h: WAIT_REG_MEM_MEM_SPACE "0 - reg, 1 - mem"
OPERATION_WAIT, OPERATION_WR_WAIT_WR = 0, 1   # nvd.h: WAIT_REG_MEM_OPERATION
WRITE_DATA_DST_MEMORY = 5                     # nvd.h: WRITE_DATA_DST_SEL "5 - memory (async)"
EVENT_INDEX_PARTIAL_FLUSH = 4                 # nvd.h: EVENT_INDEX "4 - *S_PARTIAL_FLUSH"
POLL_INTERVAL = 4                             # as amdgpu and tinygrad: poll every 4 clocks


# ------------------------------------------------------------------ precomputed headers and fields
# Headers come from the packet descriptions (packets.py): their payload counts are not typed here.
H_WAIT_REG_MEM = PM4["WAIT_REG_MEM"].header
H_RELEASE_MEM = PM4["RELEASE_MEM"].header
H_ACQUIRE_MEM = PM4["ACQUIRE_MEM"].header
H_DISPATCH_DIRECT = PM4["DISPATCH_DIRECT"].header
H_INDIRECT_BUFFER = PM4["INDIRECT_BUFFER"].header
H_EVENT_WRITE = PM4["EVENT_WRITE"].header

WAIT_GE_MEM = p.WAIT_REG_MEM_FUNCTION(WaitFunc.GE) | p.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEMORY) \
    | p.WAIT_REG_MEM_OPERATION(OPERATION_WAIT)

# RELEASE_MEM dword 1: end-of-pipe cache flush with the architecture's GCR bits.
_RM_GCR = ARCH.release_mem_gcr
RM_EOP = p.PACKET3_RELEASE_MEM_EVENT_TYPE(p.CACHE_FLUSH_AND_INV_TS_EVENT) \
    | p.PACKET3_RELEASE_MEM_EVENT_INDEX(p.event_index__mec_release_mem__end_of_pipe)
RM_EOP_FLUSH = RM_EOP | _RM_GCR
# RELEASE_MEM dword 2 variants.
RM_DATA64 = p.PACKET3_RELEASE_MEM_DATA_SEL(p.data_sel__mec_release_mem__send_64_bit_data) \
    | p.PACKET3_RELEASE_MEM_INT_SEL(p.int_sel__mec_release_mem__none)
RM_CLOCK = p.PACKET3_RELEASE_MEM_DATA_SEL(p.data_sel__mec_release_mem__send_gpu_clock_counter) \
    | p.PACKET3_RELEASE_MEM_INT_SEL(p.int_sel__mec_release_mem__none)
RM_DATA32_IRQ = p.PACKET3_RELEASE_MEM_DATA_SEL(p.data_sel__mec_release_mem__send_32_bit_low) \
    | p.PACKET3_RELEASE_MEM_INT_SEL(
        p.int_sel__mec_release_mem__send_interrupt_after_write_confirm)

# ACQUIRE_MEM GCR_CNTL: invalidate every cache level and write back the dirty ones.
GCR_ALL = ARCH.acquire_mem_gcr

# Before a dispatch: invalidate the per-CU vector and scalar caches and GL1 (write back and
# invalidate GLM/GLK), not GL2, which every CU shares; tinygrad and the guide use this 0x3F0.
GCR_DISPATCH = (p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1)
                | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(1)
                | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1)
                | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1)
                | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1))
# After a dispatch: EVENT_WRITE CS_PARTIAL_FLUSH makes the command processor wait until the
# dispatch's waves have finished before it starts the next one (soc21_enum.h, nvd.h EVENT_INDEX).
CS_PARTIAL_FLUSH_EVENT = p.EVENT_TYPE(soc21_enum.CS_PARTIAL_FLUSH) \
    | p.EVENT_INDEX(EVENT_INDEX_PARTIAL_FLUSH)

# The two packets as prebuilt streams (exec extends the queue with them, the hot path).
PRE_DISPATCH = array("I", (H_ACQUIRE_MEM, 0, _M32, 0xFF, 0, 0, POLL_INTERVAL, GCR_DISPATCH))
POST_DISPATCH = array("I", (H_EVENT_WRITE, CS_PARTIAL_FLUSH_EVENT))

# DISPATCH_DIRECT initiator: start the shader, from (0,0,0), in the architecture's wave size.
DISPATCH_INITIATOR = ARCH.dispatch_initiator

# IB_SIZE is bits [19:0] of the last dword; the first field above it is PRE_ENB at bit 21 (nvd.h).
IB_SIZE_MAX_DW = IB_SIZE_MASK
H_SET_SH_REG_6 = PM4["SET_SH_REG"].header_for(7)


class ShRegs:
    """SET_SH_REG indices of the COMPUTE_* registers.

    A register's address is its offset plus the base of its GC segment (`*_BASE_IDX`); the bases
    come from amdgpu's ip_discovery (sysfs), and SET_SH_REG takes the address minus
    PACKET3_SET_SH_REG_START.
    """

    def __init__(self, gc_bases: Sequence[int]) -> None:
        self.bases = tuple(gc_bases)

        def idx(offset: int, base_idx: int) -> int:
            addr = offset + self.bases[base_idx]
            if not p.PACKET3_SET_SH_REG_START <= addr < p.PACKET3_SET_SH_REG_END:
                raise QueueError(f"register {addr:#x} is not an SH register")
            return addr - p.PACKET3_SET_SH_REG_START

        self.PGM_LO = idx(gc.regCOMPUTE_PGM_LO, gc.regCOMPUTE_PGM_LO_BASE_IDX)
        self.PGM_RSRC1 = idx(gc.regCOMPUTE_PGM_RSRC1, gc.regCOMPUTE_PGM_RSRC1_BASE_IDX)
        self.PGM_RSRC3 = idx(gc.regCOMPUTE_PGM_RSRC3, gc.regCOMPUTE_PGM_RSRC3_BASE_IDX)
        self.TMPRING_SIZE = idx(gc.regCOMPUTE_TMPRING_SIZE, gc.regCOMPUTE_TMPRING_SIZE_BASE_IDX)
        self.SCRATCH_BASE_LO = idx(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO,
                                   gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO_BASE_IDX)
        self.RESTART_X = idx(gc.regCOMPUTE_RESTART_X, gc.regCOMPUTE_RESTART_X_BASE_IDX)
        self.RESOURCE_LIMITS = idx(gc.regCOMPUTE_RESOURCE_LIMITS,
                                   gc.regCOMPUTE_RESOURCE_LIMITS_BASE_IDX)
        self.START_X = idx(gc.regCOMPUTE_START_X, gc.regCOMPUTE_START_X_BASE_IDX)
        self.USER_DATA_0 = idx(gc.regCOMPUTE_USER_DATA_0, gc.regCOMPUTE_USER_DATA_0_BASE_IDX)
        # Consecutive registers written by one SET_SH_REG must be adjacent in the register file.
        self._check_adjacent(gc.regCOMPUTE_PGM_LO, gc.regCOMPUTE_PGM_HI)
        self._check_adjacent(gc.regCOMPUTE_PGM_RSRC1, gc.regCOMPUTE_PGM_RSRC2)
        self._check_adjacent(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO,
                             gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_HI)
        self._check_adjacent(gc.regCOMPUTE_START_X, gc.regCOMPUTE_START_Y, gc.regCOMPUTE_START_Z,
                             gc.regCOMPUTE_NUM_THREAD_X, gc.regCOMPUTE_NUM_THREAD_Y,
                             gc.regCOMPUTE_NUM_THREAD_Z)
        self._check_adjacent(gc.regCOMPUTE_RESTART_X, gc.regCOMPUTE_RESTART_Y,
                             gc.regCOMPUTE_RESTART_Z)

    @staticmethod
    def _check_adjacent(*regs: int) -> None:
        if list(regs) != list(range(regs[0], regs[0] + len(regs))):
            raise QueueError(f"registers {[hex(r) for r in regs]} are not consecutive")

    def set_sh_reg(self, index: int, *values: int) -> list[int]:
        """A complete SET_SH_REG packet writing `values` from register `index` on."""
        return [PM4["SET_SH_REG"].header_for(1 + len(values)), index, *values]


class PM4Queue(HWQueue):
    """Command builder for the compute ring (PM4 type-3 packets)."""

    engine = "compute"

    def __init__(self, device: "AMDDevice", ring: "HwRing | None" = None) -> None:
        super().__init__(device)
        self.device: AMDDevice = device
        self.ring = ring  # None: the device's compute ring (a stream has its own)
        self._ib: Buffer | None = None

    # -------------------------------------------------------------- commands
    def wait(self, sig: "Signal", value: Value) -> "Self":
        """WAIT_REG_MEM: stall until the low 32 bits of `sig` >= `value` (a 32-bit compare)."""
        val, var, add = self._resolve(value, 32)
        va = self._sig_va(sig)
        d = self._d
        n = len(d)
        d.extend((H_WAIT_REG_MEM, WAIT_GE_MEM, va & _M32, va >> 32, val, _M32, POLL_INTERVAL))
        if var is not None:
            self._patch(var, add, n + 4, -1, 32)
        return self

    def signal(self, sig: "Signal", value: Value) -> "Self":
        """RELEASE_MEM at end of pipe: flush caches, write the 64-bit value, then write the event id
        into the device's event mailbox with an interrupt so that a CPU sleeping in WAIT_EVENTS
        wakes."""
        val, var, add = self._resolve(value)
        va = self._sig_va(sig)
        d = self._d
        n = len(d)
        d.extend((H_RELEASE_MEM, RM_EOP_FLUSH, RM_DATA64, va & _M32, va >> 32, val & _M32,
                  val >> 32, 0))
        if var is not None:
            self._patch(var, add, n + 5, n + 6)
        ev = self.device.signal_event
        if ev is not None:
            mb = ev.mailbox_va
            d.extend((H_RELEASE_MEM, RM_EOP, RM_DATA32_IRQ, mb & _M32, mb >> 32, ev.event_id, 0,
                      ev.event_id))
        return self

    def timestamp(self, sig: "Signal") -> "Self":
        """RELEASE_MEM with DATA_SEL = GPU clock into the signal's timestamp field."""
        va = self._sig_va(sig) + TIMESTAMP_OFFSET_B
        self._d.extend((H_RELEASE_MEM, RM_EOP, RM_CLOCK, va & _M32, va >> 32, 0, 0, 0))
        return self

    def memory_barrier(self) -> "Self":
        """ACQUIRE_MEM over the whole address range: write back and invalidate every cache level.

        tinygrad also flushes HDP through NBIO registers; that matters only for CPU writes to VRAM
        through the BAR, which this runtime never does (kernel arguments, signals and staging live
        in system memory), and the NBIO register bindings are not generated."""
        self._d.extend((H_ACQUIRE_MEM, 0, _M32, 0xFF, 0, 0, POLL_INTERVAL, GCR_ALL))
        return self

    def exec(  # type: ignore[override]  # takes this driver's programs only
            self, prg: "AMDProgram", args: "KernArgs | Value", global_size: Sequence[int],
            local_size: Sequence[int]) -> "Self":
        """Cache invalidation (ACQUIRE_MEM of the per-CU caches), program state (prebuilt per
        program), user SGPRs (argument and dispatch pointers, patchable), block size,
        DISPATCH_DIRECT of `global_size` workgroups, then EVENT_WRITE CS_PARTIAL_FLUSH.

        The flush after and the invalidation before every dispatch order dispatches of one queue
        (or graph body): without them the command processor starts the next dispatch while the
        previous one's waves still run, and a dependent kernel may read stale or unwritten data
        (tinygrad's sequence; the guide's section 2)."""
        gx, gy, gz = as_tuple3(global_size, "global_size")
        lx, ly, lz = as_tuple3(local_size, "local_size")
        prg.check_launch((gx, gy, gz), (lx, ly, lz))
        d = self._d
        d.extend(PRE_DISPATCH)
        d.extend(prg.pm4_state)
        ptr = args.va if isinstance(args, KernArgs) else args
        val, var, add = self._resolve(ptr)
        n = len(d) + 2  # USER_DATA_0 value position
        d.extend(prg.user_data_header)
        d.extend(prg.user_data(val))
        if var is not None:
            for slot, extra in prg.user_data_pointers:
                self._patch(var, add + extra, n + slot, n + slot + 1)
        regs = self.device.sh_regs
        d.extend((H_SET_SH_REG_6, regs.START_X, 0, 0, 0, lx, ly, lz))
        d.extend((H_DISPATCH_DIRECT, gx, gy, gz, prg.dispatch_initiator))
        d.extend(POST_DISPATCH)
        return self

    def call(self, body: HWQueue) -> "Self":
        """INDIRECT_BUFFER: execute a bound queue's commands."""
        if not isinstance(body, PM4Queue) or body._ib is None:
            raise QueueError("call() needs a PM4 queue that was bound with bind()")
        body._check_bound()
        va = body._ib.va
        self._d.extend((H_INDIRECT_BUFFER, va & _M32, va >> 32,
                        len(body._d) | p.INDIRECT_BUFFER_VALID))
        return self

    # -------------------------------------------------------------- submission
    def bind(self) -> "Self":
        """Copies the commands into uncached GPU-visible memory; later submits send one
        INDIRECT_BUFFER packet and patches write straight into that copy."""
        n = len(self._d)
        if n == 0 or n > IB_SIZE_MAX_DW:
            raise QueueError(f"cannot bind {n} dwords (an IB holds 1 to {IB_SIZE_MAX_DW})")
        self.unbind()
        buf = self.device.alloc(n * 4, kind=MemKind.GTT, cpu_access=True, uncached=True)
        view = buf.cpu_view().cast("I")
        view[:n] = self._d
        self._ib, self._bound = buf, view
        return self

    def _check_bound(self) -> None:
        assert self._bound is not None
        if len(self._d) != len(self._bound):
            raise QueueError(f"commands were added after bind() ({len(self._d)} dwords, "
                             f"{len(self._bound)} bound): bind() again")

    def unbind(self) -> None:
        """Frees the GPU copy made by `bind` (the host copy stays)."""
        if self._ib is not None:
            self._bound = None
            if not self.device.closed:
                self.device.free(self._ib)
            self._ib = None

    def describe_commands(self) -> list[str]:
        """The PM4 packets, decoded (`runtime.drivers.amd.decode`)."""
        from runtime.drivers.amd.decode import DecodeError, decode_pm4
        try:
            return [str(pk) for pk in decode_pm4(self._d, self.device.gc_bases[0])]
        except DecodeError as e:
            return [f"undecodable PM4 stream: {e}"]

    def _submit(self) -> None:
        ring = self.ring or self.device.compute_ring
        if self._ib is not None:
            self._check_bound()
            va = self._ib.va
            ring.put(array("I", (H_INDIRECT_BUFFER, va & _M32, va >> 32,
                                 len(self._d) | p.INDIRECT_BUFFER_VALID)))
        else:
            ring.put(self._d)
