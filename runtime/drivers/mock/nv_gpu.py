"""The mock NVIDIA GPU: memory, channels, and a GPFIFO processor that executes host semaphores, the
copy engine and compute launches, decoding every QMD and checking the fields a driver sets.

Channels run on the GPU's own thread (`runtime.drivers.mock.engine`), woken by their doorbell (the
token written at usermode + 0x90), which returns at once: each GPFIFO entry between GP_GET and
USERD's GP_PUT is fetched from GPU memory and its methods are executed in order. A semaphore
acquire that is not yet satisfied blocks the channel at that method; blocked channels are polled
(a real GPU keeps polling), so a CPU store to a signal releases the GPU within a millisecond. In
the deterministic mode (HCQ_MOCK_SYNC=1) channels run inside the doorbell write, and a poller
thread retries blocked ones.

Anything real hardware would reject stops the channel with an RC error, as RM reports one: the
channel's error notifier (hObjectError) gets info32 = the Xid, status 0xFFFF, and the mock kernel
log the reason, naming the method or QMD field. Method offsets and QMD field positions come from
`hcq_bindings.nv.classes` (the decoder is `runtime.drivers.nv.methods`, shared with error reports).

Kernels whose program address holds a PTX entry record (the image `runtime.drivers.nv.ptx` lays
out; NVDevice compiles to PTX on this mock) run through the PTX interpreter
(`runtime.drivers.mock.ptx`) with the QMD's grid, block and shared memory and constant bank 0, in
time slices: a grid still running keeps its channel blocked at the launch, so a kernel that never
ends cannot hang the host. SASS (a cubin) is not executed: a test may register a Python model for a
program address (`register_kernel`), called with the decoded launch; otherwise such a launch only
records what it would have run.
"""
from __future__ import annotations

import struct
import threading
import time
import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Container, Iterator

import numpy as np

from hcq_bindings.nv import classes as cl
from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.mock.engine import EngineThread, sync_from_env
from runtime.drivers.mock.host_races import pointers_among, pointers_in
from runtime.drivers.mock.memory import MockMemory, PageFault
from runtime.drivers.mock.ptx.launch import PtxLaunch
from runtime.drivers.nv.generation import NVGeneration, generation_named
from runtime.drivers.nv.methods import describe_method, fget

if TYPE_CHECKING:
    from runtime.drivers.mock.nv_rm import MockNVDriver

USERMODE_B = 0x10000
DOORBELL_B = 0x90
USERD_GP_GET = int(getattr(rm.AmpereAControlGPFifo, "GPGet").offset)   # clc56f.h USERD layout
USERD_GP_PUT = int(getattr(rm.AmpereAControlGPFifo, "GPPut").offset)
XID_GR_EXCEPTION = 13
XID_MMU_FAULT = 31
XID_PB_ERROR = 32
_M32 = 0xFFFFFFFF
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def _span(f: tuple[int, int]) -> tuple[int, int]:
    """(shift, mask) of the bit range `f` = (hi, lo): what `fget` computes at every call."""
    return f[1], (1 << (f[0] - f[1] + 1)) - 1


# Fields and methods a channel decodes for every GPFIFO entry and semaphore, read from the class
# module once (each is a look-up by name there).
_GP_GET = _span(cl.NVC56F_GP_ENTRY0_GET)
_GP_GET_HI = _span(cl.NVC56F_GP_ENTRY1_GET_HI)
_GP_LENGTH = _span(cl.NVC56F_GP_ENTRY1_LENGTH)
_SEM_LO, _SEM_HI = _span(cl.NVC56F_SEM_ADDR_LO_OFFSET), _span(cl.NVC56F_SEM_ADDR_HI_OFFSET)
_SEM_DATA = {cl.NVC56F_SEM_ADDR_LO: 0, cl.NVC56F_SEM_ADDR_HI: 1, cl.NVC56F_SEM_PAYLOAD_LO: 2,
             cl.NVC56F_SEM_PAYLOAD_HI: 3}
_SEM_EXECUTE = cl.NVC56F_SEM_EXECUTE
_SEM_FORMS_KEPT = 64  # distinct SEM_EXECUTE data dwords a channel remembers


def _sem_form(data: int) -> tuple[int, bool, bool, bool]:
    """What a SEM_EXECUTE data dword asks: (operation, 64-bit payload, wait for the engine to
    go idle first (an acquire, or a release with RELEASE_WFI), timestamped release)."""
    op = fget(cl.NVC56F_SEM_EXECUTE_OPERATION, data)
    release = op == cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE
    return (op, fget(cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE, data)
            == cl.NVC56F_SEM_EXECUTE_PAYLOAD_SIZE_64BIT,
            not release or bool(fget(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI, data)),
            release and bool(fget(cl.NVC56F_SEM_EXECUTE_RELEASE_TIMESTAMP, data)))

# QMD version -> (field prefix, size in bytes, max SM config). Independent of the driver's QMD
# classes on purpose: the mock checks what the driver wrote. Which version a GPU reads, and its
# classes, come from its generation record (runtime/drivers/nv/generation.py), as RM's class list
# comes from the chip.
@dataclass(frozen=True)
class QmdLayout:
    """Where one QMD version keeps what the mock reads: field names of the version's table, and
    the shift of the fields stored in larger units."""

    prefix: str
    size_B: int
    max_sm_config: int
    grid: tuple[str, str, str]
    registers: str
    shared: tuple[str, int]                 # shared memory size: field, shift
    slm: tuple[str, int]                    # local memory per thread: field, shift
    program: tuple[str, str, int]           # program address: upper, lower, shift
    cbuf: tuple[str, str, int]              # constant buffer address: upper, lower, shift
    release: tuple[str, str, str, str]      # release 0: enable, address upper/lower, payload
    # dependent QMDs: (enable, action, prefetch, pointer) field names and the index of the
    # indexed ones, per slot
    dependents: tuple[tuple[str, str, str, str, int | None], ...]
    typed: bool                             # QMD_MINOR_VERSION and QMD_TYPE exist (V04 on)
    reserved_smem_B: int                    # shared memory the driver reserves (sm_90 on)
    shared_window_align: int                # SET_SHADER_SHARED_MEMORY_WINDOW alignment


_V03 = QmdLayout(
    "NVC6C0_QMDV03_00", 256, 0x1A, ("CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT", "CTA_RASTER_DEPTH"),
    "REGISTER_COUNT_V", ("SHARED_MEMORY_SIZE", 0), ("SHADER_LOCAL_MEMORY_HIGH_SIZE", 0),
    ("PROGRAM_ADDRESS_UPPER", "PROGRAM_ADDRESS_LOWER", 0),
    ("CONSTANT_BUFFER_ADDR_UPPER", "CONSTANT_BUFFER_ADDR_LOWER", 0),
    ("RELEASE0_ENABLE", "RELEASE0_ADDRESS_UPPER", "RELEASE0_ADDRESS_LOWER",
     "RELEASE0_PAYLOAD_LOWER"),
    (("DEPENDENT_QMD0_ENABLE", "DEPENDENT_QMD0_ACTION", "DEPENDENT_QMD0_PREFETCH",
      "DEPENDENT_QMD0_POINTER", None),), False, 0, 1)
_V04 = QmdLayout(
    "NVCBC0_QMDV04_00", 384, 58, ("GRID_WIDTH", "GRID_HEIGHT", "GRID_DEPTH"), "REGISTER_COUNT",
    ("SHARED_MEMORY_SIZE", 0), ("SHADER_LOCAL_MEMORY_HIGH_SIZE", 0),
    ("PROGRAM_ADDRESS_UPPER", "PROGRAM_ADDRESS_LOWER", 0),
    ("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", 6),
    ("RELEASE_ENABLE", "RELEASE_SEMAPHORE0_ADDR_UPPER", "RELEASE_SEMAPHORE0_ADDR_LOWER",
     "RELEASE_SEMAPHORE0_PAYLOAD_LOWER"),
    tuple(("DEPENDENT_QMD_ENABLE", "DEPENDENT_QMD_ACTION", "DEPENDENT_QMD_PREFETCH",
           f"DEPENDENT_QMD{i}_POINTER", i) for i in range(2)), True, 1024, 1 << 32)
#: QMD version -> layout. Independent of the driver's QMD classes on purpose: the mock checks what
#: the driver wrote. Which version a GPU reads comes from its generation record
#: (runtime/drivers/nv/generation.py), as RM's class list comes from the chip.
QMD_LAYOUT = {
    3: _V03,
    4: _V04,
    5: dataclasses.replace(
        _V04, prefix="NVCEC0_QMDV05_00", shared=("SHARED_MEMORY_SIZE_SHIFTED7", 7),
        slm=("SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", 4),
        program=("PROGRAM_ADDRESS_UPPER_SHIFTED4", "PROGRAM_ADDRESS_LOWER_SHIFTED4", 4)),
}
# Programmatic dependent launch as the runtime writes it (V04 on): the producer's link fires at
# its pre-exit and it arrives at a latch when it completes; its one linked successor waits on that
# latch and invalidates its data caches then.
_PRODUCER_FIELDS = ("ENABLE_PROGRAM_PRE_EXIT", "ARRIVE_AT_LATCH_VALID", "ARRIVE_AT_LATCH_ID")
_CONSUMER_FIELDS = ("WAIT_ON_LATCH_VALID", "WAIT_ON_LATCH_ID",
                    "LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE",
                    "LATCH_ACQUIRE_INVALIDATE_TEXTURE_DATA_CACHE")
