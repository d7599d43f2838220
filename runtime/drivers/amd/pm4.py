"""PM4 type-3 command building for the compute engine (MEC), from the generated bindings of the
device's architecture.

Every header and field comes from the architecture record's bindings (arch.py: nvd.h or soc15d.h,
kfd_pm4_headers_ai.h, the GC register offsets and fields). `pm4_encoding(arch)` computes the
headers and constant words once per architecture; a queue binds its device's encoding when it is
made, and the builder methods only `extend` a preallocated `array('I')` with them (the hot path:
see scripts/bench_hcq.py).

The few encodings the headers give only as comments are named here, each citing its comment (the
same in nvd.h and soc15d.h): `WaitFunc` (WAIT_REG_MEM "0 - always ... 6 - >"), `MEM_SPACE_MEMORY`
("1 - mem"); the cache-control bits and the dispatch initiator are the architecture record's.
"""
from __future__ import annotations

import enum
from array import array
from typing import TYPE_CHECKING, Sequence

from runtime.drivers.amd.arch import AMDArch
from runtime.drivers.amd.packets import IB_SIZE_MASK, packets_for
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
# IB_SIZE is bits [19:0] of the last dword; the first field above it is PRE_ENB at bit 21 (nvd.h).
IB_SIZE_MAX_DW = IB_SIZE_MASK


class PM4Encoding:
    """The headers and constant words of one architecture's PM4 commands, computed once
    (`pm4_encoding(arch)`). Headers come from the packet descriptions (packets.py): their payload
    counts are not typed here."""

    __slots__ = ("arch", "h_wait_reg_mem", "h_release_mem", "h_acquire_mem", "h_dispatch_direct",
                 "h_indirect_buffer", "h_event_write", "h_set_sh_reg_6", "ib_valid",
                 "wait_ge_mem", "rm_eop", "rm_eop_flush", "rm_data64", "rm_clock",
                 "rm_data32_irq", "acquire_all", "gcr_dispatch", "cs_partial_flush_event",
                 "pre_dispatch", "post_dispatch")

    def __init__(self, arch: AMDArch) -> None:
        self.arch = arch
        ps = packets_for(arch)
        p, forms, pk = arch.pm4, ps.forms, ps.pm4
        self.h_wait_reg_mem = pk["WAIT_REG_MEM"].header
        self.h_release_mem = pk["RELEASE_MEM"].header
        self.h_acquire_mem = pk["ACQUIRE_MEM"].header
        self.h_dispatch_direct = pk["DISPATCH_DIRECT"].header
        self.h_indirect_buffer = pk["INDIRECT_BUFFER"].header
        self.h_event_write = pk["EVENT_WRITE"].header
        self.h_set_sh_reg_6 = pk["SET_SH_REG"].header_for(7)
        self.ib_valid = p.INDIRECT_BUFFER_VALID
        self.wait_ge_mem = p.WAIT_REG_MEM_FUNCTION(WaitFunc.GE) \
            | p.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEMORY) | p.WAIT_REG_MEM_OPERATION(OPERATION_WAIT)
        # RELEASE_MEM dword 1: end of pipe, flushing with the architecture's cache bits.
        self.rm_eop = forms.rm_event_type(p.CACHE_FLUSH_AND_INV_TS_EVENT) \
            | forms.rm_event_index(p.event_index__mec_release_mem__end_of_pipe)
        self.rm_eop_flush = self.rm_eop | arch.release_mem_gcr
        # RELEASE_MEM dword 2 variants.
        self.rm_data64 = forms.rm_data_sel(p.data_sel__mec_release_mem__send_64_bit_data) \
            | forms.rm_int_sel(p.int_sel__mec_release_mem__none)
        self.rm_clock = forms.rm_data_sel(p.data_sel__mec_release_mem__send_gpu_clock_counter) \
            | forms.rm_int_sel(p.int_sel__mec_release_mem__none)
        self.rm_data32_irq = forms.rm_data_sel(p.data_sel__mec_release_mem__send_32_bit_low) \
            | forms.rm_int_sel(p.int_sel__mec_release_mem__send_interrupt_after_write_confirm)
        # ACQUIRE_MEM over the whole address range: invalidate every cache level and write back
        # the dirty ones.
        self.acquire_all = array("I", (self.h_acquire_mem,
                                       *forms.acquire_mem(arch.acquire_mem_all, POLL_INTERVAL)))
        self.gcr_dispatch = arch.acquire_mem_dispatch
        # After a dispatch: EVENT_WRITE CS_PARTIAL_FLUSH makes the command processor wait until
        # the dispatch's waves have finished before it starts the next one (the hardware
        # enumerations' event type, nvd.h/soc15d.h EVENT_INDEX).
        self.cs_partial_flush_event = p.EVENT_TYPE(arch.enums.CS_PARTIAL_FLUSH) \
            | p.EVENT_INDEX(EVENT_INDEX_PARTIAL_FLUSH)
        # The two packets around a dispatch as prebuilt streams (exec extends the queue with
        # them, the hot path).
        self.pre_dispatch = array("I", (self.h_acquire_mem,
                                        *forms.acquire_mem(self.gcr_dispatch, POLL_INTERVAL)))
        self.post_dispatch = array("I", (self.h_event_write, self.cs_partial_flush_event))


