"""The mock command processor (MEC) for PM4 compute queues.

Consumes type-3 packets from the ring (and from one level of indirect buffers), decoding them with
the packet descriptions of the GPU's architecture (`runtime.drivers.amd.packets.packets_for`, from
the generated PM4 bindings). Supported: NOP, SET_SH_REG (COMPUTE_* state), DISPATCH_DIRECT (on a
part whose kernels the mock executes, handed to the RDNA3 kernel executor as a `DispatchRecord`;
on another, its registers are checked and a registered kernel model runs, `KernelLaunch`),
RELEASE_MEM (value, GPU clock, interrupt), WAIT_REG_MEM on memory, WRITE_DATA to memory, ACQUIRE_MEM,
EVENT_WRITE and INDIRECT_BUFFER. Anything else is rejected.

Dispatches run one after the other, but their ordering is modelled as the hardware's
(`amd_hazards`): dispatches not separated by EVENT_WRITE CS_PARTIAL_FLUSH (or a wait on the queue's
own end-of-pipe release) count as concurrent, and a data race between them, or a read through
caches that were not invalidated (ACQUIRE_MEM GLV/GL1), faults the queue.

The write pointer is the monotonic dword count the doorbell carries; the read pointer is reported to
the queue's rptr word as a dword offset in the ring, like CP_HQD_PQ_RPTR.
"""
from __future__ import annotations

import operator
import time
from typing import TYPE_CHECKING, Any, Callable

from runtime.drivers.amd.arch import ARCHS
from runtime.drivers.amd.decode import describe_pm4, pm4_fields
from runtime.drivers.amd.packets import packets_for
from runtime.drivers.mock.amd_hazards import HazardError, QueueOrdering, RecordingMemory, merge
from runtime.drivers.mock.amd_gpu import (KernelLaunch, MockAMDGPU, MockGPUError, QueueProcessor,
                                          check_wait_possible, compare)
from runtime.drivers.mock.host_races import pointers_in
from runtime.drivers.mock.memory import PageFault

if TYPE_CHECKING:
    from runtime.drivers.mock.rdna3 import DispatchRecord

_M64 = (1 << 64) - 1
MAX_LDS_B = 64 * 1024
MAX_THREADS = 1024
_USER_SGPRS_MAX = 32           # COMPUTE_PGM_RSRC2.USER_SGPR is 5 bits
_HEADERS_KEPT = 256             # distinct packet headers a queue remembers
# what a RELEASE_MEM writes (its DATA_SEL): the low 32 bits of its data, all 64, the GPU clock
_RM_DATA32, _RM_DATA64, _RM_CLOCK = 1, 2, 3
DISPATCH_SLICE_S = 0.01        # how long one call into the queue runs a dispatch
_ARGS_SCAN_B = 256             # bytes of a kernel's argument block searched for buffer pointers
WRITE_DATA_DST_MEMORY = (2, 5)  # nvd.h WRITE_DATA_DST_SEL: 2 = gl2, 5 = memory (async)
MEM_SPACE_MEMORY = 1            # nvd.h WAIT_REG_MEM_MEM_SPACE: 1 = mem
PLAN_MIN_DW = 16               # the shortest run of packets a queue keeps a plan for (`_replay`)
_PLANS_KEPT = 64                # plans a queue keeps (a droppable cache)
# What a plan's steps do (`_Plan.ops`)
_OP_SH, _OP_INVALIDATE, _OP_FLUSH, _OP_PACKET, _OP_RELEASE, _OP_WAIT = range(6)


class _Plan:
    """A run of packets decoded once (`PM4Processor._replay`): `n` dwords, the dwords that
    decide what it does (headers, SET_SH_REG indices, whole ACQUIRE_MEM and EVENT_WRITE
    packets, RELEASE_MEM selectors) at the positions `check` reads, as `fixed`, and its steps in
    order: a run of SET_SH_REGs as one store of (register, position) pairs, a cache
    invalidation, a partial flush, a RELEASE_MEM of known selectors, a WAIT_REG_MEM of a known
    compare function, or a packet run by its handler."""

    __slots__ = ("n", "check", "fixed", "ops")

    def __init__(self, n: int, fixed_at: list[int], dws: list[int], ops: tuple[Any, ...]
                 ) -> None:
        self.n, self.ops = n, ops
        self.check = operator.itemgetter(*fixed_at)
        self.fixed = self.check(dws)


def _getter(positions: list[int]) -> Callable[[list[int]], tuple[int, ...]]:
    """The dwords at `positions` as a tuple (itemgetter gives a lone item for one position)."""
    if len(positions) == 1:
        i = positions[0]
        return lambda dws: (dws[i],)
    return operator.itemgetter(*positions)


