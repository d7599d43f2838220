"""The device: timeline, memory, queues, copies, synchronization and teardown.

A driver subclasses `Device`, opens the hardware in its constructor and then calls `_init_core()`,
which creates the pieces every vendor shares: the signal pool, the timeline signal, the
kernel-argument arena and (lazily) the pinned staging buffers for copies.

Ordering: every submission the device makes itself (copies, launches, graph replays) waits for
timeline value v-1 and signals v, so work is executed in submission order across the compute and
copy engines. User-built queues are free to do otherwise.

Threads: every submission is built and published under the device's `SubmitLock` (reentrant), so
calls from several threads give what some serial order of them would; waits never hold it. Copies
through the staging buffers hold a second lock for their whole length (they reuse those buffers).
After fork() a device inherited from the parent refuses every use (`DeviceForked`).
"""
from __future__ import annotations

import collections
import inspect as _inspect
import operator
import os as _os
import re
import signal as _signal
import sys as _sys
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence, TypeVar

from runtime.hcq import profiler
from runtime.hcq.errors import (ArgumentError, DeviceClosed, DeviceFault, DeviceForked,
                                DeviceNotFound, HCQError, HCQMemoryError, QueueError)
from runtime.hcq.memory import (PAGE_B, Allocator, Buffer, BufferSpec, MemKind, PoolStats,
                                RingArena, SlotPool)
from runtime.hcq.signal import SIGNAL_B, SPIN_S, Signal

if TYPE_CHECKING:
    from runtime.hcq.compiler import CompileCache, Compiler
    from runtime.hcq.profiler import Tracer
    from runtime.hcq.stream import Event, Stream
    from runtime.hcq.graph import Graph, Node
    from runtime.hcq.program import Program
    from runtime.hcq.queue import HWQueue
    from runtime.hcq.seam import OSSeam

_T = TypeVar("_T")
_SIGNAL_POOL_B = 64 * 1024  # 4096 signals per page group
_PIPELINE_MIN_B = 256 * 1024  # smallest piece of a staged copy split for pipelining
_PIPELINE_MAX_B = 4 << 20     # largest copy split so


# ASCII digits without leading zeros: "mock-amd:00", "amd:0\n" and non-ASCII digits are refused.
_DEVICE_NAME = re.compile(r"(mock-)?(amd|nv)(?::(0|[1-9][0-9]{0,3}))?", re.ASCII)
#: the mock machine has at most this many GPUs of each vendor
MAX_MOCK_GPUS = 16
_VENDOR_NAMES = {"amd": "AMD", "nv": "NVIDIA"}


class SubmitLock:
    """The lock every submission of a device is built and published under (reentrant).

    `flags`, when a driver gives it, is a word array whose `flag_index` word gets bit 1 while a
    thread holds the lock: a native launch path that does not take the lock (it runs under the
    GIL without yielding) declines while the bit is set, so it never interleaves with a
    submission being built in Python."""

    __slots__ = ("_lock", "depth", "flags", "flag_index", "waiting")

    HELD = 2

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.depth = 0
        self.flags: Any = None
        self.flag_index = 0
        #: > 0 while the holder waits for room (`interruptible`)
        self.waiting = 0

    def __enter__(self) -> "SubmitLock":
        self._lock.acquire()
        self.depth += 1
        if self.depth == 1 and self.flags is not None:
            self.flags[self.flag_index] |= self.HELD
        return self

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0 and self.flags is not None:
            self.flags[self.flag_index] &= ~self.HELD
        self._lock.release()

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock."""
        return bool(self._lock._is_owned())  # type: ignore[attr-defined]

    def interruptible(self, wait: Callable[[], _T]) -> _T:
        """Runs `wait`, a wait for room made while building a submission (ring space, the
        argument arena's wrap), such that a Ctrl-C during it is raised at once instead of being
        held back until the wait ends. The caller guarantees that nothing of the submission it
        builds has reached a ring yet and that every earlier submission made under this holding
        of the lock is fully accounted for, so the interrupted call leaves nothing half done."""
        if not self._lock._is_owned():  # type: ignore[attr-defined]
            return wait()  # not inside a submission: nothing holds a Ctrl-C back
        # No interpreter check point lies between the increment and the try, nor in the
        # finally clause, so the count always returns to what it was.
        self.waiting += 1
        try:
            return wait()
        finally:
            self.waiting -= 1


# Devices open in this process, so that a forked child can mark the ones it inherited.
_open_devices: "weakref.WeakSet[Device]" = weakref.WeakSet()
# [a Ctrl-C arrived while the main thread held a device's SubmitLock (or was inside a mock kernel
# call), it will be sent again after _REDELIVER_S]
_deferred_interrupt = [False, False]
_REDELIVER_S = 0.001


def _interrupt_must_wait() -> bool:
    """Whether this thread is publishing a submission (holds a device's SubmitLock) or is inside
    a call into a device's OS seam that must complete (a mock kernel's ioctl)."""
    for dev in list(_open_devices):
        if dev._submit.held_here() and not dev._submit.waiting:
            return True
        seam = getattr(dev, "os", None)
        if seam is not None and seam.busy_here():
            return True
    return False


def _finalizer_codes() -> frozenset[Any]:
    """The code of the standard library's finalizers that run Python code: weakref.finalize and
    the removal callbacks of the weak containers (the runtime keeps its open devices and pending
    copies in WeakSets)."""
    codes = {weakref.finalize.__call__.__code__}
    containers: tuple[Any, ...] = (weakref.WeakSet(), weakref.WeakValueDictionary(),
                                   weakref.WeakKeyDictionary())
    for container in containers:
        remove = getattr(container, "_remove", None)
        if remove is not None:
            codes.add(remove.__code__)
    return frozenset(codes)


_FINALIZER_CODES = _finalizer_codes()
_GENERATOR_FLAGS = _inspect.CO_GENERATOR | _inspect.CO_COROUTINE | _inspect.CO_ASYNC_GENERATOR


def _in_finalizer(frame: Any) -> bool:
    """Whether `frame` (where a signal landed) runs inside a finalizer: a `__del__`, a
    weakref.finalize or weak container callback, a generator being closed, or the hook that
    reports an exception a finalizer let escape. An exception raised there cannot reach the
    interrupted code: Python reports it as unraisable and drops it, and the finalizer stops
    half way."""
    closing = _sys.exc_info()[0] is GeneratorExit
    while frame is not None:
        code = frame.f_code
        if code in _FINALIZER_CODES or code.co_name == "__del__" or \
                code is _HoldUnraisableInterrupt.__call__.__code__ or \
                (closing and code.co_flags & _GENERATOR_FLAGS):
            return True
        frame = frame.f_back
    return False


def _on_sigint(signum: int, frame: object) -> None:
    """SIGINT handler installed at the first device open (only over Python's default one): a
    KeyboardInterrupt is raised as usual, except while the main thread is publishing a
    submission, is inside a mock kernel's call or runs a finalizer: then it is raised once that
    is complete (it is sent again until it lands outside such a section). So no half-published
    work (commands in a ring but no doorbell, a doorbell but no timeline value) is left behind,
    as a real system call completes before the signal handler runs, and no finalizer stops half
    way with the Ctrl-C reported as unraisable and lost."""
    try:
        wait = _interrupt_must_wait() or _in_finalizer(frame)
    except Exception:  # noqa: BLE001  (never let the handler itself fail)
        wait = False
    if wait:
        _hold_interrupt()
        return
    _deferred_interrupt[0] = False
    _signal.default_int_handler(signum, frame)  # type: ignore[arg-type]


def _hold_interrupt() -> None:
    """Notes a Ctrl-C held back; it is sent again (SIGINT to the main thread) shortly, until it
    lands outside a section that holds it back."""
    _deferred_interrupt[0] = True
    if not _deferred_interrupt[1]:
        _deferred_interrupt[1] = True
        t = threading.Timer(_REDELIVER_S, _redeliver, (threading.main_thread().ident,))
        t.daemon = True
        t.start()


def _redeliver(main: int) -> None:
    _deferred_interrupt[1] = False
    _signal.pthread_kill(main, _signal.SIGINT)


class _HoldUnraisableInterrupt:
    """`sys.unraisablehook` while the runtime handles SIGINT: a KeyboardInterrupt that a
    finalizer the handler does not recognise let escape (a plain weakref callback, say) is not
    printed and dropped but held back and raised again in the main thread; other exceptions go
    to the hook that was installed before."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _hold_interrupt()
            return
        self.previous(unraisable)


def interrupt_pending() -> bool:
    """Whether a Ctrl-C is being held back until a submission or kernel call completes (a long
    wait inside a mock kernel call returns early then, as a real one would with EINTR)."""
    return _deferred_interrupt[0]


def _guard_sigint() -> None:
    if hasattr(_signal, "pthread_kill") and \
            threading.current_thread() is threading.main_thread() and \
            _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _on_sigint)
        if not isinstance(_sys.unraisablehook, _HoldUnraisableInterrupt):
            _sys.unraisablehook = _HoldUnraisableInterrupt(_sys.unraisablehook)


def _after_fork_in_child() -> None:
    for dev in list(_open_devices):
        dev._mark_forked()
    _open_devices.clear()


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)