_LATCH_FIELDS = _PRODUCER_FIELDS + _CONSUMER_FIELDS
# The QMD fields a launch of this runtime may set (anything else non-zero is a driver bug).
_QMD_ALLOWED = {
    "QMD_MAJOR_VERSION", "QMD_MINOR_VERSION", "QMD_VERSION", "QMD_TYPE", "QMD_GROUP_ID",
    "API_VISIBLE_CALL_LIMIT", "SAMPLER_INDEX", "CWD_MEMBAR_TYPE", "SASS_VERSION",
    "CWD_MEMBAR_TASK_CHASING_ENABLE",
    "INVALIDATE_TEXTURE_HEADER_CACHE", "INVALIDATE_TEXTURE_SAMPLER_CACHE",
    "INVALIDATE_TEXTURE_DATA_CACHE", "INVALIDATE_SHADER_DATA_CACHE", "SM_GLOBAL_CACHING_ENABLE",
    "PROGRAM_ADDRESS_LOWER", "PROGRAM_ADDRESS_UPPER", "PROGRAM_ADDRESS_LOWER_SHIFTED4",
    "PROGRAM_ADDRESS_UPPER_SHIFTED4", "PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED",
    "PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED", "PROGRAM_PREFETCH_SIZE", "REGISTER_COUNT",
    "REGISTER_COUNT_V", "BARRIER_COUNT", "SHARED_MEMORY_SIZE", "SHARED_MEMORY_SIZE_SHIFTED7",
    "MIN_SM_CONFIG_SHARED_MEM_SIZE", "TARGET_SM_CONFIG_SHARED_MEM_SIZE",
    "MAX_SM_CONFIG_SHARED_MEM_SIZE", "SHADER_LOCAL_MEMORY_HIGH_SIZE",
    "SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", "GRID_WIDTH", "GRID_HEIGHT", "GRID_DEPTH",
    "CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT", "CTA_RASTER_DEPTH", "CTA_THREAD_DIMENSION0",
    "CTA_THREAD_DIMENSION1", "CTA_THREAD_DIMENSION2", "CONSTANT_BUFFER_ADDR_LOWER",
    "CONSTANT_BUFFER_ADDR_UPPER", "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6",
    "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", "CONSTANT_BUFFER_SIZE_SHIFTED4", "CONSTANT_BUFFER_VALID",
    "CONSTANT_BUFFER_INVALIDATE", "CONSTANT_BUFFER_PREFETCH",
    "CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8", "RELEASE_ENABLE", "RELEASE0_ENABLE",
    "RELEASE_SEMAPHORE0_ADDR_LOWER", "RELEASE_SEMAPHORE0_ADDR_UPPER",
    "RELEASE_SEMAPHORE0_PAYLOAD_LOWER", "RELEASE_SEMAPHORE0_PAYLOAD_UPPER",
    "RELEASE0_ADDRESS_LOWER", "RELEASE0_ADDRESS_UPPER", "RELEASE0_PAYLOAD_LOWER",
    "RELEASE0_PAYLOAD_UPPER",
    # graph launches whose successor the compute engine schedules itself (action SCHEDULE only)
    "DEPENDENT_QMD_ENABLE", "DEPENDENT_QMD_ACTION", "DEPENDENT_QMD_PREFETCH",
    "DEPENDENT_QMD0_ENABLE", "DEPENDENT_QMD0_ACTION", "DEPENDENT_QMD0_PREFETCH",
    "DEPENDENT_QMD0_POINTER", "DEPENDENT_QMD1_ENABLE", "DEPENDENT_QMD1_ACTION",
    "DEPENDENT_QMD1_PREFETCH", "DEPENDENT_QMD1_POINTER", "DEPENDENT_QMD_POINTER",
    # a linked successor that starts early (`_check_latches` accepts one combination only)
    *_LATCH_FIELDS,
}
CB0_STACK_POINTER = 0xFFFDC0
# distinct checked QMDs a GPU remembers (a droppable cache, emptied when full)
_QMD_CACHE_ENTRIES = 256
PCAS_ACTIONS_OK = {cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE,
                   cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE,
                   cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE}
PCAS_DECREMENT = cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_DECREMENT_DEPENDENCE
# DEPENDENT_QMD actions: start the named QMD (a fresh copy for INVALIDATE_COPY_SCHEDULE), or count
# one of its dependences down
_DEP_SCHEDULE = (1, 3)
_DEP_DECREMENT = 4
# A gate is a QMD of no grid (QMD_TYPE GRID_NULL) with a DEPENDENCE_COUNTER. Sent with a copy
# action (SEND_PCAS), the compute engine loads it and counts its dependences (it does not start);
# decrements (a grid's DEPENDENT_QMD action DECREMENT_DEPENDENCE, or a SEND_SIGNALING_PCAS2_B
# action DECREMENT_DEPENDENCE) count it down, and the last one starts its dependents. On the H200
# a decrement of a gate the engine has not loaded underflows the counter (Xid 13), and so it
# faults here; a second load of a pending gate starts its count over there, which only a broken
# protocol would rely on, so it faults here too. A gate may set only these fields.
_GATE_ALLOWED = {
    "QMD_MAJOR_VERSION", "QMD_MINOR_VERSION", "QMD_TYPE", "DEPENDENCE_COUNTER",
    "CTA_THREAD_DIMENSION0", "CTA_THREAD_DIMENSION1", "CTA_THREAD_DIMENSION2", "REGISTER_COUNT",
    "SAMPLER_INDEX", "DEPENDENT_QMD_ENABLE", "DEPENDENT_QMD_ACTION", "DEPENDENT_QMD_PREFETCH",
    "DEPENDENT_QMD0_POINTER", "DEPENDENT_QMD1_POINTER"}


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


class ChannelFault(Exception):
    """Something the hardware would reject; `xid` is the robust-channel error it raises."""

    def __init__(self, msg: str, xid: int = XID_PB_ERROR, va: int | None = None) -> None:
        super().__init__(msg)
        self.xid, self.va = xid, va


class _Blocked(Exception):
    """A semaphore acquire that is not satisfied yet."""


@dataclass
class Launch:
    """One decoded launch: what a kernel model receives."""

    gpu: "MockNVGPU"
    program_va: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_B: int
    cb0_va: int
    cb0: bytes
    reader: "QmdReader"

    @property
    def qmd(self) -> dict[str, int]:
        """The QMD's non-zero fields by name (decoded on first use)."""
        return self.reader.nonzero()

    def param(self, offset: int, fmt: str, base: int = 0x210) -> Any:
        """A parameter from constant bank 0 (`offset` within the parameter block at `base`)."""
        return struct.unpack_from("<" + fmt, self.cb0, base + offset)[0]

    def array(self, va: int, dtype: Any, count: int) -> np.ndarray:
        """`count` elements at GPU address `va` as a writable numpy view of GPU memory."""
        dt = np.dtype(dtype)
        return self.gpu.mem.view(va, count * dt.itemsize, "kernel access").view(dt)


def _methods(seg: list[int], i: int) -> Iterator[tuple[int, int, int]]:
    """(subchannel, method, data) of a pushbuffer segment from dword `i`, as the channel would
    execute them (a malformed header ends the walk: the channel reports it when it gets
    there)."""
    n = len(seg)
    while i < n:
        hdr = seg[i]
        if hdr == cl.NVC56F_DMA_NOP:
            i += 1
            continue
        op = fget(cl.NVC56F_DMA_SEC_OP, hdr)
        subc = fget(cl.NVC56F_DMA_INCR_SUBCHANNEL, hdr)
        mthd = fget(cl.NVC56F_DMA_INCR_ADDRESS, hdr) << 2
        if op == cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD:
            yield subc, mthd, fget(cl.NVC56F_DMA_IMMD_DATA, hdr)
            i += 1
            continue
        if op not in (cl.NVC56F_DMA_SEC_OP_INC_METHOD, cl.NVC56F_DMA_SEC_OP_NON_INC_METHOD,
                      cl.NVC56F_DMA_SEC_OP_ONE_INC):
            return
        count = fget(cl.NVC56F_DMA_INCR_COUNT, hdr)
        for k, d in enumerate(seg[i + 1:i + 1 + count]):
            if op == cl.NVC56F_DMA_SEC_OP_INC_METHOD:
                yield subc, mthd + 4 * k, d
            elif op == cl.NVC56F_DMA_SEC_OP_ONE_INC:
                yield subc, mthd + 4 * min(k, 1), d
            else:
                yield subc, mthd, d
        i += 1 + count