class PM4Processor(QueueProcessor):
    """One PM4 compute queue of the mock GPU."""

    kind = "compute"

    def __init__(self, gpu: MockAMDGPU, queue_id: int, ring_va: int, ring_B: int, rptr_va: int,
                 wptr_va: int) -> None:
        super().__init__(gpu, queue_id, ring_va, ring_B, rptr_va, wptr_va)
        arch = gpu.arch
        assert arch is not None  # the driver opens no GPU of an undescribed architecture
        # The architecture's packets and the selectors it accepts, bound once per queue.
        self.arch = arch
        self.packets = ps = packets_for(arch)
        p = self.p = arch.pm4
        self.gc = arch.gc
        # RELEASE_MEM selectors the MEC accepts (kfd_pm4_headers_ai.h enums).
        self._data_sel_ok = {p.data_sel__mec_release_mem__none,
                             p.data_sel__mec_release_mem__send_32_bit_low,
                             p.data_sel__mec_release_mem__send_64_bit_data,
                             p.data_sel__mec_release_mem__send_gpu_clock_counter}
        self._int_sel_ok = {p.int_sel__mec_release_mem__none,
                            p.int_sel__mec_release_mem__send_interrupt_only,
                            p.int_sel__mec_release_mem__send_interrupt_after_write_confirm}
        self._eop_index = {p.event_index__mec_release_mem__end_of_pipe,
                           p.event_index__mec_release_mem__shader_done}
        # Cache invalidations that make a finished dispatch's writes visible to the next one (the
        # per-CU caches), in ACQUIRE_MEM's cache-control dword and RELEASE_MEM's first dword.
        self._acquire_inv, self._release_inv = arch.acquire_mem_inv, arch.release_mem_inv
        self._acquire_cache_dw = ps.forms.acquire_mem_cache_dw
        self.sh: dict[int, int] = {}   # register offset (GC segment 0) -> value
        self.gc_base = gpu.gc_bases[0]
        # SET_SH_REG's index is the first register's offset from PACKET3_SET_SH_REG_START, and
        # index + count may not pass PACKET3_SET_SH_REG_END (`_set_sh_reg`); `sh` keys are
        # offsets from the GC segment's base
        self._sh_base = p.PACKET3_SET_SH_REG_START - self.gc_base
        self._sh_index_end = p.PACKET3_SET_SH_REG_END - p.PACKET3_SET_SH_REG_START
        # An indirect buffer being executed: (dwords, position, GPU address).
        self._ib: tuple[list[int], int, int] | None = None
        self._ib_packet_size = 0
        self._running: Any = None          # the rdna3.Dispatch in execution, if any
        self._rdna3: tuple[Any, Any, Any] | None = None  # the kernel executor (`_executor`)
        gc = self.gc
        # The COMPUTE_* registers a dispatch's record depends on besides the user data, and the
        # records' constant parts by those registers, the packet and the mappings (a droppable
        # cache; `_dispatch_record`)
        self._record_regs = (gc.regCOMPUTE_PGM_LO, gc.regCOMPUTE_PGM_HI, gc.regCOMPUTE_PGM_RSRC1,
                             gc.regCOMPUTE_PGM_RSRC2, gc.regCOMPUTE_PGM_RSRC3,
                             gc.regCOMPUTE_NUM_THREAD_X, gc.regCOMPUTE_NUM_THREAD_Y,
                             gc.regCOMPUTE_NUM_THREAD_Z, gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO,
                             gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_HI, gc.regCOMPUTE_TMPRING_SIZE)
        self._records: dict[tuple[int, ...], tuple[Any, Callable[[dict[int, int]],
                                                                 tuple[int, ...]]]] = {}
        # Every register a record reads is there from the start, zero (what `_reg` reads for
        # one never set), so they are read with itemgetter, without defaults.
        user0 = gc.regCOMPUTE_USER_DATA_0
        self.sh.update(dict.fromkeys((*self._record_regs, *range(user0, user0 + _USER_SGPRS_MAX)),
                                     0))
        self._record_values = operator.itemgetter(*self._record_regs)
        self._running_mem: Any = None      # the RecordingMemory it runs on
        self._running_since = 0.0
        self._status_key = f"amdgpu {gpu.gpu_id:#x} compute queue {queue_id}"
        self._status_shown = False   # a long dispatch's status line is set (`_dispatch`)
        self.order = QueueOrdering()
        # The ring looked ahead of a blocking wait up to here, and the SH registers as of there
        # (queued dispatches, for host_races).
        self._scanned_dw = 0
        self._scan_sh: dict[int, int] = {}
        # opcode -> (description, handler) of every packet the queue executes
        self._handlers = {pk.opcode: (pk, _PM4_HANDLERS[pk.name]) for pk in ps.pm4.values()}
        # header -> (size, handler) of the well-formed packets seen (a droppable cache)
        self._known: dict[int, tuple[int, Callable[..., bool]]] = {}
        self._f_release_mem = ps.pm4["RELEASE_MEM"].fields
        # RELEASE_MEM's first two dwords (as one int) -> what they select (a droppable cache)
        self._release_forms: dict[int, tuple[int, bool, bool]] = {}
        # WAIT_REG_MEM's first dword -> its compare function; EVENT_WRITE's -> whether it is a
        # CS_PARTIAL_FLUSH (droppable caches)
        self._wait_functions: dict[int, int] = {}
        self._partial_flush: dict[int, bool] = {}
        self._f_wait_reg_mem = ps.pm4["WAIT_REG_MEM"].fields
        self._f_event_write = ps.pm4["EVENT_WRITE"].fields
        # Plans of runs of packets by (first dword, dwords published) (a droppable cache), and
        # the key that missed last: a run is planned the second time in a row it is seen.
        self._plans: dict[tuple[int, int], _Plan] = {}
        self._plan_missed: tuple[int, int] | None = None

    def set_wptr(self, value: int) -> None:
        if value < self.wptr_dw:
            raise MockGPUError(f"compute queue {self.queue_id}: write pointer went backwards "
                               f"({self.wptr_dw} -> {value})")
        self.wptr_dw = value

    # ------------------------------------------------------------------ fetch loop
    def _run(self) -> bool:
        start = self.rptr_dw
        if start >= self.wptr_dw and self._ib is None:
            # nothing published (the GPU's run looks at every queue again after a pass)
            self.blocked = None
            return False
        try:
            return self._fetch()
        finally:
            # The read pointer is published once per call rather than per packet: nothing reads
            # it while the processor runs (the mock runs inside the doorbell write).
            if self.rptr_dw != start:
                self.gpu.mem.write_u32(self.rptr_va, self.rptr_dw % self.size_dw)

    def _fetch(self) -> bool:
        progress = False
        # The published dwords, read once (a list: the packets are sliced from it).
        dws: list[int] = []
        base = self.rptr_dw
        known = self._known
        set_sh_reg, sh = _PM4_HANDLERS["SET_SH_REG"], self.sh
        sh_base, sh_index_end = self._sh_base, self._sh_index_end
        acquire_mem, event_write = _PM4_HANDLERS["ACQUIRE_MEM"], _PM4_HANDLERS["EVENT_WRITE"]
        acquire_cache_dw, acquire_inv = self._acquire_cache_dw, self._acquire_inv
        partial_flush = self._partial_flush
        while True:
            if self._ib is not None:
                if not self._run_ib():
                    return progress
                progress = True
                self._advance(self._ib_packet_size)
                self._ib = None
                continue
            pos = self.rptr_dw
            avail = self.wptr_dw - pos
            if avail <= 0:
                self.blocked = None
                return progress
            if pos - base >= len(dws):
                dws, base = self.ring_dwords(pos, avail), pos
                if avail >= PLAN_MIN_DW:
                    # a run of packets seen before (a launch's, say) runs by its plan
                    ran, waits = self._replay(dws, pos)
                    if ran:
                        progress = True
                        if not waits:
                            self.rptr_dw = pos + ran
                            self.blocked = None
                    if waits:
                        return progress
                    if ran:
                        continue
            at = pos - base
            hit = known.get(dws[at])
            if hit is not None and hit[0] <= avail:
                # `_packet`'s fast path, inline: this loop runs once per packet
                size = hit[0]
                # The packets that cannot wait or fault run inline as well (a handler's call,
                # its body's slice and its position's text cost more than their work): SET_SH_REG
                # (half of a launch's packets) when well-formed (else its handler says what is
                # wrong), ACQUIRE_MEM, and EVENT_WRITE once its event is known.
                handler = hit[1]
                if handler is set_sh_reg:
                    index = dws[at + 1] & 0xFFFF
                    if size > 2 and index + size - 2 <= sh_index_end:
                        i = index + sh_base - at - 2
                        for j in range(at + 2, at + size):
                            sh[i + j] = dws[j]
                        self.rptr_dw = pos + size
                        self.blocked = None
                        progress = True
                        continue
                elif handler is acquire_mem:
                    if dws[at + 1 + acquire_cache_dw] & acquire_inv == acquire_inv:
                        self.order.invalidate()
                    self.rptr_dw = pos + size
                    self.blocked = None
                    progress = True
                    continue
                elif handler is event_write:
                    flush = partial_flush.get(dws[at + 1])
                    if flush is not None:
                        if flush:
                            self.order.partial_flush()
                        self.rptr_dw = pos + size
                        self.blocked = None
                        progress = True
                        continue
                try:
                    done = hit[1](self, dws[at + 1:at + size], f"ring dword {pos}", False)
                except (PageFault, MockGPUError) as e:
                    raise self._packet_error(e, dws[at:at + size], f"ring dword {pos}") from None
            else:
                size, done = self._packet(dws, at, avail, f"ring dword {pos}", False)
                if not size:
                    return progress  # the rest of the packet is not published yet
            if not done:
                return progress
            if self._ib is not None:  # INDIRECT_BUFFER started: run it before moving on
                self._ib_packet_size = size
                continue
            self.rptr_dw = pos + size
            self.blocked = None
            progress = True

    def _replay(self, dws: list[int], pos: int) -> tuple[int, bool]:
        """Runs the packets at the start of `dws` (published at ring position `pos`) by the
        plan kept for them, when their deciding dwords are those it was made from: (dwords of
        the packets it completed, whether one must wait: it is then the current packet). (0,
        False): no plan; the fetch loop runs them one by one. A plan does what that loop does,
        packet by packet: the registers stored, the caches invalidated, the flushes, and the
        other packets by their handlers, with the same errors."""
        key = (dws[0], len(dws))
        plan = self._plans.get(key)
        if plan is None or plan.check(dws) != plan.fixed:
            if self._plan_missed != key:
                self._plan_missed = key
                return 0, False
            self._plan_missed = None
            plan = self._plan(dws)
            if plan is None:
                return 0, False
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            self._plans[key] = plan
        sh = self.sh
        for op in plan.ops:
            kind = op[0]
            if kind == _OP_WAIT:
                # A wait whose value is there passes here (no body slice, no position text);
                # one that must wait, is misaligned or faults goes to its handler, which
                # reads the value again and reports as the fetch loop would.
                _, at, size, func = op
                addr = dws[at + 2] | dws[at + 3] << 32
                if not addr & 3 and self._wait_passes(func, addr, dws[at + 4], dws[at + 5]):
                    continue
                op = (_OP_PACKET, at, size, _PM4_HANDLERS["WAIT_REG_MEM"])
                kind = _OP_PACKET
            if kind == _OP_PACKET:
                _, at, size, handler = op
                # (where the queue is, for a fault report or a wait's look ahead)
                self.rptr_dw = pos + at
                where = f"ring dword {pos + at}"
                try:
                    done = handler(self, dws[at + 1:at + size], where, False)
                except (PageFault, MockGPUError) as e:
                    raise self._packet_error(e, dws[at:at + size], where) from None
                if not done:
                    return at, True
            elif kind == _OP_RELEASE:
                _, at, size, form = op
                self.rptr_dw = pos + at
                try:
                    self._release_at(form, dws, at, pos)
                except (PageFault, MockGPUError) as e:
                    raise self._packet_error(e, dws[at:at + size], f"ring dword {pos + at}") \
                        from None
            elif kind == _OP_SH:
                sh.update(zip(op[1], op[2](dws)))
            elif kind == _OP_INVALIDATE:
                self.order.invalidate()
            else:
                self.order.partial_flush()
        return plan.n, False

    def _plan(self, dws: list[int]) -> _Plan | None:
        """The plan of the packets at the start of `dws` whose headers are known (seen in
        well-formed packets), up to the first that the fetch loop must run itself (an
        INDIRECT_BUFFER or WRITE_DATA, a malformed SET_SH_REG, one not all there); None when
        they are fewer than PLAN_MIN_DW dwords."""
        known, n = self._known, len(dws)
        h = _PM4_HANDLERS
        set_sh_reg, acquire_mem, event_write = h["SET_SH_REG"], h["ACQUIRE_MEM"], h["EVENT_WRITE"]
        release_mem = h["RELEASE_MEM"]
        wait_reg_mem = h["WAIT_REG_MEM"]
        by_handler = (release_mem, wait_reg_mem, h["DISPATCH_DIRECT"])
        acquire_dw, inv = self._acquire_cache_dw, self._acquire_inv
        fixed_at: list[int] = []
        ops: list[tuple[Any, ...]] = []
        sh_keys: list[int] = []
        sh_at: list[int] = []
        at = 0
        while at < n:
            hit = known.get(dws[at])
            if hit is None or at + hit[0] > n:
                break
            size, handler = hit
            if handler is set_sh_reg:
                index = dws[at + 1] & 0xFFFF
                if size <= 2 or index + size - 2 > self._sh_index_end:
                    break
                fixed_at += (at, at + 1)
                sh_keys.extend(range(index + self._sh_base, index + self._sh_base + size - 2))
                sh_at.extend(range(at + 2, at + size))
                at += size
                continue
            if sh_keys:
                ops.append((_OP_SH, tuple(sh_keys), _getter(sh_at)))
                sh_keys, sh_at = [], []
            flush = self._partial_flush.get(dws[at + 1]) if handler is event_write else None
            func = self._wait_functions.get(dws[at + 1]) if handler is wait_reg_mem else None
            form = self._release_forms.get(dws[at + 1] << 32 | dws[at + 2]) \
                if handler is release_mem else None
            if form is not None:
                fixed_at += (at, at + 1, at + 2)
                ops.append((_OP_RELEASE, at, size, form))
            elif func is not None:
                fixed_at += (at, at + 1)
                ops.append((_OP_WAIT, at, size, func))
            elif handler is acquire_mem:
                fixed_at.extend(range(at, at + size))
                if dws[at + 1 + acquire_dw] & inv == inv:
                    ops.append((_OP_INVALIDATE,))
            elif flush is not None:
                fixed_at.extend(range(at, at + size))
                if flush:
                    ops.append((_OP_FLUSH,))
            elif handler is h["NOP"]:
                fixed_at.append(at)
            elif handler in by_handler or handler is event_write:
                fixed_at.append(at)
                ops.append((_OP_PACKET, at, size, handler))
            else:
                break
            at += size
        if sh_keys:
            ops.append((_OP_SH, tuple(sh_keys), _getter(sh_at)))
        if at < PLAN_MIN_DW:
            return None
        return _Plan(at, fixed_at, dws, tuple(ops))

    def _advance(self, size: int) -> None:
        self.rptr_dw += size
        self.blocked = None

    def _run_ib(self) -> bool:
        """Runs the current IB to its end; False if it blocked."""
        assert self._ib is not None
        dws, pos, va = self._ib
        while pos < len(dws):
            where = f"IB {va:#x} dword {pos}"
            size, done = self._packet(dws, pos, len(dws) - pos, where, True)
            if not size:
                raise MockGPUError(f"{where}: {self._describe(dws[pos:])} runs past the end of "
                                   f"the {len(dws)}-dword indirect buffer")
            if not done:
                self._ib = (dws, pos, va)
                return False
            pos += size
        return True

    def _packet(self, dws: list[int], at: int, avail: int, where: str,
                in_ib: bool) -> tuple[int, bool]:
        """Executes the packet at `dws[at]`, of which `avail` dwords are there: (its size, whether
        it is done), or (0, False) when it does not fit in them. A header seen before in a
        well-formed packet names its size and handler at once (`_known`): the checks of the
        header and the payload size are done once per distinct header."""
        h = dws[at]
        hit = self._known.get(h)
        if hit is None:
            size, op = self._header(h, where)
            if size > avail:
                return 0, False
            done = self._execute(dws[at:at + size], op, where, in_ib)  # raises if malformed
            if len(self._known) >= _HEADERS_KEPT:
                self._known.clear()
            self._known[h] = (size, _PM4_HANDLERS["NOP"] if op < 0 else self._handlers[op][1])
            return size, done
        size, handler = hit
        if size > avail:
            return 0, False
        try:
            return size, handler(self, dws[at + 1:at + size], where, in_ib)
        except (PageFault, MockGPUError) as e:
            raise self._packet_error(e, dws[at:at + size], where) from None

    def _packet_error(self, e: PageFault | MockGPUError, pkt: list[int],
                      where: str) -> MockGPUError:
        """The queue's error for a packet that faulted or was refused: it names the packet."""
        if isinstance(e, PageFault):
            return MockGPUError(f"{where}: {e}\n  packet: {self._describe(pkt)}", e.va)
        return MockGPUError(f"{e}\n  packet: {self._describe(pkt)}", e.va)

    def _header(self, h: int, where: str) -> tuple[int, int]:
        """(size in dwords, opcode) of the packet whose header is `h`; opcode -1 for a type-2
        filler dword."""
        p = self.p
        if h == p.CP_PACKET2:
            return 1, -1
        typ, size, op = self.packets.split_pm4_header(h)
        if typ != p.PACKET_TYPE3:
            raise MockGPUError(f"{where}: header {h:#010x} is a type-{typ} packet; compute queues "
                               "take type-3 packets")
        return size, op

    # ------------------------------------------------------------------ packets
    def _execute(self, pkt: list[int], op: int, where: str, in_ib: bool) -> bool:
        """Executes one packet (`op` from its header); False if it must wait. Errors name the
        packet."""
        try:
            return self._execute_packet(pkt, op, where, in_ib)
        except (PageFault, MockGPUError) as e:
            raise self._packet_error(e, pkt, where) from None

    def _describe(self, pkt: list[int]) -> str:
        return describe_pm4(pkt, self.gc_base, arch=self.arch)

    def _execute_packet(self, pkt: list[int], op: int, where: str, in_ib: bool) -> bool:
        if op < 0:
            return True  # CP_PACKET2
        hit = self._handlers.get(op)
        if hit is None:
            known = self.packets.pm4_opcode_names.get(op)
            what = f"{known} ({op:#x}) is not supported on a compute queue" if known else \
                f"unknown opcode {op:#x}"
            raise MockGPUError(f"{where}: {what} (header {pkt[0]:#010x})")
        pk, handler = hit
        body = pkt[1:]
        n = len(body)
        if n != pk.payload_dw and not (pk.variable and n > pk.payload_dw):
            bad = pk.check(n)
            if bad:
                raise MockGPUError(f"{where}: {bad}")
        return handler(self, body, where, in_ib)  # type: ignore[no-any-return]

    # Handlers by packet (runtime/drivers/amd/packets.py), each (body, where, in_ib) -> done.
    def _h_set_sh_reg(self, body: list[int], where: str, in_ib: bool) -> bool:
        n = len(body) - 1
        index = body[0] & 0xFFFF
        if n < 1 or index + n > self._sh_index_end:
            self._set_sh_reg(body, where)  # raises, naming what is wrong
        i = index + self._sh_base
        sh = self.sh
        for v in body[1:]:
            sh[i] = v
            i += 1
        return True

    def _h_dispatch_direct(self, body: list[int], where: str, in_ib: bool) -> bool:
        return self._dispatch(body, where)

    def _h_release_mem(self, body: list[int], where: str, in_ib: bool) -> bool:
        self._release_mem(body, where)
        return True

    def _h_wait_reg_mem(self, body: list[int], where: str, in_ib: bool) -> bool:
        return self._wait_reg_mem(body, where)

    def _h_acquire_mem(self, body: list[int], where: str, in_ib: bool) -> bool:
        if body[self._acquire_cache_dw] & self._acquire_inv == self._acquire_inv:
            self.order.invalidate()
        return True

    def _h_write_data(self, body: list[int], where: str, in_ib: bool) -> bool:
        self._write_data(body, where)
        return True

    def _h_indirect_buffer(self, body: list[int], where: str, in_ib: bool) -> bool:
        if in_ib:
            raise MockGPUError(f"{where}: INDIRECT_BUFFER inside an indirect buffer (compute "
                               "queues run one IB level)")
        self._start_ib(body, where)
        return True

    def _h_event_write(self, body: list[int], where: str, in_ib: bool) -> bool:
        flush = self._partial_flush.get(body[0])
        if flush is None:
            flush = self._f_event_write(body, 0)["event_type"] == \
                self.arch.enums.CS_PARTIAL_FLUSH
            if len(self._partial_flush) >= _HEADERS_KEPT:
                self._partial_flush.clear()
            self._partial_flush[body[0]] = flush
        if flush:
            self.order.partial_flush()
        return True

    def _h_nop(self, body: list[int], where: str, in_ib: bool) -> bool:
        return True

    def _set_sh_reg(self, body: list[int], where: str) -> None:
        if len(body) < 2:
            raise MockGPUError(f"{where}: PACKET3_SET_SH_REG without values")
        p = self.p
        index = body[0] & 0xFFFF
        addr = index + p.PACKET3_SET_SH_REG_START
        if addr + len(body) - 1 > p.PACKET3_SET_SH_REG_END:
            raise MockGPUError(f"{where}: SET_SH_REG index {index:#x} + {len(body) - 1} leaves the "
                               "SH register range")
        for i, v in enumerate(body[1:]):
            self.sh[addr + i - self.gc_base] = v

    def _reg(self, offset: int) -> int:
        return self.sh.get(offset, 0)

    def _dispatch(self, body: list[int], where: str) -> bool:
        """Runs the dispatch for up to DISPATCH_SLICE_S; False (the packet stays current) while
        it is not done, so a kernel that never ends cannot hang the host: the queue reports its
        waves' program counters and later calls continue it."""
        if not self.gpu.executes_kernels:
            return self._dispatch_model(body, where)
        Dispatch, KernelFault, _ = self._rdna3 or self._executor(where)
        races = self.gpu.mem.races
        key = (id(self), where)
        if self._running is None:
            rec = self._dispatch_record(body, where)
            if rec is None:
                return True  # an empty grid launches no waves
            self._running_mem = RecordingMemory(self.gpu.mem)
            try:
                # a MockMemory that records what the dispatch touches (amd_hazards)
                self._running = Dispatch(rec, self._running_mem)  # type: ignore[arg-type]
            except KernelFault as e:
                raise _kernel_fault(where, rec.pgm_addr, e) from None
            self._running_since = time.perf_counter()
        if races is not None:
            races.resume(key)  # host writes since it was queued, or since its last slice
        run = self._running
        try:
            done = run.advance(DISPATCH_SLICE_S)
        except KernelFault as e:
            self._running = None
            self._status_shown = False
            self.gpu.driver.os.clear_kernel_status(self._status_key)
            if races is not None:
                races.forget(key)
            raise _kernel_fault(where, run.record.pgm_addr, e) from None
        if not done:
            # one range per access: a kernel running for many slices would grow them for ever
            self._running_mem.compact()
        if races is not None:
            races.gpu_wrote()
            rm = self._running_mem
            if not done:
                ptrs, blocks = self._arg_pointers(run.record.user_sgprs)
                races.paused(key, self._kernel_name(run.record.pgm_addr, where), ptrs,
                             self.gpu.mem, blocks, _written(rm))
            elif races.watching(key):
                races.finished(key, None if rm.unbounded else
                               rm.ranges["read"] + rm.ranges["write"] + rm.ranges["atomic"],
                               _written(rm))
        if not done:
            t = time.perf_counter() - self._running_since
            self.blocked = f"{where}: DISPATCH_DIRECT of the kernel at " \
                f"{run.record.pgm_addr:#x} running for {t:.2f} s: {run.describe()}"
            self.gpu.driver.os.set_kernel_status(
                self._status_key, f"mock amdgpu {self.gpu.gpu_id:#x}: compute queue "
                f"{self.queue_id}: {self.blocked}")
            self._status_shown = True
            return False
        self._running = None
        if self._status_shown:
            self._status_shown = False
            self.gpu.driver.os.clear_kernel_status(self._status_key)
        self.gpu.record_dispatch(run.record, run.stats)
        try:
            self.order.dispatched(run.record.pgm_addr, where, self._running_mem)
        except HazardError as e:
            raise MockGPUError(f"{where}: {e}") from None
        return True

    def _executor(self, where: str) -> tuple[Any, Any, Any]:
        """(Dispatch, KernelFault, DispatchRecord) of the RDNA3 kernel executor, imported at the
        first dispatch (a statement per dispatch otherwise)."""
        if self._rdna3 is None:
            try:
                from runtime.drivers.mock.rdna3 import Dispatch, DispatchRecord, KernelFault
            except ImportError as e:
                raise MockGPUError(f"{where}: DISPATCH_DIRECT: no kernel executor "
                                   f"(runtime.drivers.mock.rdna3 is not available: {e})") from None
            self._rdna3 = (Dispatch, KernelFault, DispatchRecord)
        return self._rdna3

    def _dispatch_regs(self, body: list[int], where: str) -> dict[str, Any] | None:
        """The COMPUTE_* state a DISPATCH_DIRECT runs with, checked as the hardware would need it;
        None for an empty grid."""
        gc = self.gc
        arch = self.arch
        gx, gy, gz, initiator = body
        if not initiator & gc.COMPUTE_DISPATCH_INITIATOR__COMPUTE_SHADER_EN_MASK:
            raise MockGPUError(f"{where}: DISPATCH_DIRECT without COMPUTE_SHADER_EN")
        wave64 = not initiator & arch.initiator_wave32
        if 0 in (gx, gy, gz):
            return None
        pgm = ((self._reg(gc.regCOMPUTE_PGM_HI) << 32) | self._reg(gc.regCOMPUTE_PGM_LO)) << 8
        if pgm == 0:
            raise MockGPUError(f"{where}: DISPATCH_DIRECT with COMPUTE_PGM_LO/HI unset")
        self.gpu.mem.find(pgm, 4, "instruction fetch")
        rsrc1 = self._reg(gc.regCOMPUTE_PGM_RSRC1)
        rsrc2 = self._reg(gc.regCOMPUTE_PGM_RSRC2)
        rsrc3 = self._reg(gc.regCOMPUTE_PGM_RSRC3)
        block = (self._reg(gc.regCOMPUTE_NUM_THREAD_X), self._reg(gc.regCOMPUTE_NUM_THREAD_Y),
                 self._reg(gc.regCOMPUTE_NUM_THREAD_Z))
        if 0 in block or block[0] * block[1] * block[2] > MAX_THREADS:
            raise MockGPUError(f"{where}: workgroup {block} (COMPUTE_NUM_THREAD_*) must have 1 to "
                               f"{MAX_THREADS} threads")
        n_user = (rsrc2 & gc.COMPUTE_PGM_RSRC2__USER_SGPR_MASK) \
            >> gc.COMPUTE_PGM_RSRC2__USER_SGPR__SHIFT
        sh, user0 = self.sh, gc.regCOMPUTE_USER_DATA_0
        user = tuple([sh.get(user0 + i, 0) for i in range(n_user)])
        lds = ((rsrc2 & gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK)
               >> gc.COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT) * arch.lds_granule_B
        if lds > MAX_LDS_B:
            raise MockGPUError(f"{where}: RSRC2.LDS_SIZE asks for {lds} B of LDS (max {MAX_LDS_B})")
        if arch.unified_agprs:
            # ACCUM_OFFSET (offset / 4 - 1) must leave the accumulation registers inside the
            # VGPRs RSRC1 allocates (granules of 8)
            accum = (((rsrc3 & gc.COMPUTE_PGM_RSRC3__ACCUM_OFFSET_MASK)
                      >> gc.COMPUTE_PGM_RSRC3__ACCUM_OFFSET__SHIFT) + 1) * 4
            vgprs = (((rsrc1 & gc.COMPUTE_PGM_RSRC1__VGPRS_MASK)
                      >> gc.COMPUTE_PGM_RSRC1__VGPRS__SHIFT) + 1) * 8
            if accum > vgprs:
                raise MockGPUError(f"{where}: RSRC3.ACCUM_OFFSET {accum} is beyond the {vgprs} "
                                   "VGPRs of RSRC1")
        scratch = ((self._reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_HI) << 32)
                   | self._reg(gc.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO)) << 8
        tmpring = self._reg(gc.regCOMPUTE_TMPRING_SIZE)
        waves = (tmpring & gc.COMPUTE_TMPRING_SIZE__WAVES_MASK) \
            >> gc.COMPUTE_TMPRING_SIZE__WAVES__SHIFT
        wavesize = (tmpring & gc.COMPUTE_TMPRING_SIZE__WAVESIZE_MASK) \
            >> gc.COMPUTE_TMPRING_SIZE__WAVESIZE__SHIFT
        if rsrc2 & gc.COMPUTE_PGM_RSRC2__SCRATCH_EN_MASK and waves and wavesize:
            self.gpu.mem.find(scratch, waves * wavesize * arch.scratch_wave_unit_B, "scratch")
        return {"pgm": pgm, "rsrc": (rsrc1, rsrc2, rsrc3), "user": user, "grid": (gx, gy, gz),
                "block": block, "lds": lds, "scratch": scratch,
                "scratch_wave_B": wavesize * arch.scratch_wave_unit_B, "scratch_slots": waves,
                "wave64": wave64}

    def _dispatch_record(self, body: list[int], where: str) -> "DispatchRecord | None":
        # The checks and decoding of `_dispatch_regs` depend on the packet, the COMPUTE_*
        # registers but the user data, and the mappings (the program and scratch must be
        # mapped): done once per distinct set of those, which keeps the record with its user
        # data left out. The user data (the argument pointer) changes from launch to launch and
        # is read each time.
        DispatchRecord = (self._rdna3 or self._executor(where))[2]
        sh = self.sh
        key = (*body, self.gpu.mem.generation, *self._record_values(sh))
        hit = self._records.get(key)
        if hit is None:
            arch = self.arch
            if arch.wave_size != 32:
                raise MockGPUError(f"{where}: the mock runs gfx11 (wave32 and wave64 dispatches) "
                                   f"only, not an architecture whose wave size is "
                                   f"{arch.wave_size}")
            r = self._dispatch_regs(body, where)
            if r is None:
                return None
            rsrc1, rsrc2, rsrc3 = r["rsrc"]
            hit = (DispatchRecord(r["pgm"], rsrc1, rsrc2, rsrc3, (), r["grid"], r["block"],
                                  r["lds"], r["scratch"], scratch_wave_B=r["scratch_wave_B"],
                                  scratch_slots=r["scratch_slots"], wave64=r["wave64"]),
                   _user_data_getter(self.gc.regCOMPUTE_USER_DATA_0, len(r["user"])))
            if len(self._records) >= _HEADERS_KEPT:
                self._records.clear()
            self._records[key] = hit
        record, user_data = hit
        return record.with_user(user_data(sh))  # type: ignore[no-any-return]

    def _dispatch_model(self, body: list[int], where: str) -> bool:
        """A dispatch on a part whose kernels the mock does not execute: its state is checked
        like any dispatch's, then the kernel model registered for its entry point (if any) stands
        in for the kernel; its memory accesses fault like a kernel's would."""
        r = self._dispatch_regs(body, where)
        if r is None:
            return True
        if not r["wave64"]:
            raise MockGPUError(f"{where}: DISPATCH_DIRECT selects wave32, which {self.arch.name} "
                               "does not run")
        launch = None
        model = self.gpu.kernels.get(r["pgm"])
        races = self.gpu.mem.races
        key = (id(self), where)
        if model is not None:
            fn, kernarg_sgpr = model
            if kernarg_sgpr + 2 > len(r["user"]):
                raise MockGPUError(f"{where}: the kernel's kernarg pointer is user SGPR "
                                   f"{kernarg_sgpr}, but RSRC2 loads {len(r['user'])}")
            launch = KernelLaunch(self.gpu, r["pgm"], r["grid"], r["block"], r["user"],
                                  kernarg_sgpr)
            if races is not None:
                races.resume(key)  # host writes since it was queued
            try:
                fn(launch)
            except PageFault as e:
                if races is not None:
                    races.forget(key)
                raise MockGPUError(f"{where}: kernel at {r['pgm']:#x} faulted: {e}", e.va) \
                    from None
            if races is not None:
                races.gpu_wrote()
                races.finished(key, launch.touched)
        self.gpu.record_dispatch(launch or r, None)
        return True

    def _release_mem(self, body: list[int], where: str) -> None:
        # What the first two dwords select, checked once per distinct pair (`_release_form`).
        form = self._release_forms.get(body[0] << 32 | body[1])
        if form is None:
            form = self._release_form(body, where)
        self._release(form, body, where)

    def _release(self, form: tuple[int, bool, bool], body: list[int], where: str) -> None:
        """A RELEASE_MEM whose first two dwords select `form` (`_release_form`)."""
        kind, invalidates, irq = form
        if kind:
            addr = body[2] | body[3] << 32
            gpu = self.gpu
            if kind == _RM_DATA32:
                self.order.release(addr, invalidates)
                if addr & 3:
                    self._aligned(addr, 4, "RELEASE_MEM 32-bit", where)
                gpu.mem.write_u32(addr, body[4])
            elif kind == _RM_DATA64:
                self.order.release(addr, invalidates)
                if addr & 7:
                    self._aligned(addr, 8, "RELEASE_MEM 64-bit", where)
                gpu.mem.write_u64(addr, body[4] | body[5] << 32)
            else:
                if addr & 7:
                    self._aligned(addr, 8, "RELEASE_MEM GPU clock", where)
                gpu.mem.write_u64(addr, gpu.clock())
        if irq:
            self.gpu.interrupt(body[6])

    def _release_at(self, form: tuple[int, bool, bool], dws: list[int], at: int,
                    pos: int) -> None:
        """`_release` of the RELEASE_MEM at `dws[at]` (ring dword `pos + at`), reading its
        dwords in place: its body and position text are made only for a misaligned address."""
        kind, invalidates, irq = form
        if kind:
            addr = dws[at + 3] | dws[at + 4] << 32
            if kind == _RM_DATA32 and not addr & 3:
                self.order.release(addr, invalidates)
                self.gpu.mem.write_u32(addr, dws[at + 5])
            elif kind == _RM_DATA64 and not addr & 7:
                self.order.release(addr, invalidates)
                self.gpu.mem.write_u64(addr, dws[at + 5] | dws[at + 6] << 32)
            elif kind == _RM_CLOCK and not addr & 7:
                self.gpu.mem.write_u64(addr, self.gpu.clock())
            else:
                self._release((kind, invalidates, False), dws[at + 1:at + 8],
                              f"ring dword {pos + at}")
        if irq:
            self.gpu.interrupt(dws[at + 7])

    def _wait_passes(self, func: int, addr: int, ref: int, mask: int) -> bool:
        """Whether a WAIT_REG_MEM of compare function `func` on the aligned `addr` passes now
        (then done, as `_wait_reg_mem` does it); False when it must wait or the read faults."""
        try:
            value = self.gpu.mem.read_u32(addr)
        except PageFault:
            return False
        if compare(func, value & mask, ref):
            self.order.waited(addr)
            return True
        return False

    def _release_form(self, body: list[int], where: str) -> tuple[int, bool, bool]:
        """(what is written: 0 nothing or one of _RM_*, whether the release invalidates the
        per-CU caches, whether it interrupts) of a RELEASE_MEM whose first two dwords are those
        of `body`; raises for selectors the MEC does not take. Kept per pair of dwords."""
        p = self.p
        f = self._f_release_mem(body, 0)
        if f["event_index"] not in self._eop_index:
            raise MockGPUError(f"{where}: RELEASE_MEM event_index {f['event_index']} is not "
                               "end-of-pipe or shader-done")
        if f["data_sel"] not in self._data_sel_ok or f["int_sel"] not in self._int_sel_ok:
            raise MockGPUError(f"{where}: RELEASE_MEM data_sel {f['data_sel']} / int_sel "
                               f"{f['int_sel']} not supported")
        data_sel = f["data_sel"]
        kind = {p.data_sel__mec_release_mem__send_32_bit_low: _RM_DATA32,
                p.data_sel__mec_release_mem__send_64_bit_data: _RM_DATA64,
                p.data_sel__mec_release_mem__send_gpu_clock_counter: _RM_CLOCK}.get(data_sel, 0)
        form = (kind, body[0] & self._release_inv == self._release_inv,
                f["int_sel"] != p.int_sel__mec_release_mem__none)
        if len(self._release_forms) >= _HEADERS_KEPT:
            self._release_forms.clear()
        self._release_forms[body[0] << 32 | body[1]] = form
        return form

    def _wait_reg_mem(self, body: list[int], where: str) -> bool:
        func = self._wait_functions.get(body[0])
        if func is None:
            func = self._wait_function(body, where)
        addr, ref, mask = body[1] | body[2] << 32, body[3], body[4]
        if addr & 3:
            self._aligned(addr, 4, "WAIT_REG_MEM", where)
        value = self.gpu.mem.read_u32(addr) & mask
        if compare(func, value, ref):
            self.order.waited(addr)
            return True
        # (checked once the compare fails: one that can never hold cannot have held)
        check_wait_possible(func, ref, mask, f"{where}: WAIT_REG_MEM")
        self.blocked = f"{where}: WAIT_REG_MEM mem[{addr:#x}] = {value:#x}, waiting for " \
                       f"{['always', '<', '<=', '==', '!=', '>=', '>'][func]} {ref:#x}"
        if self._ib is None and self.gpu.mem.races is not None:
            self._watch_queued()
        return False

    def _wait_function(self, body: list[int], where: str) -> int:
        """The compare function of a WAIT_REG_MEM whose first dword is `body[0]`, which must wait
        on memory; kept per distinct dword."""
        f = self._f_wait_reg_mem(body, 0)
        if f["mem_space"] != MEM_SPACE_MEMORY:
            raise MockGPUError(f"{where}: WAIT_REG_MEM on registers is not modelled by the mock")
        if f["operation"] != 0:
            raise MockGPUError(f"{where}: WAIT_REG_MEM operation {f['operation']} needs registers")
        if len(self._wait_functions) >= _HEADERS_KEPT:
            self._wait_functions.clear()
        self._wait_functions[body[0]] = f["function"]
        return f["function"]

    # ------------------------------------------------------------------ host races
    @staticmethod
    def _kernel_name(pgm: int, where: str) -> str:
        return f"the kernel at {pgm:#x} ({where})"

    def _arg_pointers(self, user: tuple[int, ...],
                      kernarg_sgpr: int | None = None) -> tuple[list[int], list[int]]:
        """(the buffer pointers among a dispatch's arguments, the argument blocks' addresses):
        the user SGPR pairs (or the kernel model's kernarg pair) point to the argument blocks."""
        pairs = range(0, len(user) - 1, 2) if kernarg_sgpr is None else (kernarg_sgpr,)
        blocks = [user[i] | user[i + 1] << 32 for i in pairs if i + 1 < len(user)]
        return pointers_in(self.gpu.mem, [(b, _ARGS_SCAN_B) for b in blocks]), blocks

    def _watch_queued(self) -> None:
        """The queue waits: the dispatches already in the ring behind the wait are queued
        kernels, whose memory host_races watches from now on. Reads the ring ahead without
        executing anything (register writes go to a copy of the SH registers)."""
        races = self.gpu.mem.races
        if self._scanned_dw <= self.rptr_dw:
            self._scanned_dw, self._scan_sh = self.rptr_dw, dict(self.sh)
        pos, sh, gc = self._scanned_dw, self._scan_sh, self.gc
        names = self.packets.pm4_by_opcode
        while pos < self.wptr_dw:
            try:
                size, op = self._header(int(self.ring[pos % self.size_dw]), "")
            except MockGPUError:
                return  # the fetch loop reports it when it gets there
            if pos + size > self.wptr_dw:
                break
            pk = names.get(op)
            if pk is not None and pk.name == "SET_SH_REG" and size > 2:
                body = self.ring_dwords(pos + 1, size - 1)
                addr = (body[0] & 0xFFFF) + self.p.PACKET3_SET_SH_REG_START - self.gc_base
                for i, v in enumerate(body[1:]):
                    sh[addr + i] = v
            elif pk is not None and pk.name == "DISPATCH_DIRECT":
                pgm = ((sh.get(gc.regCOMPUTE_PGM_HI, 0) << 32)
                       | sh.get(gc.regCOMPUTE_PGM_LO, 0)) << 8
                rsrc2 = sh.get(gc.regCOMPUTE_PGM_RSRC2, 0)
                n_user = (rsrc2 & gc.COMPUTE_PGM_RSRC2__USER_SGPR_MASK) \
                    >> gc.COMPUTE_PGM_RSRC2__USER_SGPR__SHIFT
                user = tuple(sh.get(gc.regCOMPUTE_USER_DATA_0 + i, 0) for i in range(n_user))
                model = self.gpu.kernels.get(pgm)
                if self.gpu.executes_kernels or model is not None:
                    where = f"ring dword {pos}"
                    ptrs, blocks = self._arg_pointers(user, None if model is None else model[1])
                    races.watch((id(self), where), self._kernel_name(pgm, where), ptrs,
                                self.gpu.mem, "queued", blocks)
            pos += size
        self._scanned_dw = pos

    def _write_data(self, body: list[int], where: str) -> None:
        if len(body) < 4:
            raise MockGPUError(f"{where}: WRITE_DATA without data")
        f = pm4_fields(self.p.PACKET3_WRITE_DATA, body, arch=self.arch)
        if f["dst_sel"] not in WRITE_DATA_DST_MEMORY:
            raise MockGPUError(f"{where}: WRITE_DATA dst_sel {f['dst_sel']} is not memory")
        addr = f["addr"]
        self._aligned(addr, 4, "WRITE_DATA", where)
        one_addr = bool(body[0] & self.p.WR_ONE_ADDR)
        for i, v in enumerate(body[3:]):
            self.gpu.mem.write_u32(addr if one_addr else addr + 4 * i, v)

    def _start_ib(self, body: list[int], where: str) -> None:
        f = pm4_fields(self.p.PACKET3_INDIRECT_BUFFER, body, arch=self.arch)
        if not f["valid"]:
            raise MockGPUError(f"{where}: INDIRECT_BUFFER without the VALID bit")
        va, size = f["ib_base"], f["ib_size"]
        self._aligned(va, 4, "INDIRECT_BUFFER", where)
        if size == 0:
            raise MockGPUError(f"{where}: INDIRECT_BUFFER of 0 dwords")
        dws = self.gpu.mem.view(va, size * 4, "IB fetch").view("<u4").tolist()
        self._ib = (dws, 0, va)

    @staticmethod
    def _aligned(addr: int, align: int, what: str, where: str) -> None:
        if addr % align:
            raise MockGPUError(f"{where}: {what} address {addr:#x} is not {align}-byte aligned")

    def describe(self) -> str:
        line = super().describe()
        if self.faulted is None and self.wptr_dw > self.rptr_dw:
            pkt = self.ring_dwords(self.rptr_dw, min(16, self.wptr_dw - self.rptr_dw))
            line += f"; next: {self._describe(pkt)}"
        return line