_ENCODINGS: dict[str, PM4Encoding] = {}


def pm4_encoding(arch: AMDArch) -> PM4Encoding:
    """The PM4 encoding of `arch`, built on first use (a cache: dropping it costs the rebuild)."""
    enc = _ENCODINGS.get(arch.name)
    if enc is None or enc.arch is not arch:
        enc = _ENCODINGS[arch.name] = PM4Encoding(arch)
    return enc


class ShRegs:
    """SET_SH_REG indices of the COMPUTE_* registers.

    A register's address is its offset plus the base of its GC segment (`*_BASE_IDX`); the bases
    come from amdgpu's ip_discovery (sysfs), and SET_SH_REG takes the address minus
    PACKET3_SET_SH_REG_START.
    """

    def __init__(self, gc_bases: Sequence[int], arch: AMDArch) -> None:
        self.bases = tuple(gc_bases)
        p, gc = arch.pm4, arch.gc
        self._set_sh_reg = packets_for(arch).pm4["SET_SH_REG"]

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
        return [self._set_sh_reg.header_for(1 + len(values)), index, *values]


class PM4Queue(HWQueue):
    """Command builder for the compute ring (PM4 type-3 packets)."""

    engine = "compute"

    def __init__(self, device: "AMDDevice", ring: "HwRing | None" = None) -> None:
        super().__init__(device)
        self.device: AMDDevice = device
        self.ring = ring  # None: the device's compute ring (a stream has its own)
        self._ib: Buffer | None = None
        self._k: PM4Encoding = device.pm4_encoding
        self._unflushed = False  # an unordered dispatch has no CS_PARTIAL_FLUSH after it yet
        self._barrier_last = False  # the last command was `barrier` (its invalidation stands)

    # -------------------------------------------------------------- commands
    def wait(self, sig: "Signal", value: Value) -> "Self":
        """WAIT_REG_MEM: stall until the low 32 bits of `sig` >= `value` (a 32-bit compare)."""
        val, var, add = self._resolve(value, 32)
        va = self._sig_va(sig)
        d = self._d
        k = self._k
        n = len(d)
        d.extend((k.h_wait_reg_mem, k.wait_ge_mem, va & _M32, va >> 32, val, _M32, POLL_INTERVAL))
        if var is not None:
            self._patch(var, add, n + 4, -1, 32)
        self._barrier_last = False
        return self

    def signal(self, sig: "Signal", value: Value) -> "Self":
        """RELEASE_MEM at end of pipe: flush caches, write the 64-bit value, then write the event id
        into the device's event mailbox with an interrupt so that a CPU sleeping in WAIT_EVENTS
        wakes."""
        val, var, add = self._resolve(value)
        va = self._sig_va(sig)
        d = self._d
        k = self._k
        n = len(d)
        d.extend((k.h_release_mem, k.rm_eop_flush, k.rm_data64, va & _M32, va >> 32, val & _M32,
                  val >> 32, 0))
        if var is not None:
            self._patch(var, add, n + 5, n + 6)
        ev = self.device.signal_event
        if ev is not None:
            mb = ev.mailbox_va
            d.extend((k.h_release_mem, k.rm_eop, k.rm_data32_irq, mb & _M32, mb >> 32,
                      ev.event_id, 0, ev.event_id))
        return self

    def timestamp(self, sig: "Signal") -> "Self":
        """RELEASE_MEM with DATA_SEL = GPU clock into the signal's timestamp field."""
        va = self._sig_va(sig) + TIMESTAMP_OFFSET_B
        k = self._k
        self._d.extend((k.h_release_mem, k.rm_eop, k.rm_clock, va & _M32, va >> 32, 0, 0, 0))
        return self

    def memory_barrier(self) -> "Self":
        """ACQUIRE_MEM over the whole address range: write back and invalidate every cache level.

        tinygrad also flushes HDP through NBIO registers; that matters only for CPU writes to VRAM
        through the BAR, which this runtime never does (kernel arguments, signals and staging live
        in system memory), and the NBIO register bindings are not generated."""
        self._d.extend(self._k.acquire_all)
        return self

    def exec(  # type: ignore[override]  # takes this driver's programs only
            self, prg: "AMDProgram", args: "KernArgs | Value", global_size: Sequence[int],
            local_size: Sequence[int], *, ordered: bool = True) -> "Self":
        """Cache invalidation (ACQUIRE_MEM of the per-CU caches), program state (prebuilt per
        program), user SGPRs (argument and dispatch pointers, patchable), block size,
        DISPATCH_DIRECT of `global_size` workgroups, then EVENT_WRITE CS_PARTIAL_FLUSH.

        The flush after and the invalidation before every dispatch order dispatches of one queue:
        without them the command processor starts the next dispatch while the previous one's
        waves still run, and a dependent kernel may read stale or unwritten data (tinygrad's
        sequence). An unordered dispatch (`ordered=False`, a graph's independent node) has no
        flush after it; the next ordered dispatch or `barrier` flushes first."""
        gx, gy, gz = as_tuple3(global_size, "global_size")
        lx, ly, lz = as_tuple3(local_size, "local_size")
        prg.check_launch((gx, gy, gz), (lx, ly, lz))
        d = self._d
        k = self._k
        if ordered and self._unflushed:
            d.extend(k.post_dispatch)
        if ordered or not self._barrier_last:
            d.extend(k.pre_dispatch)
        self._barrier_last = False
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
        d.extend((k.h_set_sh_reg_6, regs.START_X, 0, 0, 0, lx, ly, lz))
        d.extend((k.h_dispatch_direct, gx, gy, gz, prg.dispatch_initiator))
        if ordered:
            d.extend(k.post_dispatch)
        self._unflushed = not ordered
        return self

    def barrier(self) -> "Self":
        """EVENT_WRITE CS_PARTIAL_FLUSH (the earlier dispatches finish), then ACQUIRE_MEM of the
        per-CU caches (`HWQueue.barrier`)."""
        k = self._k
        self._d.extend(k.post_dispatch)
        self._d.extend(k.pre_dispatch)
        self._unflushed = False
        self._barrier_last = True
        return self

    def call(self, body: HWQueue) -> "Self":
        """INDIRECT_BUFFER: execute a bound queue's commands."""
        if not isinstance(body, PM4Queue) or body._ib is None:
            raise QueueError("call() needs a PM4 queue that was bound with bind()")
        body._check_bound()
        va = body._ib.va
        k = self._k
        self._d.extend((k.h_indirect_buffer, va & _M32, va >> 32, len(body._d) | k.ib_valid))
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
            return [str(pk) for pk in decode_pm4(self._d, self.device.gc_bases[0],
                                                 arch=self._k.arch)]
        except DecodeError as e:
            return [f"undecodable PM4 stream: {e}"]

    def _submit(self) -> None:
        ring = self.ring or self.device.compute_ring
        if self._ib is not None:
            self._check_bound()
            va = self._ib.va
            k = self._k
            ring.put(array("I", (k.h_indirect_buffer, va & _M32, va >> 32,
                                 len(self._d) | k.ib_valid)))
        else:
            ring.put(self._d)