@dataclass
class MockChannel:
    """One GPFIFO channel as the GPU sees it."""

    gpu: "MockNVGPU"
    chid: int
    handle: int
    ring: np.ndarray            # u8 backing of the GPFIFO ring (entries * 8 bytes)
    entries: int
    userd: np.ndarray           # u8 backing of the channel's USERD page
    notifier: np.ndarray | None
    engine_class: int = 0
    scheduled: bool = False
    gp_get: int = 0
    segment: list[int] | None = None
    seg_pos: int = 0
    subc_class: dict[int, int] = field(default_factory=dict)
    faulted: str | None = None
    blocked: str | None = None
    # host semaphore state
    sem: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    # compute state
    shared_window: int | None = None
    local_window: int | None = None
    slm: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])  # A B NT_A NT_B NT_C
    pcas_a: int | None = None
    # QMD releases of grids launched but not yet complete: the compute engine runs a grid while the
    # front end goes on with the methods after SEND_PCAS, so they land later (`complete_grids`)
    grid_releases: list[tuple[int, int]] = field(default_factory=list)
    ptx: "PtxLaunch | None" = None   # a PTX grid that has not finished its time slices
    ptx_dependents: list[int] = field(default_factory=list)  # what that grid schedules when done
    ptx_key: tuple[int, int] = (0, 0)  # that grid's key for host_races: (channel id, QMD address)
    # QMDs that completed grids scheduled (DEPENDENT_QMD action SCHEDULE), not yet started: the
    # mock runs them before the front end goes on (one valid order of a graph's launches)
    dependents: list[int] = field(default_factory=list)
    # scheduled QMD address -> the latch its producer arrives at (`_check_latches`)
    latches: dict[int, int] = field(default_factory=dict)
    # copy state
    ce: dict[str, int] = field(default_factory=dict)
    methods_run: int = 0
    # (GP_GET, segment position, GP_PUT) when the ring was last read ahead (host_races)
    _scanned: tuple[int, int, int] = (-1, -1, -1)
    # SEM_EXECUTE data dword -> `_sem_form` of it (a droppable cache)
    _sem_forms: dict[int, tuple[int, bool, bool, bool]] = field(default_factory=dict)

    def complete_grids(self) -> None:
        """Completes the launched grids: their QMD releases (four-word structures: the payload and
        the timer at +8) land now. Runs wherever the front end waits for the engine (WAIT_FOR_IDLE,
        WFI, a release with WFI, an acquire) and at the end of each GPFIFO entry."""
        mem, now = self.gpu.mem, self.gpu.clock_ns()
        for va, payload in self.grid_releases:
            mem.write_u64(va + 8, now)
            mem.write_u32(va, payload)
        self.grid_releases.clear()

    # ------------------------------------------------------------------ pointers
    # struct reads and writes the numpy backing in place, several times cheaper than a view
    def gp_put(self) -> int:
        return _U32.unpack_from(self.userd, USERD_GP_PUT)[0]  # type: ignore[arg-type,no-any-return]

    def _store_get(self) -> None:
        _U32.pack_into(self.userd, USERD_GP_GET, self.gp_get)  # type: ignore[arg-type]

    def describe(self) -> str:
        state = self.faulted or (f"blocked: {self.blocked}" if self.blocked else "idle")
        return f"channel {self.chid}: GP_GET {self.gp_get} GP_PUT {self.gp_put()}, {state}"

    # ------------------------------------------------------------------ execution
    def step(self) -> bool:
        """Runs what it can; True if anything was consumed."""
        if self.faulted is not None or not self.scheduled:
            return False
        progress = False
        try:
            while True:
                if self.segment is None:
                    put = self.gp_put()
                    if put >= self.entries:
                        raise ChannelFault(f"GP_PUT {put} is outside the {self.entries}-entry ring")
                    if self.gp_get == put:
                        return progress
                    entry = _U64.unpack_from(self.ring, self.gp_get * 8)[0]  # type: ignore
                    e1 = entry >> 32
                    va = ((entry & _M32) >> _GP_GET[0] & _GP_GET[1]) << 2 \
                        | (e1 >> _GP_GET_HI[0] & _GP_GET_HI[1]) << 32
                    n = e1 >> _GP_LENGTH[0] & _GP_LENGTH[1]
                    if n == 0:
                        raise ChannelFault(f"GPFIFO entry {self.gp_get} ({entry:#018x}) has "
                                           "length 0")
                    self.segment = self.gpu.mem.view(va, n * 4, "pushbuffer fetch") \
                        .view(np.uint32).tolist()
                    self.seg_pos = 0
                self._run_segment()
                self.complete_grids()
                self.segment = None
                self.gp_get = (self.gp_get + 1) % self.entries
                self._store_get()
                progress = True
        except _Blocked as b:
            self.blocked = str(b)
            if self.ptx is None and self.gpu.mem.races is not None:
                self._watch_queued()
            return progress
        except PageFault as e:
            self._fault(str(e), XID_MMU_FAULT, e.va)
        except ChannelFault as e:
            self._fault(str(e), e.xid, e.va)
        return progress

    def _watch_queued(self) -> None:
        """The channel waits: the launches already in the ring behind the wait are queued
        kernels, whose memory host_races watches from now on. Reads the pushbuffer ahead without
        executing anything."""
        put = self.gp_put()
        if self._scanned == (self.gp_get, self.seg_pos, put) or put >= self.entries:
            return
        self._scanned = (self.gp_get, self.seg_pos, put)
        gen = self.gpu.generation
        p = gen.compute.prefix + "_"
        pcas_a_m = getattr(cl, p + "SEND_PCAS_A")
        pcas_b_m = getattr(cl, p + "SEND_SIGNALING_PCAS2_B")
        subc_class, pcas_a = dict(self.subc_class), self.pcas_a
        segs: list[tuple[list[int], int]] = []
        if self.segment is not None:
            segs.append((self.segment, self.seg_pos))
        g = (self.gp_get + 1) % self.entries if self.segment is not None else self.gp_get
        while g != put:
            entry = int(self.ring[g * 8:g * 8 + 8].view(np.uint64)[0])
            e1 = entry >> 32
            va = fget(cl.NVC56F_GP_ENTRY0_GET, entry & _M32) << 2 \
                | fget(cl.NVC56F_GP_ENTRY1_GET_HI, e1) << 32
            n = fget(cl.NVC56F_GP_ENTRY1_LENGTH, e1)
            try:
                segs.append((self.gpu.mem.view(va, n * 4, "").view(np.uint32).tolist(), 0))
            except PageFault:
                break  # the channel faults there when it gets to it
            g = (g + 1) % self.entries
        for seg, i in segs:
            for subc, mthd, data in _methods(seg, i):
                if mthd == cl.NVC56F_SET_OBJECT:
                    subc_class[subc] = fget(cl.NVC56F_SET_OBJECT_NVCLASS, data)
                elif subc_class.get(subc) != gen.compute_class:
                    continue
                elif mthd == pcas_a_m:
                    pcas_a = data
                elif mthd == pcas_b_m and pcas_a is not None:
                    if fget(cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION, data) != PCAS_DECREMENT:
                        self.gpu.watch_launch(self, pcas_a << 8)
                    pcas_a = None

    def _fault(self, msg: str, xid: int, va: int | None) -> None:
        self.faulted = f"channel {self.chid} at GPFIFO entry {self.gp_get}: {msg}"
        self.gpu.fault(self, self.faulted, xid)

    def _run_segment(self) -> None:
        seg = self.segment
        assert seg is not None
        i = self.seg_pos
        n = len(seg)
        method = self._method
        while i < n:
            hdr = seg[i]
            if hdr == cl.NVC56F_DMA_NOP:
                i += 1
                continue
            op, subc, mthd, count = _pb_header(hdr)
            if op == cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD:
                data = [count]  # the header carries the data
                step = 0
            elif op < 0:
                raise ChannelFault(f"unknown pushbuffer opcode {-op - 1} in header {hdr:#010x} "
                                   f"at dword {i}")
            else:
                if i + 1 + count > n:
                    raise ChannelFault(f"method header {hdr:#010x} at dword {i} promises {count} "
                                       f"dwords, the segment has {n - i - 1} left")
                data = seg[i + 1:i + 1 + count]
                step = count
            # A blocked acquire resumes at its header: re-executing the methods before it in the
            # same header is harmless for the SEM_* data methods this runtime groups with it.
            try:
                if op == cl.NVC56F_DMA_SEC_OP_INC_METHOD:
                    for d in data:
                        method(subc, mthd, d)
                        mthd += 4
                elif op == cl.NVC56F_DMA_SEC_OP_ONE_INC:
                    for k, d in enumerate(data):
                        method(subc, mthd + 4 * min(k, 1), d)
                else:
                    for d in data:
                        method(subc, mthd, d)
            except _Blocked:
                self.seg_pos = i
                raise
            self.blocked = None
            i += 1 + step
            self.seg_pos = i

    def _method(self, subc: int, mthd: int, data: int) -> None:
        self.methods_run += 1
        if mthd < 0x100:
            self._host(subc, mthd, data)
            return
        cls = self.subc_class.get(subc)
        if cls is None:
            raise ChannelFault(f"method {mthd:#x} to subchannel {subc}, which has no SET_OBJECT")
        gen = self.gpu.generation
        if cls == gen.compute_class:
            self._compute(cls, mthd, data)
        elif cls == gen.copy_class:
            self._copy(cls, mthd, data)
        else:
            raise ChannelFault(f"class {cls:#x} is not modelled")

    # ------------------------------------------------------------------ host methods
    def _host(self, subc: int, mthd: int, data: int) -> None:
        i = _SEM_DATA.get(mthd)
        if i is not None:
            self.sem[i] = data
            return
        if mthd == _SEM_EXECUTE:
            self._sem_execute(data)
            return
        if mthd == cl.NVC56F_SET_OBJECT:
            cls = fget(cl.NVC56F_SET_OBJECT_NVCLASS, data)
            if cls != self.engine_class:
                raise ChannelFault(f"SET_OBJECT {cls:#x} on subchannel {subc}: the channel's "
                                   f"engine object is class {self.engine_class:#x}")
            self.subc_class[subc] = cls
        elif mthd == cl.NVC56F_WFI:
            self.complete_grids()
        elif mthd == cl.NVC56F_NON_STALL_INTERRUPT:
            pass
        else:
            raise ChannelFault(f"host method {describe_method(None, mthd, data)} is not modelled")

    def _sem_execute(self, data: int) -> None:
        lo, hi, plo, phi = self.sem
        va = (hi >> _SEM_HI[0] & _SEM_HI[1]) << 32 | (lo >> _SEM_LO[0] & _SEM_LO[1]) << 2
        form = self._sem_forms.get(data)
        if form is None:
            if len(self._sem_forms) >= _SEM_FORMS_KEPT:
                self._sem_forms.clear()
            form = self._sem_forms[data] = _sem_form(data)
        op, wide, after_idle, stamp = form
        if hi >> 25:
            raise ChannelFault(f"SEM_ADDR_HI {hi:#x} has bits above 24 set")
        if wide and va % 8:
            raise ChannelFault(f"64-bit semaphore at {va:#x} is not 8-byte aligned")
        payload = (phi << 32 | plo) if wide else plo
        mem = self.gpu.mem
        if after_idle:
            self.complete_grids()  # an acquire or a release after idle waits for the engine
        if op == cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE:
            if stamp:
                if va % 16:
                    raise ChannelFault(f"timestamped semaphore at {va:#x} is not 16-byte aligned")
                mem.write_u64(va + 8, self.gpu.clock_ns())
            if wide:
                mem.write_u64(va, payload)
            else:
                mem.write_u32(va, payload)
        elif op in (cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ,
                    cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ):
            cur = mem.read_u64(va) if wide else mem.read_u32(va)
            bits = 64 if wide else 32
            if op == cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ:
                ok = ((cur - payload) & ((1 << bits) - 1)) < (1 << (bits - 1))
            else:
                ok = cur >= payload
            if not ok:
                raise _Blocked(f"semaphore acquire at {va:#x}: waiting for >= {payload}, it is "
                               f"{cur}")
        else:
            raise ChannelFault(f"SEM_EXECUTE operation {op} is not modelled")

    # ------------------------------------------------------------------ compute
    def _compute(self, cls: int, mthd: int, data: int) -> None:
        p = self.gpu.generation.compute.prefix + "_"
        entry = _compute_methods(p).get(mthd)
        if entry is None:
            raise ChannelFault(f"compute method {describe_method(cls, mthd, data)} is not modelled")
        kind, slot = entry
        if kind == "LOCAL_WINDOW_A":
            self.local_window = (data << 32) | ((self.local_window or 0) & _M32)
        elif kind == "LOCAL_WINDOW_B":
            self.local_window = ((self.local_window or 0) & ~_M32) | data
        elif kind == "SHARED_WINDOW_A":
            self.shared_window = (data << 32) | ((self.shared_window or 0) & _M32)
        elif kind == "SHARED_WINDOW_B":
            self.shared_window = ((self.shared_window or 0) & ~_M32) | data
        elif kind == "SLM":
            self.slm[slot] = data
        elif kind == "WAIT_FOR_IDLE":
            self.complete_grids()
        elif kind == "INVALIDATE":
            pass
        elif kind == "SEND_PCAS_A":
            self.pcas_a = data
        else:  # SEND_SIGNALING_PCAS2_B
            action = fget(getattr(cl, p + "SEND_SIGNALING_PCAS2_B_PCAS_ACTION"), data)
            if action == PCAS_DECREMENT:
                if self.pcas_a is None:
                    raise ChannelFault("SEND_SIGNALING_PCAS2_B without SEND_PCAS_A")
                if self.ptx is not None:  # the method again: what the gate started goes on
                    self.gpu.launch(self, cls, 0)
                else:
                    self.gpu.decrement(self, cls, self.pcas_a << 8)
                self.pcas_a = None
                return
            if action not in PCAS_ACTIONS_OK:
                raise ChannelFault(f"SEND_SIGNALING_PCAS2_B action {action} does not schedule a "
                                   "fresh copy of the QMD")
            if self.pcas_a is None:
                raise ChannelFault("SEND_SIGNALING_PCAS2_B without SEND_PCAS_A")
            self.gpu.launch(self, cls, self.pcas_a << 8)
            self.pcas_a = None

    # ------------------------------------------------------------------ copy engine
    def _copy(self, cls: int, mthd: int, data: int) -> None:
        p = self.gpu.generation.copy.prefix + "_"
        names = ("OFFSET_IN_UPPER", "OFFSET_IN_LOWER", "OFFSET_OUT_UPPER", "OFFSET_OUT_LOWER",
                 "LINE_LENGTH_IN", "LINE_COUNT", "PITCH_IN", "PITCH_OUT", "SET_SEMAPHORE_A",
                 "SET_SEMAPHORE_B", "SET_SEMAPHORE_PAYLOAD", "SET_SEMAPHORE_PAYLOAD_UPPER",
                 "SET_REMAP_CONST_A", "SET_REMAP_CONST_B", "SET_REMAP_COMPONENTS")
        for n in names:
            if getattr(cl, p + n, None) == mthd:
                self.ce[n] = data
                return
        if mthd != getattr(cl, p + "LAUNCH_DMA"):
            raise ChannelFault(f"copy method {describe_method(cls, mthd, data)} is not modelled")
        f = lambda n: fget(getattr(cl, p + "LAUNCH_DMA_" + n), data)  # noqa: E731
        ce = self.ce
        xfer = f("DATA_TRANSFER_TYPE")
        if xfer != getattr(cl, p + "LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE"):
            if f("SRC_MEMORY_LAYOUT") != 1 or f("DST_MEMORY_LAYOUT") != 1:
                raise ChannelFault("LAUNCH_DMA with a block-linear layout (only pitch is modelled)")
            if f("SRC_TYPE") or f("DST_TYPE"):
                raise ChannelFault("LAUNCH_DMA with physical addressing (only virtual is modelled)")
            for k in ("OFFSET_IN_UPPER", "OFFSET_IN_LOWER", "OFFSET_OUT_UPPER", "OFFSET_OUT_LOWER",
                      "LINE_LENGTH_IN"):
                if k not in ce:
                    raise ChannelFault(f"LAUNCH_DMA before {k} was set")
            src = (ce["OFFSET_IN_UPPER"] & 0x1FFFFFF) << 32 | ce["OFFSET_IN_LOWER"]
            dst = (ce["OFFSET_OUT_UPPER"] & 0x1FFFFFF) << 32 | ce["OFFSET_OUT_LOWER"]
            length = ce["LINE_LENGTH_IN"]
            lines = ce.get("LINE_COUNT", 1) if f("MULTI_LINE_ENABLE") else 1
            mem = self.gpu.mem
            if f("REMAP_ENABLE"):
                self._remap_fill(p, dst, length, lines)
                self._copy_semaphore(p, f)
                return
            for ln in range(lines):
                s = src + ln * ce.get("PITCH_IN", 0)
                d = dst + ln * ce.get("PITCH_OUT", 0)
                if length:
                    chunk = mem.view(s, length, "copy read").copy()
                    mem.view(d, length, "copy write")[:] = chunk
            self.gpu.copied_B += length * lines
            if mem.races is not None:
                mem.races.gpu_wrote()
        self._copy_semaphore(p, f)

    def _remap_fill(self, p: str, dst: int, elements: int, lines: int) -> None:
        """A remapped copy whose destination components all come from REMAP_CONST_A/B (a fill:
        the source is not read). LINE_LENGTH_IN counts elements of NUM_DST_COMPONENTS
        components of COMPONENT_SIZE bytes each."""
        ce = self.ce
        if "SET_REMAP_COMPONENTS" not in ce:
            raise ChannelFault("LAUNCH_DMA with REMAP_ENABLE before SET_REMAP_COMPONENTS")
        if lines != 1:
            raise ChannelFault("a remapped multi-line copy is not modelled")
        word = ce["SET_REMAP_COMPONENTS"]
        g = lambda n: fget(getattr(cl, p + "SET_REMAP_COMPONENTS_" + n), word)  # noqa: E731
        comp_B, n_dst = g("COMPONENT_SIZE") + 1, g("NUM_DST_COMPONENTS") + 1
        consts = {getattr(cl, p + "SET_REMAP_COMPONENTS_DST_X_CONST_A"): "SET_REMAP_CONST_A",
                  getattr(cl, p + "SET_REMAP_COMPONENTS_DST_X_CONST_B"): "SET_REMAP_CONST_B"}
        element = b""
        for name in ("DST_X", "DST_Y", "DST_Z", "DST_W")[:n_dst]:
            sel = g(name)
            if sel not in consts:
                raise ChannelFault(f"remapped copy: {name} selects {sel} (only CONST_A/CONST_B, "
                                   "a fill, is modelled)")
            if consts[sel] not in ce:
                raise ChannelFault(f"remapped copy before {consts[sel]} was set")
            element += (ce[consts[sel]] & ((1 << (8 * comp_B)) - 1)).to_bytes(comp_B, "little")
        n = elements * len(element)
        if n:
            view = self.gpu.mem.view(dst, n, "fill write")
            view[:] = np.tile(np.frombuffer(element, np.uint8), elements)
            if self.gpu.mem.races is not None:
                self.gpu.mem.races.gpu_wrote()
        self.gpu.filled_B += n

    def _copy_semaphore(self, p: str, f: Callable[[str], int]) -> None:
        ce = self.ce
        sem_type = f("SEMAPHORE_TYPE")
        if sem_type:
            va = (ce.get("SET_SEMAPHORE_A", 0) & 0x1FFFFFF) << 32 | ce.get("SET_SEMAPHORE_B", 0)
            payload = ce.get("SET_SEMAPHORE_PAYLOAD", 0)
            wide = bool(getattr(cl, p + "LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE", None)) and \
                f("SEMAPHORE_PAYLOAD_SIZE") == 1
            if wide:
                payload |= ce.get("SET_SEMAPHORE_PAYLOAD_UPPER", 0) << 32
            if va % (16 if sem_type == 2 else 4):
                raise ChannelFault(f"copy-engine semaphore at {va:#x} is misaligned")
            mem = self.gpu.mem
            if sem_type == 2:  # four-word / with timestamp: payload at +0, timestamp at +8
                mem.write_u64(va + 8, self.gpu.clock_ns())
            if wide:
                mem.write_u64(va, payload)
            else:
                mem.write_u32(va, payload)