def _user_data_getter(user0: int, n: int) -> Callable[[dict[int, int]], tuple[int, ...]]:
    """A function of the SH registers giving COMPUTE_USER_DATA_0.. (n of them) as a tuple."""
    if n >= 2:
        return operator.itemgetter(*range(user0, user0 + n))
    return (lambda sh: (sh[user0],)) if n == 1 else (lambda sh: ())


def _written(rm: RecordingMemory) -> "list[tuple[int, int]] | None":
    """The byte ranges a dispatch wrote so far (merged), None when they are not bounded."""
    return None if rm.unbounded else merge(rm.ranges["write"] + rm.ranges["atomic"])


def _kernel_fault(where: str, pgm: int, e: Exception) -> MockGPUError:
    # A memory fault is reported as one (KFD's memory event with the VA), not as a hang.
    cause = getattr(e, "cause", None)
    va = cause.va if isinstance(cause, PageFault) else None
    return MockGPUError(f"{where}: kernel at {pgm:#x} faulted: {e}", va)


_PM4_HANDLERS: dict[str, Callable[[PM4Processor, list[int], str, bool], bool]] = {
    "SET_SH_REG": PM4Processor._h_set_sh_reg, "DISPATCH_DIRECT": PM4Processor._h_dispatch_direct,
    "RELEASE_MEM": PM4Processor._h_release_mem, "WAIT_REG_MEM": PM4Processor._h_wait_reg_mem,
    "ACQUIRE_MEM": PM4Processor._h_acquire_mem, "WRITE_DATA": PM4Processor._h_write_data,
    "INDIRECT_BUFFER": PM4Processor._h_indirect_buffer,
    "EVENT_WRITE": PM4Processor._h_event_write, "NOP": PM4Processor._h_nop,
}
# every described PM4 packet has a handler in the mock
assert all(set(_PM4_HANDLERS) >= a.pm4_packets for a in ARCHS), "a PM4 packet without a handler"