@dataclass(frozen=True)
class DeviceName:
    """A parsed device name: "nv:1" is DeviceName("nv", False, 1), "mock-amd" DeviceName("amd",
    True, 0)."""

    vendor: str    # "amd" or "nv"
    mock: bool     # the mock GPU of that vendor
    index: int


def parse_device_name(name: str, vendor: str | None = None) -> DeviceName:
    """Parses "amd:N", "nv:N", "mock-amd:N" or "mock-nv:N" (":N" defaults to 0); with `vendor`,
    only that vendor's names. Raises `DeviceNotFound` naming the accepted forms."""
    m = _DEVICE_NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None or (vendor is not None and m.group(2) != vendor):
        if vendor is None:
            raise DeviceNotFound(f"unknown device name {name!r} (expected amd:N, nv:N, mock-amd:N "
                                 "or mock-nv:N)")
        raise DeviceNotFound(f"{name!r} is not an {_VENDOR_NAMES[vendor]} device name "
                             f"({vendor}:N or mock-{vendor}:N)")
    parsed = DeviceName(m.group(2), m.group(1) is not None, int(m.group(3) or 0))
    if parsed.mock and parsed.index >= MAX_MOCK_GPUS:
        raise DeviceNotFound(f"{name!r}: the mock machine has {MAX_MOCK_GPUS} GPUs of each vendor "
                             f"(indices 0 to {MAX_MOCK_GPUS - 1})")
    return parsed


@dataclass(frozen=True)
class DeviceProperties:
    """What a device is, in one vendor-neutral record (`Device.properties`). Sizes in bytes,
    clocks in Hz."""

    vendor: str                         #: "AMD" or "NVIDIA"
    name: str                           #: the product or chip name the driver reports
    arch: str                           #: compiler target: "gfx1100", "sm_90"
    compute_units: int                  #: AMD compute units / NVIDIA streaming multiprocessors
    simd_width: int                     #: threads per wave (AMD) or warp (NVIDIA)
    max_workgroup_size: int             #: threads per workgroup (CUDA block)
    shared_memory_per_workgroup_B: int  #: LDS / shared memory one workgroup may use
    max_clock_hz: float | None          #: shader clock's maximum; None where the driver says none
    timestamp_hz: float                 #: clock of queue timestamps (`Device.clock_hz`)
    memory_B: int                       #: device memory (VRAM) size
    mock: bool                          #: a mock GPU: its times are the emulator's, not a GPU's


class MemInfo(NamedTuple):
    """Device memory as the kernel driver reports it (`Device.mem_info()`): `free, total =
    dev.mem_info()`. Memory this process holds (the caching allocator's pool included) is not
    free."""

    free_B: int
    total_B: int