class QmdReader:
    """Reads a QMD of one version with the generated field tables (mock-side, independent of the
    driver's QMD classes)."""

    def __init__(self, prefix: str, data: bytes) -> None:
        self.prefix, self.data = prefix, data
        self.num = int.from_bytes(data, "little")
        self.words = struct.unpack(f"<{len(data) // 4}I", data)

    def get(self, name: str, index: int | None = None) -> int:
        lo, mask = _field_range(self.prefix, name, index)
        sh = lo & 31
        if sh + mask.bit_length() <= 32:  # inside one dword (nearly every field)
            return (self.words[lo >> 5] >> sh) & mask
        return (self.num >> lo) & mask

    def nonzero(self) -> dict[str, int]:
        out = {}
        num = self.num
        for name, hi, lo in _qmd_fields(self.prefix, len(self.data) * 8):
            val = (num >> lo) & ((1 << (hi - lo + 1)) - 1)
            if val:
                out[name] = val
        return out


@lru_cache(maxsize=None)
def _field_range(prefix: str, name: str, index: int | None) -> tuple[int, int]:
    """(low bit, mask) of a QMD field, from the generated table."""
    f = getattr(cl, f"{prefix}_{name}")
    hi, lo = f(index) if index is not None else f
    return lo, (1 << (hi - lo + 1)) - 1


def _mask_of(prefix: str, bits: int, names: Container[str]) -> int:
    """Every bit of the QMD fields in `names` (an indexed field by its name without the index)."""
    out = 0
    for name, hi, lo in _qmd_fields(prefix, bits):
        if name.split("(")[0] in names:
            out |= ((1 << (hi - lo + 1)) - 1) << lo
    return out


@lru_cache(maxsize=None)
def _allowed_bits(prefix: str, bits: int) -> int:
    """Every bit of the fields a launch of this runtime may set (`_QMD_ALLOWED`)."""
    return _mask_of(prefix, bits, _QMD_ALLOWED)


@lru_cache(maxsize=4096)
def _pb_header(hdr: int) -> tuple[int, int, int, int]:
    """A pushbuffer method header: (opcode, subchannel, method offset, count or immediate data);
    the opcode is -(opcode + 1) for one the mock does not know (cached: a channel executes the
    same few headers over and over)."""
    op = fget(cl.NVC56F_DMA_SEC_OP, hdr)
    subc = fget(cl.NVC56F_DMA_INCR_SUBCHANNEL, hdr)
    mthd = fget(cl.NVC56F_DMA_INCR_ADDRESS, hdr) << 2
    if op == cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD:
        return op, subc, mthd, fget(cl.NVC56F_DMA_IMMD_DATA, hdr)
    if op in (cl.NVC56F_DMA_SEC_OP_INC_METHOD, cl.NVC56F_DMA_SEC_OP_NON_INC_METHOD,
              cl.NVC56F_DMA_SEC_OP_ONE_INC):
        return op, subc, mthd, fget(cl.NVC56F_DMA_INCR_COUNT, hdr)
    return -op - 1, subc, mthd, 0


@lru_cache(maxsize=None)
def _compute_methods(p: str) -> dict[int, tuple[str, int]]:
    """The compute class's methods the mock executes (`p`: the class's name prefix): method
    offset -> (what it does, index in `MockChannel.slm` for the shader-local-memory ones)."""
    c = lambda n: getattr(cl, p + n)  # noqa: E731 - method offsets of this class
    out = {c(n): (kind, 0) for n, kind in (
        ("SET_SHADER_LOCAL_MEMORY_WINDOW_A", "LOCAL_WINDOW_A"),
        ("SET_SHADER_LOCAL_MEMORY_WINDOW_B", "LOCAL_WINDOW_B"),
        ("SET_SHADER_SHARED_MEMORY_WINDOW_A", "SHARED_WINDOW_A"),
        ("SET_SHADER_SHARED_MEMORY_WINDOW_B", "SHARED_WINDOW_B"),
        ("WAIT_FOR_IDLE", "WAIT_FOR_IDLE"), ("INVALIDATE_SHADER_CACHES_NO_WFI", "INVALIDATE"),
        ("SEND_PCAS_A", "SEND_PCAS_A"), ("SEND_SIGNALING_PCAS2_B", "SEND_SIGNALING_PCAS2_B"))}
    # A B NT_A NT_B NT_C, in that order in `MockChannel.slm`
    for i, n in enumerate(("SET_SHADER_LOCAL_MEMORY_A", "SET_SHADER_LOCAL_MEMORY_B",
                           "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A",
                           "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B",
                           "SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C")):
        out[c(n)] = ("SLM", i)
    return out


@lru_cache(maxsize=None)
def _latch_bits(prefix: str, bits: int) -> int:
    """Every bit of the programmatic-dependent-launch fields (none before V04)."""
    return _mask_of(prefix, bits, _LATCH_FIELDS)


@lru_cache(maxsize=None)
def _static_bits(prefix: str, bits: int) -> int:
    """The allowed fields that stay the same from one launch of a kernel to the next: all but the
    constant-buffer addresses, the release semaphores' addresses and payloads, and the dependent
    QMD pointers (a graph's launches of one kernel differ in them; `_dependents` reads them)."""
    out = _allowed_bits(prefix, bits)
    for name, hi, lo in _qmd_fields(prefix, bits):
        base = name.split("(")[0]
        if base.startswith("CONSTANT_BUFFER_ADDR_") or (
                base.startswith("RELEASE") and ("_ADDR" in base or "_PAYLOAD" in base)) or (
                base.startswith("DEPENDENT_QMD") and base.endswith("POINTER")):
            out &= ~(((1 << (hi - lo + 1)) - 1) << lo)
    return out


@dataclass(frozen=True)
class _QmdStatic:
    """What a checked QMD launches, from its fields that stay the same from launch to launch."""

    program_va: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_B: int
    cb0_size: int
    cbufs: tuple[int, ...]      # the valid constant buffers
    release: bool               # release semaphore 0 enabled
    # what constant bank 0 must start with (block and grid sizes, the channel's shared and local
    # windows, the stack pointer), when bank 0 has room for it
    cb0_head: bytes | None = None


def _static_qmd(q: "QmdReader", lay: QmdLayout, program_va: int,
                ch: "MockChannel | None" = None) -> _QmdStatic:
    grid = (q.get(lay.grid[0]), q.get(lay.grid[1]), q.get(lay.grid[2]))
    block = (q.get("CTA_THREAD_DIMENSION0"), q.get("CTA_THREAD_DIMENSION1"),
             q.get("CTA_THREAD_DIMENSION2"))
    cb0_size = q.get("CONSTANT_BUFFER_SIZE_SHIFTED4", 0) << 4
    head = None
    if ch is not None and cb0_size >= 0x30 and ch.shared_window is not None \
            and ch.local_window is not None:
        head = struct.pack("<3I3IQQI", *block, *grid, ch.shared_window, ch.local_window,
                           CB0_STACK_POINTER)
    return _QmdStatic(program_va, grid, block, q.get(lay.shared[0]) << lay.shared[1], cb0_size,
                      tuple(i for i in range(8) if q.get("CONSTANT_BUFFER_VALID", i)),
                      bool(q.get(lay.release[0], 0)), head)


@lru_cache(maxsize=None)
def _qmd_fields(prefix: str, bits: int) -> tuple[tuple[str, int, int], ...]:
    """Every field of a QMD version (indexed ones expanded), from the generated table."""
    pre = prefix + "_"
    counts = {"CONSTANT_BUFFER": 8, "RELEASE": 3, "DEPENDENT_QMD": 2, "TPC_DISABLE_MASK": 8}
    out = []
    for n in dir(cl):
        if not n.startswith(pre):
            continue
        v = getattr(cl, n)
        key = n[len(pre):]
        if isinstance(v, tuple):
            ranges = [(key, v)]
        elif callable(v):
            cnt = next((c for k, c in counts.items() if key.startswith(k)), 1)
            ranges = [(f"{key}({i})", v(i)) for i in range(cnt)]
        else:
            continue
        out += [(name, hi, lo) for name, (hi, lo) in ranges if hi < bits]
    return tuple(out)