class Device:
    """Base class of GPU devices. See the module docstring for what drivers provide."""

    #: seconds before a wait gives up when the caller names no timeout
    default_timeout_ms: float = 30_000.0
    #: the operating-system seam the driver talks through (set by each driver's constructor)
    os: OSSeam
    #: how long a wait polls before it sleeps (runtime.hcq.signal); `_init_core` sets it from the
    #: seam
    wait_spin_s: float = SPIN_S

    def __init__(self, name: str, *, staging_B: int = 8 << 20,
                 kernarg_arena_B: int = 1 << 20, pool_B: int = 256 << 20) -> None:
        self.name = name
        self.arch = "unknown"
        self.clock_hz = 100_000_000.0
        self.closed = False
        self.staging_B, self.kernarg_arena_B = staging_B, kernarg_arena_B
        self.pool_B = pool_B  # freed memory kept for reuse (see Allocator)
        self.timeline_value = 0  # last value handed out by next_timeline()
        self._fault: DeviceFault | None = None
        self._forked = False
        #: held while a submission is built and published (see the module docstring)
        self._submit = SubmitLock()
        self._copy_lock = threading.Lock()
        self._signal_pools: list[SlotPool] = []
        self._staging: list[list[Any]] = []  # [buffer, timeline value that frees it]
        self._arena: RingArena | None = None
        self._compiler: Any = None
        self._compile_cache: "CompileCache | None" = None
        self._streams: list["Stream"] = []
        # What submitted work waits for besides the timeline (graph waits, device.wait events):
        # key -> (what, signal, value), named in timeout reports while not reached
        self._gates: dict[object, tuple[str, Signal, int]] = {}
        self._peer_maps: dict[int, Buffer] = {}  # id(other device's buffer) -> its mapping here
        # copyout_async copies whose GPU part may still read their source (under _submit)
        self._pending_copies: "weakref.WeakSet[PendingCopy]" = weakref.WeakSet()
        # memory the GPU may still write, each with the timeline value after which it does not
        # (`free_when_done`): freed at the next copy out or synchronize past that value
        self._free_later: collections.deque[tuple[Buffer, int]] = collections.deque()
        #: gives back what the device was opened on (a shared mock machine); called by close()
        self._release_lease: Callable[[], None] | None = None
        self._properties: DeviceProperties | None = None
        #: the profiler's and debug log's hooks while either is on (runtime/hcq/profiler.py)
        self.tracer: Tracer | None = None
        self.allocator: Allocator
        self.timeline_signal: Signal

    def _claim(self) -> None:
        """Called by the driver before it opens anything: refuses a second open of the same GPU
        in this process (the kernel drivers refuse it, less clearly) and names the open one."""
        me = parse_device_name(self.name)
        for other in list(_open_devices):
            if other.closed or type(other) is not type(self) or \
                    other.os.kernel is not self.os.kernel:
                continue
            if parse_device_name(other.name).index == me.index:
                raise HCQError(f"{self.name}: this GPU is already open in this process as "
                               f"{other!r}; use that device (any thread may) or close it first")
        _open_devices.add(self)
        _guard_sigint()

    def _init_core(self, allocator: Allocator) -> None:
        """Called by the driver once its hardware is open."""
        _open_devices.add(self)
        self.allocator = allocator
        allocator.cache_limit_B = self.pool_B
        # No polling where the GPU runs on a thread of this process and needs the GIL a poll holds.
        self.wait_spin_s = 0.0 if self.os.gpus_in_process else SPIN_S
        self.timeline_signal = self.new_signal(0)
        self.timeline_value = 0
        profiler.attach(self)

    # ------------------------------------------------------------------ description
    @property
    def properties(self) -> DeviceProperties:
        """The device's vendor, name, architecture, compute units, wave width, workgroup limits,
        clock and memory size (read from the driver once)."""
        if self._properties is None:
            self.check_usable()
            self._properties = self._read_properties()
        return self._properties

    def mem_info(self) -> MemInfo:
        """(free, total) device memory in bytes, asked of the kernel driver now (AMD:
        AMDKFD_IOC_AVAILABLE_MEMORY and the topology's memory banks; NVIDIA: RM's FB info)."""
        self.check_usable()
        return self._mem_info()

    def _read_properties(self) -> DeviceProperties:
        """Driver hook: the `properties` record."""
        raise NotImplementedError(f"{type(self).__name__} must implement _read_properties")

    def _mem_info(self) -> MemInfo:
        """Driver hook: free and total device memory from the kernel driver."""
        raise NotImplementedError(f"{type(self).__name__} must implement _mem_info")

    # ------------------------------------------------------------------ memory
    def alloc(self, size: int, *, kind: MemKind = MemKind.VRAM, cpu_access: bool = False,
              uncached: bool = False, executable: bool = False) -> Buffer:
        """Allocates `size` bytes of device memory (VRAM by default) mapped at a GPU address.
        Freed memory of the same size and kind is reused without a driver call (see
        `pool_stats`); `size` 0 gives an empty buffer at address 0. Raises HCQMemoryError for a
        size that is not a non-negative integer or that the device cannot provide, and
        ArgumentError for a `kind` that is not a MemKind."""
        self.check_usable()
        if type(kind) is not MemKind:
            raise ArgumentError(f"alloc: kind must be a MemKind (MemKind.VRAM, MemKind.GTT, "
                                f"MemKind.HOST), got {type(kind).__name__} {kind!r}")
        with self._submit:
            return self.allocator.alloc(size, BufferSpec(kind, bool(cpu_access), bool(uncached),
                                                         bool(executable)))

    def free(self, buf: Buffer) -> None:
        """Frees a buffer from `alloc` (its memory goes to the pool for reuse). The caller makes
        sure the GPU no longer uses it."""
        self._check_process()
        if self.closed:
            raise DeviceClosed(f"{self.name} is closed")
        peer = getattr(buf, "peer_of", None)
        if peer is not None and buf.device is self:
            raise HCQError(f"{buf!r} is a peer mapping of {peer!r}: unmap it with "
                           f"{self.name}.unmap_peer, or free the buffer on {peer.device.name}")
        with self._submit:
            self.allocator.free(buf)
            for p in list(self._pending_copies):
                p._source_freed(buf)

    def pool_stats(self) -> PoolStats:
        """The caching allocator's hits, misses and cached bytes."""
        return self.allocator.stats()

    def trim_pool(self) -> None:
        """Returns the memory cached by the allocator to the driver."""
        self.check_usable()
        with self._submit:
            self.allocator.trim()

    def new_signal(self, value: int = 0) -> Signal:
        """A fresh 16-B signal in uncached memory, set to `value` (an integer from 0 to 2**64 - 1;
        anything else is refused with ArgumentError before a slot is taken)."""
        if type(value) is not int:
            try:
                value = operator.index(value)
            except TypeError:
                raise ArgumentError(f"new_signal: value must be an integer, got "
                                    f"{type(value).__name__} {value!r}") from None
        if not 0 <= value < 1 << 64:
            raise ArgumentError(f"new_signal: value {value} is outside 0 to 2**64 - 1 (a signal "
                                "is a 64-bit unsigned counter)")
        self.check_usable()
        with self._submit:
            for pool in self._signal_pools:
                if pool.free_count:
                    break
            else:
                buf = self.alloc(_SIGNAL_POOL_B, kind=MemKind.GTT, cpu_access=True, uncached=True)
                pool = SlotPool(buf, SIGNAL_B)
                self._signal_pools.append(pool)
            off = pool.take()
            sig = Signal(self, pool.buf.slice(off, SIGNAL_B), off)
            sig.value, sig.timestamp = value, 0
            return sig

    def release_signal(self, sig: Signal) -> None:
        """Gives `sig`'s slot back to the device's signal pool (called when the Signal is
        freed)."""
        with self._submit:
            for i, pool in enumerate(self._signal_pools):
                if sig.buf.base is pool.buf:
                    pool.give(sig._pool_offset or 0)
                    # A pool whose signals all came back is returned (the first holds the
                    # timeline).
                    if i and pool.free_count == pool.capacity and not self.closed:
                        del self._signal_pools[i]
                        self.free(pool.buf)
                    return

    def alloc_kernargs(self, size: int) -> Buffer:
        """Memory for launch blocks (kernel arguments, and on NVIDIA the QMDs): written by the
        CPU, read by the GPU at every launch. Here uncached host memory; a driver whose GPU reads
        system memory slowly returns CPU-visible VRAM instead."""
        return self.alloc(size, kind=MemKind.GTT, cpu_access=True, uncached=True)

    def kernarg_arena(self) -> RingArena:
        """The ring of launch blocks (kernel arguments) that launches without a prebuilt block
        take from, made on first use."""
        if self._arena is None:
            with self._submit:
                if self._arena is None:
                    self._arena = RingArena(self.alloc_kernargs(self.kernarg_arena_B))
        return self._arena

    # ------------------------------------------------------------------ queues and programs
    def compute_queue(self) -> "HWQueue":
        """A new command builder for the compute engine."""
        raise NotImplementedError(f"{type(self).__name__} must implement compute_queue")

    def copy_queue(self) -> "HWQueue":
        """A new command builder for the copy engine."""
        raise NotImplementedError(f"{type(self).__name__} must implement copy_queue")

    def program(self, lib: bytes, name: str) -> "Program":
        """Loads kernel `name` from the code object `lib`."""
        raise NotImplementedError(f"{type(self).__name__} must implement program")

    @property
    def executes_kernels(self) -> bool:
        """Whether launched kernels really run: False on a mock GPU that models launches (arguments,
        queues, completion) without executing the kernel's code, as the NVIDIA mock does."""
        return self.os.executes_kernels

    @property
    def compiler(self) -> "Compiler":
        """The vendor compiler (clang for AMD, NVRTC for NVIDIA), created on first use."""
        if self._compiler is None:
            self._compiler = self._make_compiler()
        return self._compiler

    def _make_compiler(self) -> "Compiler":
        raise NotImplementedError(f"{type(self).__name__} has no compiler")

    def compile(self, src: str, **options: Any) -> bytes:
        """`compiler.compile(src, **options)` through the disk cache (`compile_cache`): a source
        compiled before with the same options and compiler version is read back, not rebuilt."""
        return self.compile_cache.compile(src, **options)

    @property
    def compile_cache(self) -> "CompileCache":
        """The disk cache `compile` uses ($HCQ_COMPILE_CACHE, default ~/.cache/hcq-compile)."""
        if self._compile_cache is None:
            from runtime.hcq.compiler import CompileCache
            self._compile_cache = CompileCache(self.compiler)
        return self._compile_cache

    def graph(self, nodes: Sequence["Node"]) -> "Graph":
        """Records launches, copies (GraphCopy) and signal waits (GraphWait) for cheap replay."""
        from runtime.hcq.graph import Graph
        return Graph(self, nodes)

    # ------------------------------------------------------------------ timeline
    def next_timeline(self) -> int:
        """Reserves the next timeline value (a submission waits for it minus one and signals it).
        Reserve only once the submission is built and validated: a value nothing signals stalls
        every later submission. `submit_timeline` does it in the right order."""
        self.timeline_value += 1
        return self.timeline_value

    def submit_timeline(self, q: "HWQueue", v: int) -> int:
        """Submits `q`, built to wait for `v - 1` and signal `v` (`v` = timeline_value + 1, read
        before building), then takes `v` as reserved. A queue that failed to build never gets
        here, and one the driver refuses before it reaches the hardware leaves the timeline as
        it was, so a refused launch cannot stall the device."""
        with self._submit:
            if v != self.timeline_value + 1:
                raise QueueError(f"timeline value {v} was built for, but {self.timeline_value + 1} "
                                 "is next (another submission came in between: build under "
                                 "the device's _submit lock)")
            q.submit()
            self.timeline_value = v
        return v

    def resubmit_timeline(self, resubmit: Callable[[int], None]) -> int:
        """`submit_timeline` for a queue built once around a variable that stands for its
        timeline value (it waits for the variable - 1 and signals the variable): calls
        `resubmit` (`HWQueue.resubmitter`) with v = timeline_value + 1, then takes v as
        reserved. One that raises leaves the timeline as it was."""
        with self._submit:
            v = self.timeline_value + 1
            resubmit(v)
            self.timeline_value = v
        return v

    def synchronize(self, timeout_ms: float | None = None) -> None:
        """Waits until everything the device submitted has completed (its timeline and every
        stream's), then asks the driver whether the GPU reported a fault (work submitted outside
        the timeline may have faulted)."""
        self.check_usable()
        self.timeline_signal.wait(self.timeline_value, timeout_ms)
        for s in list(self._streams):
            s.timeline.wait(s.value, timeout_ms)
        self._free_done()
        self.check_fault()

    def free_when_done(self, buf: Buffer, value: int) -> None:
        """Frees `buf`, memory the GPU may still write, once the device timeline has reached
        `value`: at the next copy out (`copyout_async`) or `synchronize()` after that, or at
        close. Safe to call from a finalizer in any thread (it only notes the buffer)."""
        if not self.closed:
            self._free_later.append((buf, value))

    def _free_done(self) -> None:
        """Frees what `free_when_done` noted that the GPU is done with."""
        q = self._free_later
        if not q:
            return
        done = self.timeline_signal.value
        with self._submit:  # a Ctrl-C is held back: a buffer taken off the list is freed
            for _ in range(len(q)):
                buf, value = q.popleft()
                if value <= done:
                    self.free(buf)
                else:
                    q.append((buf, value))

    # ------------------------------------------------------------------ streams and events
    def stream(self) -> "Stream":
        """A new independent compute stream with its own hardware queue (see runtime.hcq.stream);
        `synchronize()` covers it."""
        from runtime.hcq.stream import Stream
        self.check_usable()
        with self._submit:
            make_queue, release = self._stream_hw()
            try:
                s = Stream(self, make_queue, release, f"stream {len(self._streams) + 1}")
            except BaseException:
                release()
                raise
            self._streams.append(s)
        return s

    def stream_closed(self, stream: "Stream", release: Callable[[], None]) -> None:
        """Called by `Stream.close`: the device stops covering `stream` in `synchronize()` and
        `release` gives its hardware queue back, both under the submission lock (no submission
        of another thread sees the stream half gone)."""
        with self._submit:
            self._streams.remove(stream)
            release()

    def record(self, timing: bool = False) -> "Event":
        """The event of everything submitted on the device timeline so far (copies, launches,
        graph replays); with `timing`, a submission that stamps the GPU clock once that work is
        done (see `Event.elapsed_time`)."""
        from runtime.hcq.stream import Event, _stamp_signal, _timed
        if not timing:
            return Event(self.timeline_signal, self.timeline_value)
        self.check_usable()
        stamp = _stamp_signal(self)
        with self._submit:
            v = self.timeline_value + 1
            q = self.compute_queue().wait(self.timeline_signal, v - 1).timestamp(stamp)
            self.submit_timeline(q.signal(self.timeline_signal, v), v)
        return _timed(Event(self.timeline_signal, v), stamp)

    def wait(self, event: "Event") -> None:
        """Makes the device timeline's later work wait for `event` (e.g. a stream's)."""
        self.check_usable()
        from runtime.hcq.stream import Event
        if not isinstance(event, Event):
            raise HCQError(f"{self.name}.wait takes an Event (stream.record(), device.record()), "
                           f"got {type(event).__name__}")
        if event.signal.device is not self:
            raise HCQError(f"{event!r} belongs to {event.signal.device.name}; map its signal with "
                           f"{self.name}.map_signal first")
        with self._submit:
            v = self.timeline_value + 1
            q = self.compute_queue().wait(self.timeline_signal, v - 1).wait(event.signal,
                                                                            event.value)
            self.submit_timeline(q.signal(self.timeline_signal, v), v)
            self._gates[("wait", v)] = (f"{self.name}.wait({event!r}) (timeline value {v})",
                                        event.signal, event.value)

    def _stream_hw(self) -> "tuple[Callable[[], HWQueue], Callable[[], None]]":
        """Driver hook: a fresh hardware compute queue for a stream, as (a maker of command
        builders for it, its release)."""
        raise NotImplementedError(f"{type(self).__name__} has no streams")

    # ------------------------------------------------------------------ copies
    def _staging_bufs(self) -> list[list[Any]]:
        # Called with _copy_lock held: the buffers belong to one copy at a time.
        if not self._staging:
            # Two buffers: the CPU fills one while the copy engine drains the other.
            for _ in range(2):
                buf = self.alloc(self.staging_B, kind=MemKind.GTT, cpu_access=True)
                self._staging.append([buf, 0])
        return self._staging

    def copyin(self, dst: Buffer, src: Any, dst_offset: int = 0) -> None:
        """Copies host bytes (any buffer-protocol object) into `dst` at `dst_offset` through pinned
        staging buffers and the copy engine. Returns once `src` may be reused; the copy is ordered
        before any later submission of this device."""
        mv = _host_bytes(src, "copyin", "src", writable=False)
        n = len(mv)
        self.check_range(dst, dst_offset, n, "copyin", "dst")
        if n == 0:
            return
        with self._copy_lock:
            self._copyin(dst, mv, dst_offset, n)

    def _copyin(self, dst: Buffer, mv: memoryview, dst_offset: int, n: int) -> None:
        tl = self.timeline_signal
        off = 0
        step = self._copy_chunk(n)
        for st in self._cycle(n, step):
            chunk = min(step, n - off)
            buf, busy = st
            if busy:
                tl.wait(busy)
            self._host_copy(buf.cpu_view()[:chunk], mv[off:off + chunk])
            with self._submit:  # a Ctrl-C is held back until the staging buffer is busy
                st[1] = self._submit_copy(dst.va + dst_offset + off, buf.va, chunk)
            off += chunk

    def copyout_async(self, dst: Any, src: Buffer, src_offset: int = 0) -> "PendingCopy":
        """Starts copying `len(dst)` bytes of `src` into host memory and returns at once; the
        copy is ordered after earlier submissions. `wait()` on the result blocks until `dst` is
        filled (the GPU copies into pinned memory from the pool; the CPU moves it into `dst`)."""
        mv = _host_bytes(dst, "copyout_async", "dst", writable=True)
        n = len(mv)
        self.check_range(src, src_offset, n, "copyout_async", "src")
        self._free_done()  # earlier copies dropped unwaited: their pinned memory is reused
        pinned = self.alloc(n, kind=MemKind.GTT, cpu_access=True)
        with self._submit:
            try:
                v = self._submit_copy(pinned.va, src.va + src_offset, n) if n else \
                    self.timeline_value
            except BaseException:
                self.free(pinned)
                raise
            pending = PendingCopy(self, mv, pinned, v, src)
            if n:
                self._pending_copies.add(pending)
        return pending

    def copyout(self, dst: Any, src: Buffer, src_offset: int = 0) -> None:
        """Copies `len(dst)` bytes from `src` at `src_offset` into a writable host buffer, through
        the copy engine and pinned staging buffers (two chunks in flight). Returns when `dst` is
        filled."""
        mv = _host_bytes(dst, "copyout", "dst", writable=True)
        n = len(mv)
        self.check_range(src, src_offset, n, "copyout", "src")
        if n == 0:
            return
        with self._copy_lock:
            self._copyout(mv, src, src_offset, n)

    def _copyout(self, mv: memoryview, src: Buffer, src_offset: int, n: int) -> None:
        tl = self.timeline_signal
        pending: collections.deque[tuple[list[Any], int, int, int]] = collections.deque()
        off = 0
        stages = self._staging_bufs()
        step = self._copy_chunk(n)
        i = 0
        while off < n or pending:
            if off < n and len(pending) < len(stages):
                st = stages[i % len(stages)]
                i += 1
                chunk = min(step, n - off)
                if st[1]:
                    tl.wait(st[1])
                with self._submit:  # a Ctrl-C is held back until the staging buffer is busy
                    v = st[1] = self._submit_copy(st[0].va, src.va + src_offset + off, chunk)
                pending.append((st, off, chunk, v))
                off += chunk
                continue
            st, doff, chunk, v = pending.popleft()
            tl.wait(v)
            self._host_copy(mv[doff:doff + chunk], st[0].cpu_view()[:chunk])

    def _host_copy(self, dst: memoryview, src: memoryview) -> None:
        """Copies bytes between user memory and a staging buffer (same length). A driver may
        override it, e.g. to split large copies across threads."""
        dst[:] = src

    def transfer(self, dst: Buffer, src: Buffer, size: int, dst_offset: int = 0,
                 src_offset: int = 0) -> None:
        """Copies `size` bytes between two buffers of this device (or peer mappings made here) on
        the copy engine (ordered, not waited). Between devices: `runtime.hcq.transfer`."""
        self.check_range(dst, dst_offset, size, "transfer", "dst")
        self.check_range(src, src_offset, size, "transfer", "src")
        if size == 0:
            return
        self._submit_copy(dst.va + dst_offset, src.va + src_offset, size)

    def fill(self, buf: Buffer, value: int, size: int | None = None, offset: int = 0, *,
             width: int = 1) -> None:
        """Sets `size` bytes of `buf` from `offset` (default: to its end) on the copy engine (AMD
        SDMA CONSTANT_FILL, NVIDIA copy-engine remap of a constant), asynchronously and ordered
        like copies: after every earlier submission, before every later one. `width` 1: `value`
        is a byte (0..255), as memset; `width` 4: `value` is a 32-bit pattern stored
        little-endian in every 4 bytes (offset and size must be multiples of 4), as
        cuMemsetD32."""
        if size is None:
            self.check_buffer(buf, "fill", "buf")
            size = buf.size - offset
        self.check_range(buf, offset, size, "fill", "buf")
        if width not in (1, 4):
            raise HCQMemoryError(f"fill: width must be 1 (a byte) or 4 (a 32-bit pattern), got "
                                 f"{width!r}")
        if type(value) is not int and not hasattr(value, "__index__"):
            raise HCQMemoryError(f"fill: value must be an integer, got {type(value).__name__}")
        value = operator.index(value)
        if not 0 <= value < 1 << (8 * width):
            raise HCQMemoryError(f"fill: value {value:#x} does not fit {width} byte(s)")
        if width == 4 and (offset % 4 or size % 4 or buf.va % 4):
            raise HCQMemoryError(f"fill: a 32-bit pattern needs offset and size multiples of 4, "
                                 f"got offset {offset}, size {size}")
        if size == 0:
            return
        pattern = value * 0x01010101 if width == 1 else value
        self._submit_fill(buf.va + offset, pattern, size)

    def _submit_fill(self, dst_va: int, pattern: int, size: int) -> int:
        """Submits one timeline fill on the copy queue; returns the value it signals."""
        with self._submit:
            if self.tracer is not None:
                return self.tracer.copy(dst_va, 0, size, pattern)
            v = self.timeline_value + 1
            tl = self.timeline_signal
            q = self.copy_queue().wait(tl, v - 1).fill(dst_va, pattern, size).signal(tl, v)
            return self.submit_timeline(q, v)

    def _submit_copy(self, dst_va: int, src_va: int, size: int) -> int:
        """Submits one timeline copy (wait for the previous value, copy, signal the next) on the
        copy queue; returns the value it signals. Drivers may replace it with a template."""
        with self._submit:
            if self.tracer is not None:
                return self.tracer.copy(dst_va, src_va, size)
            v = self.timeline_value + 1
            tl = self.timeline_signal
            q = self.copy_queue().wait(tl, v - 1).copy(dst_va, src_va, size).signal(tl, v)
            return self.submit_timeline(q, v)

    def _cycle(self, n: int, step: int) -> list[list[Any]]:
        stages = self._staging_bufs()
        count = -(-n // step)
        return [stages[i % len(stages)] for i in range(count)]

    def _copy_chunk(self, n: int) -> int:
        """Bytes per staged chunk of an `n`-byte copy: the staging size, but a copy of 512 KiB to
        4 MiB goes in up to four pieces of at least 256 KiB, so that the host's memcpy of each
        piece overlaps the copy engine's transfer of the one before. (Larger copies are already
        pipelined across staging buffers, and drivers may split their memcpy across threads.)"""
        if n > _PIPELINE_MAX_B:
            return self.staging_B
        return min(self.staging_B, max(_PIPELINE_MIN_B, -(-n // 4 // PAGE_B) * PAGE_B))

    def check_buffer(self, buf: Buffer, op: str, what: str) -> None:
        """Raises HCQMemoryError naming `op`'s argument `what` unless `buf` is a live buffer of
        this device."""
        if not isinstance(buf, Buffer):
            raise HCQMemoryError(f"{op}: {what} must be a Buffer of {self.name}, got "
                                 f"{type(buf).__name__}")
        if buf.device is not self:
            raise HCQMemoryError(
                f"{op}: {what} {buf!r} belongs to {buf.device.name}, not {self.name} (map it here "
                f"with {self.name}.map_peer, or copy it with runtime.hcq.transfer)")
        if buf.freed or (buf.base is not None and buf.base.freed):
            raise HCQMemoryError(f"{op}: {what} {buf!r} was freed")

    def check_range(self, buf: Buffer, offset: int, size: int, op: str = "copy",
                     what: str = "buffer") -> None:
        """Refuses (HCQError naming `op` and `what`) a byte range that is not `size` bytes at
        `offset` within the live buffer `buf` of this usable device."""
        self.check_usable()
        self.check_buffer(buf, op, what)
        for name, x in (("offset", offset), ("size", size)):
            if type(x) is not int:
                try:
                    operator.index(x)
                except TypeError:
                    raise HCQMemoryError(f"{op}: {what} {name} must be an integer, got "
                                         f"{type(x).__name__} {x!r}") from None
        if offset < 0 or size < 0 or offset + size > buf.size:
            raise HCQMemoryError(f"{op}: range [{offset:#x}, +{size:#x}) of {what} is outside "
                                 f"{buf!r}")

    # ------------------------------------------------------------------ other devices
    def peer_access(self, other: "Device") -> str | None:
        """None when this device can map `other`'s VRAM (direct peer access), else the reason
        why not. Host memory (GTT, HOST) of any device of the same kernel is always mappable."""
        if other is self:
            return None
        if other.os.kernel is not self.os.kernel:
            return f"{other.name} and {self.name} are not GPUs of one kernel (process and machine)"
        if type(other) is not type(self):
            return f"{other.name} and {self.name} have different drivers"
        return self._peer_access(other)

    def map_peer(self, buf: Buffer) -> Buffer:
        """`buf` of another device, mapped into this device's address space: a buffer of this
        device (`peer_of` is `buf`) that kernels, copies and queue waits here may use. VRAM needs
        `peer_access(buf.device)`; host memory only one kernel. Mappings are made once per buffer
        and kept until `unmap_peer`, until either buffer's device frees it, or until close."""
        self.check_usable()
        buf._check_live()
        if buf.device is self:
            return buf
        base = buf.base or buf
        if base.peer_of is not None:
            raise HCQMemoryError(f"{buf!r} is itself a peer mapping on {base.device.name}: map "
                                 f"{base.peer_of!r} instead")
        with self._submit:
            return self._map_peer_locked(buf, base)

    def _map_peer_locked(self, buf: Buffer, base: Buffer) -> Buffer:
        mapping = self._peer_maps.get(id(base))
        if mapping is None:
            other = base.device
            if other.os.kernel is not self.os.kernel:
                reason = self.peer_access(other)
            elif base.spec.kind is MemKind.VRAM:
                reason = self.peer_access(other)
            else:
                reason = None
            if reason is not None:
                raise HCQMemoryError(f"{self.name} cannot map {buf!r}: {reason}")
            mapping = self._map_peer(base)
            mapping.peer_of = base
            self._peer_maps[id(base)] = mapping
            if base.mappings is None:
                base.mappings = []
            base.mappings.append(mapping)
        if buf is base:
            return mapping
        return mapping.slice(buf.va - base.va, buf.size)

    def unmap_peer(self, mapping: Buffer) -> None:
        """Removes a mapping made by `map_peer` (the other device's buffer stays)."""
        base = mapping.base or mapping
        owner = base.peer_of
        if owner is None or self._peer_maps.get(id(owner)) is not base:
            raise HCQError(f"{mapping!r} is not a peer mapping of {self.name}")
        del self._peer_maps[id(owner)]
        if owner.mappings is not None:
            owner.mappings.remove(base)
        base.freed = True
        self._unmap_peer(base)

    def map_signal(self, sig: "Signal") -> "Signal":
        """A view of another device's signal that this device's queues may wait on and signal
        (the same 16 bytes, mapped here). The view is not returned to any pool."""
        if sig.device is self:
            return sig
        return Signal(self, self.map_peer(sig.buf))

    def _peer_access(self, other: "Device") -> str | None:
        """Driver hook: None when this GPU can map `other`'s VRAM (same driver, same kernel)."""
        return f"{type(self).__name__} does not implement peer access"

    def _map_peer(self, buf: Buffer) -> Buffer:
        """Driver hook: maps another device's whole buffer here; returns a `Buffer` of this
        device at the address it got."""
        raise HCQMemoryError(f"{type(self).__name__} cannot map other devices' memory")

    def _unmap_peer(self, mapping: Buffer) -> None:
        """Driver hook: undoes `_map_peer`."""
        raise NotImplementedError(f"{type(self).__name__} must implement _unmap_peer")

    def _release_peer_maps(self) -> None:
        """Unmaps every peer mapping made here (at close, before the hardware goes)."""
        for mapping in reversed(list(self._peer_maps.values())):
            try:
                self.unmap_peer(mapping)
            except HCQError:
                pass  # the device is being torn down; the kernel frees what is left with it

    # ------------------------------------------------------------------ faults and state
    def check_usable(self) -> None:
        """Raises if the device was closed, has faulted (a fresh DeviceFault each time, caused by
        the first) or was inherited through fork (DeviceForked)."""
        if self._fault is not None:
            raise self._fault.again()
        if self.closed:
            if self._forked:
                self._check_process()
            raise DeviceClosed(f"{self.name} is closed")

    def _check_process(self) -> None:
        if self._forked:
            raise DeviceForked(f"{self.name} was opened by the parent process and inherited "
                               "through fork(); its queues and memory are the parent's. Open a "
                               "device of its own in this process (open_device)")

    def _mark_forked(self) -> None:
        """In a forked child: the device refuses every use, and close() releases nothing (the
        kernel objects are the parent's)."""
        self._forked = True
        self._submit = SubmitLock()  # the parent's lock may have been held by another thread
        self._copy_lock = threading.Lock()
        self.closed = True
        self._release_lease = None

    @property
    def fault(self) -> DeviceFault | None:
        """The fault the device remembers (every later call refuses with it), or None."""
        return self._fault

    def check_fault(self) -> None:
        """Asks the driver whether the GPU reported a fault; raises (and remembers) it if so."""
        if self._fault is None and not self.closed:
            fault = self._poll_fault()
            if fault is not None:
                self._fault = fault
                raise fault
        self.check_usable()

    def note_submit_error(self, e: BaseException) -> None:
        """Called by a submission route that raised `e` while publishing: a DeviceFault noticed
        then becomes the device's fault, so every later call refuses with it."""
        if isinstance(e, DeviceFault) and self._fault is None:
            self._fault = e

    def watch_gate(self, key: object, what: str, sig: Signal, want: int) -> None:
        """Names a wait on `sig` reaching `want` (`what`, e.g. a graph's GraphWait) so that a
        timeout report says which gate never opened; replaces the entry under `key`."""
        self._gates[key] = (what, sig, want)

    @property
    def submit_lock(self) -> SubmitLock:
        """The lock every submission is built and published under (`SubmitLock`)."""
        return self._submit

    def describe_state(self) -> str:
        """Human-readable state for timeout and fault reports."""
        if self.closed:
            raise DeviceClosed(f"{self.name} is closed")
        try:
            done = self.timeline_signal.value
        except ValueError:
            done = -1
        lines = [f"{self.name}: timeline completed {done} of {self.timeline_value} submitted"]
        for key, (what, sig, want) in list(self._gates.items()):
            try:
                got = sig._u64[0]
            except ValueError:
                continue
            if got >= want:
                self._gates.pop(key, None)
            else:
                lines.append(f"  waiting for {what}: {sig!r} must reach {want} (it is {got}; "
                             "nothing has set it yet)")
        lines += ["  " + ln for ln in self._describe_queues()]
        return "\n".join(lines)

    # ------------------------------------------------------------------ driver hooks
    def _poll_fault(self) -> DeviceFault | None:
        """Driver hook: a fault the hardware reported since the last call, or None."""
        return None

    def _describe_queues(self) -> list[str]:
        """Driver hook: one line per hardware queue (pointers, what it is blocked on)."""
        return []

    def after_wait_timeout(self) -> str:
        """Driver hook, called when a signal wait gives up: the driver may recover queues stuck
        on work that nothing can finish (a kernel that never ends) so that the device stays
        usable; returns what it did, for the SignalTimeout message ("" for nothing)."""
        return ""

    def sleep_for_signal(self, sig: Signal, value: int, timeout_ms: float) -> None:
        """Driver hook: sleep until the GPU may have updated `sig` (an interrupt) or
        `timeout_ms`."""
        raise NotImplementedError(f"{type(self).__name__} must implement sleep_for_signal")

    def _release_hw(self) -> None:
        """Driver hook: destroy queues and events, free all memory, close descriptors, in that
        order."""
        raise NotImplementedError(f"{type(self).__name__} must implement _release_hw")

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Waits for outstanding work (unless the device faulted) and releases every kernel object
        the device made: queues, events, memory mappings and allocations, file descriptors."""
        if self.closed:
            return
        _open_devices.discard(self)
        if self.tracer is not None:
            profiler.detach(self)
        try:
            if self._fault is None:
                try:
                    self.synchronize(timeout_ms=min(self.default_timeout_ms, 10_000.0))
                except HCQError:
                    pass  # a hung or faulted device is still torn down; its error was reported
        finally:
            self._staging.clear()
            self._arena = None
            for s in self._streams:  # their hardware queues go with the driver's teardown
                s.closed = True
            self._streams.clear()
            self._signal_pools.clear()
            try:
                self._release_peer_maps()
                if hasattr(self, "allocator"):
                    self.allocator.cache_limit_B = 0  # frees now release; the driver drains
                self._release_hw()
            finally:
                self.closed = True
                self._give_back_lease()

    def _give_back_lease(self) -> None:
        """Gives back what the device was opened on (called by close and by a failed open)."""
        release, self._release_lease = self._release_lease, None
        if release is not None:
            release()

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.arch})"


def _host_bytes(obj: Any, op: str, what: str, writable: bool) -> memoryview:
    """`obj` as a flat byte view; HCQMemoryError naming `op`'s argument `what` when it is not a
    C-contiguous buffer (a strided numpy view, say) or, for a destination, not writable."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise HCQMemoryError(f"{op}: {what} must support the buffer protocol (bytes, bytearray, "
                             f"numpy array), got {type(obj).__name__}") from None
    if not mv.c_contiguous:
        raise HCQMemoryError(f"{op}: {what} is not C-contiguous (a strided or transposed view); "
                             "pass numpy.ascontiguousarray(...) or copy it first")
    if writable and mv.readonly:
        raise HCQMemoryError(f"{op}: {what} is read-only")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


class PendingCopy:
    """A copy toward host memory in flight (`Device.copyout_async`): `wait()` fills the
    destination, `done()` says whether the GPU has finished.

    Lifetime: the source buffer must stay allocated until the GPU has copied it. If it is freed
    before that, `wait()` refuses with an HCQError naming the copy and the buffer (its memory may
    already hold a later allocation's bytes) instead of handing back what it read. A copy
    dropped before its `wait()` completed (a Ctrl-C ended the wait, say) gives its pinned memory
    back once the GPU has written it (`Device.free_when_done`)."""

    def __init__(self, device: Device, dst: memoryview, pinned: Buffer, value: int,
                 src: Buffer | None = None) -> None:
        self.device, self._dst, self._pinned, self.value = device, dst, pinned, value
        self._src = src
        self._freed_early: str | None = None  # repr of the source freed while in flight
        self._finished = False
        self._lock = threading.Lock()

    def _source_freed(self, buf: Buffer) -> None:
        """Called (under the device's submission lock) when `buf` is freed: noted if it is this
        copy's source (or the buffer its source slices) and the GPU has not copied it yet."""
        src = self._src
        if src is None or (src is not buf and src.base is not buf):
            return
        if self.device.timeline_signal.value < self.value:
            self._freed_early = repr(src)
        self.device._pending_copies.discard(self)

    def done(self) -> bool:
        """True once the GPU part is complete (`wait()` then does not block)."""
        return self._finished or self.device.timeline_signal.value >= self.value

    def wait(self, timeout_ms: float | None = None) -> None:
        """Blocks until the destination holds the data (idempotent; safe to call again after an
        interrupted wait)."""
        if self._finished:
            self._check_source()
            return
        self.device.timeline_signal.wait(self.value, timeout_ms)
        with self._lock:
            if self._finished:
                self._check_source()
                return
            if len(self._dst) and self._freed_early is None:
                self.device._host_copy(self._dst, self._pinned.cpu_view())
            # Finished and the pinned memory given back as one step (a Ctrl-C is held back
            # meanwhile): an interrupt between the two would leak the pinned buffer.
            with self.device.submit_lock:
                self._finished = True
                self.device._pending_copies.discard(self)
                self.device.free(self._pinned)  # back to the pool for the next copy
        self._check_source()

    def __del__(self) -> None:
        if not self._finished:  # dropped before wait() completed
            self.device.free_when_done(self._pinned, self.value)

    def _check_source(self) -> None:
        if self._freed_early is not None:
            raise HCQMemoryError(
                f"{self!r}: its source {self._freed_early} was freed before the copy finished; "
                "the memory may already hold another allocation's bytes, so the destination was "
                "not filled (free a buffer only after wait() on the copies that read it)")

    def __repr__(self) -> str:
        return f"PendingCopy({self.device.name}, {len(self._dst)} B, timeline value {self.value})"