@dataclass
class MockNVGPU:
    """One NVIDIA GPU of the mock machine (Hopper by default): its classes and QMD version are its
    generation record's, its SM version (GR_INFO's encoding, 0x900) the record's first unless
    given."""

    driver: "MockNVDriver"
    index: int
    vram_B: int
    generation: NVGeneration = field(default_factory=lambda: generation_named("hopper"))
    sm_version: int = 0
    num_gpcs: int = 8
    tpc_per_gpc: int = 9
    sm_per_tpc: int = 2
    max_warps_per_sm: int = 64
    sm_count: int = 132     # the SMs enabled on an H100/H200 SXM part (of the chip's 144)
    sp_per_sm: int = 128
    mem: MockMemory = field(default_factory=MockMemory)
    vram_used: int = 0
    channels: dict[int, MockChannel] = field(default_factory=dict)   # by work-submit token
    usermode: np.ndarray = field(default_factory=lambda: np.zeros(USERMODE_B, np.uint8))
    kernels: dict[int, Callable[[Launch], None]] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)
    keep_launches: int = 64
    launch_count: int = 0
    copied_B: int = 0
    filled_B: int = 0
    _poller: threading.Thread | None = None
    # a doorbell was rung that the GPU's thread has not yet acted on (not idle meanwhile)
    _rung: bool = False
    #: deterministic mode: channels run inside the doorbell write (runtime.drivers.mock.engine)
    sync: bool = field(default_factory=sync_from_env)

    def __post_init__(self) -> None:
        if not self.sm_version:
            sm = self.generation.sm[0]
            self.sm_version = (sm // 10) << 8 | sm % 10
        self.mem.races = getattr(self.driver.os, "host_races", None)
        #: program address -> (entry record, module text, compiled kernel) of the PTX programs
        #: launched (runtime.drivers.mock.ptx.launch.grid_for; a droppable cache)
        self.ptx_programs: dict[int, tuple[bytes, bytes, Any]] = {}
        # (static QMD bits, channel windows, mappings) -> what a checked QMD launches
        self._qmd_cache: dict[tuple[Any, ...], _QmdStatic] = {}
        # gate QMD address -> decrements it still waits for (the engine's copy: loaded by a
        # SEND_PCAS, dropped when it fires)
        self.gates: dict[int, int] = {}
        self.engine = EngineThread(f"mock-nvidia{self.index}", self.driver.os.lock,
                                   self._engine_step,
                                   self.driver.os.wake_waiters, self.driver.os.host_entries)

    @property
    def async_doorbell(self) -> bool:
        """Whether a doorbell store returns before the GPU runs (no mock-kernel lock needed)."""
        return not self.sync

    def _engine_step(self) -> tuple[bool, bool, bool]:
        """One pass of the GPU's thread over its channels (under the mock kernel's lock)."""
        progress = False
        self._rung = False
        for ch in list(self.channels.values()):
            if ch.step():
                progress = True
        blocked = any(ch.blocked and not ch.faulted for ch in self.channels.values())
        return progress, blocked, bool(self.channels)

    def idle(self) -> bool:
        """Nothing left that can run now (call with the mock kernel's lock held)."""
        if self._rung:
            return False
        return all(ch.faulted or ch.blocked or not ch.scheduled or ch.segment is None
                   and ch.gp_get == ch.gp_put() for ch in self.channels.values())

    @property
    def compute_class(self) -> int:
        """The compute class this GPU executes."""
        return self.generation.compute_class

    @property
    def uuid(self) -> bytes:
        return bytes([0x4D, 0x4F, 0x43, 0x4B, self.index]) + bytes(11)

    @property
    def sass_version(self) -> int:
        return ((self.sm_version & 0xF00) >> 4) | (self.sm_version & 0xF)

    @staticmethod
    def clock_ns() -> int:
        """The GPU's nanosecond timer (semaphore timestamps)."""
        return time.perf_counter_ns()

    def register_kernel(self, program_va: int, model: Callable[[Launch], None]) -> None:
        """Runs `model` for every launch of the program whose entry point is at `program_va`."""
        self.kernels[program_va] = model

    # ------------------------------------------------------------------ doorbell and scheduling
    def doorbell_rung(self, offset: int, value: int) -> None:
        """A CPU store into the usermode page; +0x90 is the work-submit doorbell."""
        if offset % USERMODE_B != DOORBELL_B:
            self.driver.os.log_kernel(f"mock nvidia{self.index}: usermode store at {offset:#x} "
                                      f"({value:#x}) ignored")
            return
        if value not in self.channels:
            self.driver.os.log_kernel(f"mock nvidia{self.index}: doorbell with unknown token "
                                      f"{value:#x}")
            return
        self.run()

    def run(self) -> None:
        """Runs every channel until none can make progress (the GPU's thread does, when not in
        the deterministic mode); starts the poller if one is blocked."""
        if not self.sync:
            self._rung = True
            self.engine.kick()
            return
        self.run_once()
        if any(ch.blocked and not ch.faulted for ch in self.channels.values()):
            self._start_poller()

    def _start_poller(self) -> None:
        if self._poller is not None and self._poller.is_alive():
            return
        lock = self.driver.os.lock

        def poll() -> None:
            while True:
                time.sleep(0.0005)
                with lock:
                    if not any(ch.blocked and not ch.faulted for ch in self.channels.values()):
                        self._poller = None
                        return
                    self.run_once()
                self.driver.os.wake_waiters()

        self._poller = threading.Thread(target=poll, name=f"mock-nvidia{self.index}", daemon=True)
        self._poller.start()

    def run_once(self) -> None:
        """Runs every channel until none can make progress (the poller's step, under the mock's
        lock)."""
        progress = True
        while progress:
            progress = False
            for ch in list(self.channels.values()):
                if ch.step():
                    progress = True

    # ------------------------------------------------------------------ faults
    def fault(self, ch: MockChannel, report: str, xid: int) -> None:
        """Logs a fault and writes the channel's RM error notifier (info32 = Xid, status 0xFFFF)."""
        self.driver.os.log_kernel(f"NVRM: Xid (mock nvidia{self.index}): {xid}, {report}")
        if ch.notifier is not None:
            ch.notifier[:16] = np.frombuffer(struct.pack("<QIHH", self.clock_ns(), xid, 0, 0xFFFF),
                                             np.uint8)

    # ------------------------------------------------------------------ compute launches
    def launch(self, ch: MockChannel, cls: int, qmd_va: int) -> None:
        """Decodes and checks the QMD at `qmd_va`, runs the kernel (a PTX image through the
        interpreter, in time slices, or a registered model), releases semaphores.

        The checks of the fields that stay the same from one launch of a kernel to the next (all
        but the constant-buffer addresses and the release's address and payload) are done once
        per distinct QMD, channel state and set of mappings (`_static_qmd`); the others, and the
        contents of constant bank 0, are checked at every launch."""
        races = self.mem.races
        if ch.ptx is not None:  # the launch method again: the running grid's next time slice
            if races is not None:
                races.resume(ch.ptx_key)  # host writes since its last slice
            self._run_slice(ch, ch.ptx_key)
            ch.dependents += ch.ptx_dependents
            ch.ptx_dependents = []
        else:
            self._start(ch, cls, qmd_va, sent=True)
        self._run_dependents(ch, cls)

    def decrement(self, ch: MockChannel, cls: int, qmd_va: int) -> None:
        """A SEND_SIGNALING_PCAS2_B action DECREMENT_DEPENDENCE of the gate at `qmd_va`: what it
        starts when this is its last decrement runs now."""
        ch.dependents.append(qmd_va | 1)
        self._run_dependents(ch, cls)

    def _run_dependents(self, ch: MockChannel, cls: int) -> None:
        """What completed grids scheduled, in order: QMDs to start, and gate decrements (an
        address with bit 0 set: QMDs are 256-byte aligned)."""
        while ch.dependents:
            va = ch.dependents.pop(0)
            if va & 1:
                self._decrement(ch, va & ~1)
            else:
                self._start(ch, cls, va)

    def _gate(self, qmd_va: int) -> QmdReader:
        """The gate QMD at `qmd_va`, checked: GRID_NULL, only the fields a gate may set, links of
        action SCHEDULE or INVALIDATE_COPY_SCHEDULE."""
        lay = QMD_LAYOUT[self.generation.qmd.major]
        if not lay.typed:
            raise ChannelFault(f"QMD at {qmd_va:#x}: QMD_TYPE GRID_NULL needs QMD V04 or later",
                               XID_GR_EXCEPTION)
        q = QmdReader(lay.prefix, self.mem.view(qmd_va, lay.size_B, "QMD fetch").tobytes())
        if q.get("QMD_TYPE") != getattr(cl, lay.prefix + "_QMD_TYPE_GRID_NULL"):
            raise ChannelFault(f"QMD at {qmd_va:#x}: QMD_TYPE {q.get('QMD_TYPE')} is not "
                               "GRID_NULL (only gates take dependence decrements here)",
                               XID_GR_EXCEPTION)
        bad = sorted(k for k in q.nonzero() if k.split("(")[0] not in _GATE_ALLOWED)
        if bad:
            raise ChannelFault(f"gate QMD at {qmd_va:#x} sets fields a gate must leave zero: "
                               + ", ".join(bad), XID_GR_EXCEPTION)
        return q

    def _decrement(self, ch: MockChannel, qmd_va: int) -> None:
        left = self.gates.get(qmd_va)
        if left is None:
            self._gate(qmd_va)  # not a gate at all: say so
            raise ChannelFault(f"gate QMD at {qmd_va:#x}: dependence counter underflow (a "
                               "decrement of a gate the compute engine has not loaded: send it "
                               "with SEND_PCAS first)", XID_GR_EXCEPTION)
        left -= 1
        if left:
            self.gates[qmd_va] = left
            return
        self.gates.pop(qmd_va, None)
        self._fire_null(ch, self._gate(qmd_va), qmd_va)

    def _fire_null(self, ch: MockChannel, q: QmdReader, qmd_va: int) -> None:
        """A gate (or a null QMD started directly) whose dependences are all met: it runs no grid
        and starts its dependents."""
        lay = QMD_LAYOUT[self.generation.qmd.major]
        ch.dependents += self._dependents(q, lay, qmd_va)

    def _start(self, ch: MockChannel, cls: int, qmd_va: int, sent: bool = False) -> None:
        """Starts the grid of the QMD at `qmd_va` (and runs it to completion unless it is a PTX
        grid that needs more time slices); `sent`: by a SEND_PCAS (a gate is loaded then)."""
        races = self.mem.races
        race_key = (id(ch), qmd_va)
        if races is not None:
            races.resume(race_key)  # host writes since it was queued
        major = self.generation.qmd.major
        lay = QMD_LAYOUT[major]
        prefix, size = lay.prefix, lay.size_B
        raw = self.mem.view(qmd_va, size, "QMD fetch").tobytes()
        q = QmdReader(prefix, raw)
        if lay.typed and q.get("QMD_TYPE") == getattr(cl, prefix + "_QMD_TYPE_GRID_NULL"):
            q = self._gate(qmd_va)
            if qmd_va in self.gates:
                raise ChannelFault(f"gate QMD at {qmd_va:#x} sent or started again while it "
                                   "waits for dependence decrements", XID_GR_EXCEPTION)
            count = q.get("DEPENDENCE_COUNTER")
            if count and sent:
                self.gates[qmd_va] = count
            elif count:
                raise ChannelFault(f"gate QMD at {qmd_va:#x} with DEPENDENCE_COUNTER {count} "
                                   "started by another QMD's link (only decrements start it)",
                                   XID_GR_EXCEPTION)
            else:
                self._fire_null(ch, q, qmd_va)
            return
        if q.num & ~_allowed_bits(prefix, size * 8):  # some field outside the allowed set is set
            fields = q.nonzero()
            bad = sorted(k.split("(")[0] for k in fields if k.split("(")[0] not in _QMD_ALLOWED)
            raise ChannelFault(f"QMD at {qmd_va:#x} sets fields this runtime must leave zero: "
                               + ", ".join(f"{k}={fields.get(k, fields.get(k + '(0)', 0)):#x}"
                                           for k in bad), XID_GR_EXCEPTION)
        latch = ch.latches.pop(qmd_va, None) if ch.latches else None
        if latch is not None or q.num & _latch_bits(prefix, size * 8):
            self._check_latches(q, qmd_va, latch)
        key = (q.num & _static_bits(prefix, size * 8), ch.shared_window, ch.local_window,
               tuple(ch.slm), self.mem.generation)
        st = self._qmd_cache.get(key)
        if st is None:
            errs = self._check_qmd(ch, q, major, lay)
            if errs:
                raise ChannelFault(f"QMD at {qmd_va:#x} rejected: " + "; ".join(errs),
                                   XID_GR_EXCEPTION)
            st = _static_qmd(q, lay, self._program(q, lay), ch)
            if len(self._qmd_cache) >= _QMD_CACHE_ENTRIES:
                self._qmd_cache.clear()
            self._qmd_cache[key] = st
        cb0_va = (q.get(lay.cbuf[0], 0) << 32 | q.get(lay.cbuf[1], 0)) << lay.cbuf[2]
        cb0 = self._cb0_if_valid(q, lay, st, cb0_va)
        if cb0 is None:  # something is wrong: the full checks say what
            errs = self._check_qmd_dynamic(ch, q, lay, st)
            if errs:
                raise ChannelFault(f"QMD at {qmd_va:#x} rejected: " + "; ".join(errs),
                                   XID_GR_EXCEPTION)
            cb0 = self.mem.read(cb0_va, st.cb0_size)
        prog = st.program_va
        launch = Launch(self, prog, st.grid, st.block, st.shared_B, cb0_va, cb0, q)
        self.launch_count += 1
        if self.keep_launches:
            self.launches.append(launch)
            if len(self.launches) > 2 * self.keep_launches:  # bounded, trimmed in batches
                del self.launches[:-self.keep_launches]
        model = self.kernels.get(prog)
        # lands when the grid completes (MockChannel.complete_grids)
        release = None
        if st.release:
            _, upper, lower, payload_lo = lay.release
            release = (q.get(upper) << 32 | q.get(lower), q.get(payload_lo))
        deps = self._dependents(q, lay, qmd_va)
        if deps and q.num & _latch_bits(prefix, size * 8) and q.get("ENABLE_PROGRAM_PRE_EXIT"):
            ch.latches[deps[0]] = q.get("ARRIVE_AT_LATCH_ID")
        if model is None:
            ch.ptx = PtxLaunch.start(ch, launch, release)
            if ch.ptx is not None:
                if races is not None and races.watching(race_key):  # it was queued
                    ch.ptx.record()
                    ch.ptx.recorded_whole = True
                ch.ptx_dependents, ch.ptx_key = deps, race_key
                self._run_slice(ch, race_key)  # raises the channel's blocked signal meanwhile
                ch.dependents += deps
                ch.ptx_dependents = []
                return
        try:
            if model is not None:
                model(launch)
        except PageFault as e:
            if races is not None:
                races.forget(race_key)
            raise ChannelFault(f"kernel at {prog:#x}: {e}", XID_MMU_FAULT, e.va) from None
        if races is not None:
            races.gpu_wrote()
            races.finished(race_key)
        if release is not None:
            ch.grid_releases.append(release)
        ch.dependents += deps

    @staticmethod
    def _check_latches(q: QmdReader, qmd_va: int, latch: int | None) -> None:
        """Accepts the programmatic-dependent-launch fields in the one combination the runtime
        writes: a producer that pre-exits, arrives at a non-zero latch and links exactly one
        successor; a successor that its producer's link started, waiting on that latch with both
        cache invalidations. `latch` is the latch of the producer that scheduled this QMD."""
        def fault(msg: str) -> ChannelFault:
            return ChannelFault(f"QMD at {qmd_va:#x}: {msg}", XID_GR_EXCEPTION)
        producer = [q.get(f) for f in _PRODUCER_FIELDS]
        if any(producer):
            bad = [f for f, v in zip(_PRODUCER_FIELDS, producer) if not v]
            if bad:
                set_ = ", ".join(f for f in _PRODUCER_FIELDS if f not in bad)
                raise fault(f"{bad[0]}=0 with {set_} set (a pre-exiting grid arrives at a "
                            "non-zero latch)")
            links = sum(1 for i in range(2) if q.get("DEPENDENT_QMD_ENABLE", i))
            if links != 1:
                raise fault(f"ENABLE_PROGRAM_PRE_EXIT=1 with {links} linked dependent QMDs (the "
                            "pre-exit starts every link early: exactly one successor, which "
                            "waits on the latch)")
        consumer = [q.get(f) for f in _CONSUMER_FIELDS]
        if latch is None:
            if any(consumer):
                name = next(f for f, v in zip(_CONSUMER_FIELDS, consumer) if v)
                raise fault(f"{name} set on a grid no pre-exiting predecessor's link started")
            return
        bad = [f for f, v in zip(_CONSUMER_FIELDS, consumer) if not v]
        if bad:
            raise fault(f"{bad[0]}=0 on a grid its predecessor starts early (it must wait on "
                        f"latch {latch:#x} and invalidate its data caches)")
        if q.get("WAIT_ON_LATCH_ID") != latch:
            raise fault(f"WAIT_ON_LATCH_ID={q.get('WAIT_ON_LATCH_ID'):#x}, but the predecessor "
                        f"that started it arrives at latch {latch:#x}")

    @staticmethod
    def _dependents(q: QmdReader, lay: QmdLayout, qmd_va: int) -> list[int]:
        """What this grid does when it completes, per DEPENDENT_QMD slot enabled: start a QMD
        (action SCHEDULE or INVALIDATE_COPY_SCHEDULE: its address), or decrement a gate (action
        DECREMENT_DEPENDENCE: its address with bit 0 set); any other action is not modelled and
        faults."""
        out = []
        for enable, action, _prefetch, pointer, idx in lay.dependents:
            if not q.get(enable, idx):
                continue
            act = q.get(action, idx)
            if act not in _DEP_SCHEDULE and act != _DEP_DECREMENT:
                raise ChannelFault(f"QMD at {qmd_va:#x}: dependent QMD action {act} is not "
                                   "modelled (only SCHEDULE, INVALIDATE_COPY_SCHEDULE and "
                                   "DECREMENT_DEPENDENCE)", XID_GR_EXCEPTION)
            ptr = q.get(pointer) << 8
            if not ptr:
                raise ChannelFault(f"QMD at {qmd_va:#x}: dependent QMD enabled with a null "
                                   "pointer", XID_GR_EXCEPTION)
            out.append(ptr | 1 if act == _DEP_DECREMENT else ptr)
        return out

    def _run_slice(self, ch: MockChannel, key: tuple[int, int]) -> None:
        """The next time slice of the channel's PTX grid (host_races told what ran)."""
        races, ptx = self.mem.races, ch.ptx
        assert ptx is not None
        try:
            ptx.resume()
        except _Blocked:
            if races is not None:
                races.gpu_wrote()
                env, rm = ptx.grid.env, ptx.recording
                races.paused(key, f"kernel {ptx.grid.kern.name} (channel {ch.chid})",
                             pointers_among(self.mem, env.cb0[env.param_base:]), self.mem,
                             (key[1],), None if rm is None else rm.written())
                ptx.record()  # watched from now on: what its next slices write is its own
            raise
        except ChannelFault:
            if races is not None:
                races.forget(key)
            raise
        if races is not None:
            races.gpu_wrote()
            rm = ptx.recording
            races.finished(key, None if rm is None or rm.unbounded or not ptx.recorded_whole
                           else rm.ranges["read"] + rm.ranges["write"] + rm.ranges["atomic"],
                           None if rm is None else rm.written())

    def watch_launch(self, ch: MockChannel, qmd_va: int) -> None:
        """A launch queued on `ch` behind a wait: host_races watches what its parameters point
        to."""
        lay = QMD_LAYOUT[self.generation.qmd.major]
        try:
            q = QmdReader(lay.prefix, self.mem.view(qmd_va, lay.size_B, "").tobytes())
            cb0_va, cb0_size = self._cbuf(q, lay, 0)
            prog = self._program(q, lay)
        except PageFault:
            return  # the launch faults when the channel gets to it
        base = self.generation.param_base
        self.mem.races.watch((id(ch), qmd_va), self._kernel_label(prog, ch),
                             pointers_in(self.mem, [(cb0_va + base, cb0_size - base)]), self.mem,
                             "queued", (cb0_va, qmd_va))

    def _kernel_label(self, prog: int, ch: MockChannel) -> str:
        """"kernel NAME (channel N)" for a PTX image, else its address."""
        from runtime.drivers.nv.ptx import ENTRY_HEADER, read_entry_record
        try:
            head = self.mem.read(prog, ENTRY_HEADER.size)
            if head[:4] == b"\x7fPTX":
                nlen = struct.unpack_from("<H", head, 6)[0]
                rec = read_entry_record(self.mem.read(prog, ENTRY_HEADER.size + nlen))
                if rec is not None:
                    return f"kernel {rec[0]} (channel {ch.chid})"
        except PageFault:
            pass
        return f"the kernel at {prog:#x} (channel {ch.chid})"

    @staticmethod
    def _program(q: QmdReader, lay: QmdLayout) -> int:
        upper, lower, shift = lay.program
        return (q.get(upper) << 32 | q.get(lower)) << shift

    @staticmethod
    def _cbuf(q: QmdReader, lay: QmdLayout, i: int) -> tuple[int, int]:
        upper, lower, shift = lay.cbuf
        va = (q.get(upper, i) << 32 | q.get(lower, i)) << shift
        return va, q.get("CONSTANT_BUFFER_SIZE_SHIFTED4", i) << 4

    def _check_qmd(self, ch: MockChannel, q: QmdReader, major: int, lay: QmdLayout) -> list[str]:
        e: list[str] = []

        def want(cond: bool, msg: str) -> None:
            if not cond:
                e.append(msg)

        want(q.get("QMD_MAJOR_VERSION") == major,
             f"QMD_MAJOR_VERSION {q.get('QMD_MAJOR_VERSION')}, this class takes {major}")
        max_cfg = lay.max_sm_config
        if lay.typed:
            want(q.get("QMD_MINOR_VERSION") == 0, "QMD_MINOR_VERSION must be 0")
            want(q.get("QMD_TYPE") == getattr(cl, q.prefix + "_QMD_TYPE_GRID_CTA"),
                 f"QMD_TYPE {q.get('QMD_TYPE')} is not GRID_CTA")
        else:
            want(q.get("SM_GLOBAL_CACHING_ENABLE") == 1,
                 "SM_GLOBAL_CACHING_ENABLE must be 1 on V03")
        want(q.get("SASS_VERSION") == self.sass_version,
             f"SASS_VERSION {q.get('SASS_VERSION'):#x}, the GPU runs {self.sass_version:#x}")
        # The completion barrier: system scope, or GPU scope (L1_MEMBAR, with or without task
        # chasing) on a grid that only starts successors on this GPU and releases nothing the
        # host could see before the grid's writes reach system scope.
        membar, sysmembar = q.get("CWD_MEMBAR_TYPE"), 1
        if membar != sysmembar:
            gpu_scope = getattr(cl, q.prefix + "_CWD_MEMBAR_TYPE_L1_MEMBAR", None)
            starts = any(q.get(en, idx) for en, _, _, _, idx in lay.dependents)
            want(membar == gpu_scope and starts and not q.get(lay.release[0], 0),
                 f"CWD_MEMBAR_TYPE {membar}: only a grid that starts a successor and releases no "
                 "semaphore may complete with less than the system-scope barrier")
        for n, v in (("QMD_GROUP_ID", 0x3F), ("API_VISIBLE_CALL_LIMIT", 1), ("SAMPLER_INDEX", 1),
                     ("INVALIDATE_TEXTURE_HEADER_CACHE", 1),
                     ("INVALIDATE_TEXTURE_SAMPLER_CACHE", 1), ("INVALIDATE_TEXTURE_DATA_CACHE", 1),
                     ("INVALIDATE_SHADER_DATA_CACHE", 1)):
            want(q.get(n) == v, f"{n} is {q.get(n)}, expected {v}")
        prog = self._program(q, lay)
        want(prog % 128 == 0, f"program address {prog:#x} is not 128-byte aligned")
        try:
            self.mem.find(prog, 16, "program")
        except PageFault:
            e.append(f"program address {prog:#x} is not mapped")
        pf = q.get("PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED") << 32 \
            | q.get("PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED")
        want(pf == prog >> 8, f"program prefetch address {pf << 8:#x} is not the program's")
        regs = q.get(lay.registers)
        want(1 <= regs <= 255, f"register count {regs} outside 1..255")
        want(1 <= q.get("BARRIER_COUNT") <= 16,
             f"BARRIER_COUNT {q.get('BARRIER_COUNT')} outside 1..16")
        grid = [q.get(n) for n in lay.grid]
        block = [q.get(f"CTA_THREAD_DIMENSION{i}") for i in range(3)]
        want(all(g >= 1 for g in grid), f"grid {grid} has a zero dimension")
        want(all(b >= 1 for b in block) and block[0] * block[1] * block[2] <= 1024,
             f"block {block} is empty or has more than 1024 threads")
        shared = q.get(lay.shared[0]) << lay.shared[1]
        lo, tgt, hi = (q.get(f"{n}_SM_CONFIG_SHARED_MEM_SIZE") for n in ("MIN", "TARGET", "MAX"))
        want(0 < lo <= tgt <= hi <= max_cfg, f"SM config min/target/max {lo}/{tgt}/{hi} (max "
             f"{max_cfg})")
        want((tgt - 1) * 4096 >= shared, f"target carveout {(tgt - 1) * 4} KiB < {shared} B of "
             "shared memory")
        want(shared >= lay.reserved_smem_B, f"shared memory {shared} B leaves no room for the "
             f"reserved {lay.reserved_smem_B} B")
        # constant buffers
        want(q.get("CONSTANT_BUFFER_VALID", 0) == 1, "constant buffer 0 is not valid")
        want(q.get("CONSTANT_BUFFER_INVALIDATE", 0) == 1, "constant buffer 0 is not invalidated")
        for i in range(8):
            if q.get("CONSTANT_BUFFER_VALID", i):
                want(q.get("CONSTANT_BUFFER_SIZE_SHIFTED4", i) > 0,
                     f"constant buffer {i} has size 0")
        # windows and local memory
        want(ch.shared_window is not None and ch.local_window is not None,
             "launch before SET_SHADER_SHARED/LOCAL_MEMORY_WINDOW")
        if ch.shared_window is not None:
            want(ch.shared_window % lay.shared_window_align == 0,
                 f"shared window {ch.shared_window:#x} is not {lay.shared_window_align:#x}-byte "
                 "aligned")
        slm = q.get(lay.slm[0]) << lay.slm[1]
        if slm:
            slm_va = ch.slm[0] << 32 | ch.slm[1]
            per_tpc = ch.slm[2] << 32 | ch.slm[3]
            need = _round_up(_round_up(slm * 32, 0x200) * self.max_warps_per_sm * self.sm_per_tpc,
                             0x8000)
            want(slm_va != 0, f"{slm} B of local memory per thread but no SET_SHADER_LOCAL_MEMORY")
            want(per_tpc >= need, f"local memory: {per_tpc:#x} B per TPC < {need:#x} needed")
            if slm_va:
                try:
                    self.mem.find(slm_va, per_tpc * self.tpc_per_gpc * self.num_gpcs, "SLM")
                except PageFault:
                    e.append(f"shader local memory at {slm_va:#x} is not mapped for all TPCs")
        if not e:
            e += self._check_qmd_dynamic(ch, q, lay, _static_qmd(q, lay, prog))
        return e

    def _cb0_if_valid(self, q: QmdReader, lay: QmdLayout, st: "_QmdStatic",
                      cb0_va: int) -> bytes | None:
        """Constant bank 0 of a launch whose fixed QMD fields were checked, when the fields that
        change from launch to launch pass `_check_qmd_dynamic`'s checks (the common case, checked
        at less cost: bank 0 the only one, mapped, its launch header the one expected); else
        None."""
        if st.cbufs != (0,) or st.cb0_head is None:
            return None
        try:
            data, off = self.mem.find(cb0_va, max(st.cb0_size, 1), "constant buffer 0")
        except PageFault:
            return None
        cb0 = data[off:off + st.cb0_size].tobytes()
        if not cb0.startswith(st.cb0_head):
            return None
        if lay.typed and st.release:
            _, upper, lower, _ = lay.release
            va = q.get(upper) << 32 | q.get(lower)
            if va % 16 or not va:
                return None
        return cb0

    def _check_qmd_dynamic(self, ch: MockChannel, q: QmdReader, lay: QmdLayout,
                           st: "_QmdStatic") -> list[str]:
        """The checks of the fields that change from launch to launch: the constant buffers'
        addresses (mapped), constant bank 0's launch header, the release semaphore's address."""
        e: list[str] = []

        def want(cond: bool, msg: str) -> None:
            if not cond:
                e.append(msg)

        for i in st.cbufs:
            va, size = self._cbuf(q, lay, i)
            try:
                self.mem.find(va, max(size, 1), f"constant buffer {i}")
            except PageFault:
                e.append(f"constant buffer {i} [{va:#x}, +{size:#x}) is not mapped")
        cb0_va, cb0_size = self._cbuf(q, lay, 0)
        if cb0_size >= 0x30 and not e:
            block, grid = list(st.block), list(st.grid)
            cb0 = self.mem.read(cb0_va, 0x30)
            bd, gd = struct.unpack_from("<3I", cb0, 0), struct.unpack_from("<3I", cb0, 0xC)
            want(list(bd) == block, f"cb0 blockDim {bd} != QMD block {block}")
            want(list(gd) == grid, f"cb0 gridDim {gd} != QMD grid {grid}")
            sw, lw, sp = struct.unpack_from("<QQI", cb0, 0x18)
            want(sw == ch.shared_window, f"cb0 shared window {sw:#x} != the channel's "
                 f"{ch.shared_window}")
            want(lw == ch.local_window,
                 f"cb0 local window {lw:#x} != the channel's {ch.local_window}")
            want(sp == CB0_STACK_POINTER, f"cb0 stack pointer {sp:#x}")
        # release semaphore
        _, upper, lower, _ = lay.release
        if lay.typed and st.release:
            va = q.get(upper) << 32 | q.get(lower)
            want(va % 16 == 0 and va != 0, f"release semaphore at {va:#x} is not 16-byte aligned")
        return e
