"""MockOS: the OS seam over virtual devices, for running the whole runtime on a CPU.

A `MockOS` instance is a small, self-contained "kernel": a table of open files, a virtual address
space for mmap, a sysfs tree, a kernel log, and the virtual device drivers installed into it (the
mock KFD: `runtime.drivers.mock.amd_kfd`). Nothing is global; each instance is independent, and a
driver is handed one through its constructor (`AMDDevice("mock-amd:0")` makes its own).

Memory: anonymous and device mappings are numpy byte arrays, and a mapping's `view` is a memoryview
of the same array the mock GPU reads and writes, so CPU stores are immediately visible to the GPU
(as with coherent memory). Doorbell pages get a doorbell object whose `ring` stores the value and
synchronously runs the mock GPU's queues, so tests are deterministic.

For tests: `inject_ioctl_failure` makes chosen ioctls fail with an errno, and `live_objects` counts
the kernel objects a process holds (open files, mappings and whatever the drivers report).
"""
from __future__ import annotations

import ctypes
import errno as E
import functools
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, TypeVar

import numpy as np

from runtime.drivers.mock.host_races import HostRaces
from runtime.hcq.seam import (MAP_ANONYMOUS, MAP_FIXED, PROT_NONE, Doorbell, HostMapping,
                              MappedDoorbell, OSSeam)

# The mock's user address space starts well away from the real process's mappings so that a stray
# real pointer never aliases a mock address. Allocations are separated by an unmapped guard page.
VA_BASE = 0x1000_0000_0000
VA_LIMIT = 0x7F00_0000_0000
_PAGE = 4096
_GUARD = _PAGE


def _ioc_size(req: int) -> int:
    """_IOC_SIZE of a Linux ioctl request number (asm-generic/ioctl.h: 14 bits at 16)."""
    return (req >> 16) & 0x3FFF


class DoorbellTarget(Protocol):
    """Something a doorbell store wakes (the mock GPU)."""

    def doorbell_rung(self, offset: int, value: int) -> None: ...


class MockFile:
    """An open virtual file. Subclasses override what their device supports."""

    path = "?"

    def ioctl(self, request: int, arg: Any) -> int:
        raise OSError(E.ENOTTY, f"{self.path}: inappropriate ioctl {request:#x}")

    def mmap(self, offset: int, size: int, prot: int) -> tuple[np.ndarray, DoorbellTarget | None]:
        """(backing bytes, doorbell target or None) for a mapping at `offset`."""
        raise OSError(E.ENODEV, f"{self.path} cannot be mapped")

    # A file without read/write operations answers EINVAL, as the kernel's vfs_read/vfs_write do.
    def pread(self, offset: int, size: int) -> bytes:
        """Up to `size` bytes at `offset`."""
        raise OSError(E.EINVAL, f"{self.path} cannot be read")

    def pwrite(self, offset: int, data: bytes) -> int:
        """Writes `data` at `offset`; returns the count written."""
        raise OSError(E.EINVAL, f"{self.path} cannot be written")

    def read(self, size: int) -> bytes:
        """Reads at the file position (files without a position read at offset 0)."""
        return self.pread(0, size)

    def write(self, data: bytes) -> int:
        """Writes at the file position (files without a position write at offset 0)."""
        return self.pwrite(0, data)

    def close(self) -> None:
        """Called when the last descriptor is closed."""


@dataclass
class _Region:
    addr: int
    size: int
    backing: np.ndarray | None  # None: PROT_NONE reservation
    kind: str                   # "reserve", "anon", "device"
    doorbell: DoorbellTarget | None = None


@dataclass
class _Injection:
    request: int
    errno: int
    remaining: int
    skip: int


_HOST_POLL_S = 0.0002  # a host waiting for a mock GPU's thread checks this often


class MockDoorbell(Doorbell):
    """A doorbell store that also runs the mock GPU synchronously."""

    __slots__ = ("_plain", "_target", "_offset")

    def __init__(self, mapping: HostMapping, offset: int, width: int,
                 target: DoorbellTarget) -> None:
        self._plain = MappedDoorbell(mapping, offset, width)
        self._target, self._offset = target, mapping.offset + offset

    def ring(self, value: int) -> None:
        self._plain.ring(value)
        self._target.doorbell_rung(self._offset, value)


_RING_CODE = MockDoorbell.ring.__code__


_F = TypeVar("_F", bound=Callable[..., Any])


def host_entry(fn: _F) -> _F:
    """Counts a host thread in `MockOS.host_entries` while it is inside this entry point of the
    mock kernel (waiting for its lock, or holding it)."""
    @functools.wraps(fn)
    def entered(self: "MockOS", *args: Any, **kwargs: Any) -> Any:
        entries = self.host_entries
        try:
            entries.append(None)
            return fn(self, *args, **kwargs)
        finally:
            if entries:  # (a Ctrl-C can strike before the append)
                entries.pop()
    return entered  # type: ignore[return-value]


@dataclass
class MockOS(OSSeam):
    """The mock kernel. Build one with `MockOS.with_amd_gpus(n)` or install drivers yourself."""

    name: str = "mock"
    gpus_in_process = True  # (OSSeam) the mock GPUs run on threads of this process
    sysfs: dict[str, str] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._devices: dict[str, Callable[[int], MockFile]] = {}
        self._fds: dict[int, MockFile] = {}
        self._next_fd = 3
        self._regions: dict[int, _Region] = {}
        self._va_next = VA_BASE
        self._injections: list[_Injection] = []
        self._counters: list[Callable[[], dict[str, int]]] = []
        self._request_names: dict[int, str] = {}
        self._status: dict[str, str] = {}
        self._executes: dict[str, bool] = {}  # device node -> its GPU executes kernels
        self.ioctl_count = 0
        # One lock around every entry: a second CPU thread may poll while another submits.
        self.lock = threading.RLock()
        # One entry per host thread inside an entry point (waiting for `lock` or holding it): a
        # GPU thread running a long dispatch lets them in before its next slice (EngineThread);
        # otherwise it takes the lock back the moment it releases it, before a woken waiter runs.
        self.host_entries: list[None] = []
        self.drivers: list[Any] = []
        #: host writes racing the machine's kernels (runtime/drivers/mock/host_races.py)
        self.host_races = HostRaces()
        # host threads sleeping until a GPU makes progress (`sleep_for_gpu`), each on its own lock
        self._gpu_waiters: set[threading.Lock] = set()

    # ------------------------------------------------------------------ construction
    @classmethod
    def with_amd_gpus(cls, count: int = 1, **gpu_kwargs: Any) -> "MockOS":
        """A mock machine with `count` AMD GPUs behind a mock KFD: gfx1100 unless `archs` names
        the processor of each (`archs=("gfx1100", "gfx942")`) or one for all (`archs="gfx942"`);
        amd_kfd.PARTS lists them."""
        from runtime.drivers.mock.amd_kfd import MockKfdDriver
        mos = cls()
        mos.drivers.append(MockKfdDriver(mos, count, **gpu_kwargs))
        return mos

    def add_device(self, path: str, opener: Callable[[int], MockFile]) -> None:
        """Registers a device node; `opener(flags)` returns the file object."""
        self._devices[path] = opener

    def set_executes_kernels(self, device_path: str, executes: bool) -> None:
        """Tells the machine whether the GPU behind `device_path` executes kernel code."""
        self._executes[device_path] = executes

    def gpu_executes_kernels(self, device_path: str) -> bool:
        return self._executes.get(device_path, self.executes_kernels)

    def add_counter(self, counter: Callable[[], dict[str, int]]) -> None:
        """Registers a function contributing to `live_objects`."""
        self._counters.append(counter)

    def name_requests(self, names: dict[int, str]) -> None:
        """Tells the mock the C names of ioctl requests (for injection by name and messages)."""
        self._request_names.update(names)

    def file(self, fd: int) -> MockFile:
        """The file object behind a descriptor (EBADF if none)."""
        f = self._fds.get(fd)
        if f is None:
            raise OSError(E.EBADF, f"bad file descriptor {fd}")
        return f

    # ------------------------------------------------------------------ test controls
    def inject_ioctl_failure(self, request: int | str, errno: int, count: int = 1,
                             skip: int = 0) -> None:
        """Makes the next `count` calls of `request` (a request number or its C name) fail with
        `errno`, after letting `skip` calls through."""
        if isinstance(request, str):
            by_name = {v: k for k, v in self._request_names.items()}
            if request not in by_name:
                raise KeyError(f"unknown ioctl {request!r}")
            request = by_name[request]
        self._injections.append(_Injection(int(request), errno, count, skip))

    def sleep_for_gpu(self, timeout_s: float, ready: Callable[[], bool] | None = None) -> None:
        """Sleeps until a GPU of this machine makes progress, `ready()` holds, or `timeout_s`
        passes: how a driver without interrupts waits for the mock without spinning, since a
        spinning host would hold the GIL the GPUs' threads need. The wake-up is the GPUs' own
        (`wake_waiters`, after each pass that changed something), so a completion is seen as soon
        as the GPU's thread lets go of the GIL, not at the next poll. Without `ready` it sleeps
        at most a fraction of a millisecond. The waiter blocks on a lock of its own, so a Ctrl-C
        that strikes meanwhile leaves no shared lock held."""
        if ready is None:
            time.sleep(min(timeout_s, _HOST_POLL_S))
            return
        if ready():
            return
        if self.run_gpus_here() and ready():
            return
        me = threading.Lock()
        me.acquire()
        waiters = self._gpu_waiters
        waiters.add(me)  # before the check: progress made after it releases `me`
        try:
            if not ready():
                me.acquire(True, max(timeout_s, 0.0))
        finally:
            waiters.discard(me)

    def run_gpus_here(self) -> bool:
        """(OSSeam) Runs, on the calling thread, the pass each asynchronous GPU of the machine
        was kicked for and has not started (a doorbell rung since its last pass): a host about
        to wait does the GPU's work itself, which saves handing the GIL to the GPU's thread and
        back. Doorbells still return at once and signals still change only when the work is
        done; only which thread runs the pass differs. Skipped when a GPU's thread holds the
        lock (it is running a pass). Returns whether any pass made progress."""
        lock = self.lock
        if not lock.acquire(False):
            return False
        # The lock is owned from here on, so a Ctrl-C is held back until the passes are done
        # (`busy_here`), as during any call into the mock kernel.
        try:
            progress = False
            for d in self.drivers:
                for g in getattr(d, "gpus", ()):
                    engine = getattr(g, "engine", None)
                    if engine is not None and not g.sync and engine.run_kicked_here():
                        progress = True
            return progress
        finally:
            lock.release()

    def sleep_inside_call(self, timeout_s: float, ready: Callable[[], bool]) -> None:
        """`sleep_for_gpu` from inside an entry point that holds the lock once (a blocking
        ioctl): lets go of the lock and of this thread's entry meanwhile, so the GPUs run, and
        takes both back even when a Ctrl-C strikes (the KeyboardInterrupt is then raised with
        the lock held, so the call's `with` block releases it exactly once)."""
        entries = self.host_entries
        self.lock.release()
        if entries:
            entries.pop()
        try:
            self.sleep_for_gpu(timeout_s, ready)
        finally:
            entries.append(None)
            acquire_uninterrupted(self.lock)

    def wake_waiters(self) -> None:
        """Wakes every host thread in `sleep_for_gpu` (a GPU of this machine changed memory,
        queue state or events). Cheap when nobody waits; callable with or without the mock
        kernel's lock."""
        if self._gpu_waiters:
            for w in list(self._gpu_waiters):
                try:
                    w.release()
                except RuntimeError:
                    pass  # woken already

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Blocks until every GPU of the machine has run what can run now (a test's way to let
        the asynchronous GPUs catch up with work submitted outside any timeline)."""
        gpus = [g for d in self.drivers for g in getattr(d, "gpus", ())]
        deadline = time.perf_counter() + timeout_s
        while True:
            self.run_gpus_here()  # what the doorbells asked for, at once
            with self.lock:
                if all(g.idle() for g in gpus if hasattr(g, "idle")):
                    return
            if time.perf_counter() > deadline:
                raise TimeoutError(f"the mock GPUs did not become idle in {timeout_s} s")
            time.sleep(0.0005)

    def live_objects(self) -> dict[str, int]:
        """Kernel objects held: open files, mappings, and each driver's objects (buffers,
        queues...)."""
        out = {"fds": len(self._fds), "mappings": len(self._regions)}
        for c in self._counters:
            out.update(c())
        return out

    def log_kernel(self, line: str) -> None:
        """Appends a line to the mock kernel log."""
        self.log.append(line)

    def set_kernel_status(self, key: str, line: str) -> None:
        """A standing report (a queue busy with a long dispatch), shown after the kernel log's
        lines until cleared; setting it again replaces it."""
        self._status[key] = line

    def clear_kernel_status(self, key: str) -> None:
        self._status.pop(key, None)

    # ------------------------------------------------------------------ OSSeam
    @host_entry
    def open(self, path: str, flags: int = os.O_RDWR) -> int:
        with self.lock:
            opener = self._devices.get(path)
            if opener is None:
                if path in self.sysfs:
                    raise OSError(E.EPERM, f"{path}: sysfs files are read with read_sysfs")
                raise FileNotFoundError(E.ENOENT, f"No such file or directory: {path!r}")
            fd = self._next_fd
            self._next_fd += 1
            self._fds[fd] = opener(flags)
            return fd

    @host_entry
    def close(self, fd: int) -> None:
        with self.lock:
            f = self.file(fd)
            del self._fds[fd]
            f.close()

    def busy_here(self) -> bool:
        """Whether this thread is inside the mock kernel (holds its lock) or inside a mock
        doorbell store: on hardware that is one store instruction, so a Ctrl-C never lands in
        the middle of it and leaves a submission published without its doorbell. (The native
        launch calls the mock's doorbell from C, outside the device's submission lock.)"""
        if self.lock._is_owned():  # type: ignore[attr-defined]
            return True
        f = sys._getframe(1)
        while f is not None:
            if f.f_code is _RING_CODE:
                return True
            f = f.f_back  # type: ignore[assignment]
        return False

    def ioctl(self, fd: int, request: int,
              arg: ctypes.Structure | ctypes.Array | int | None) -> int:
        # A Ctrl-C during the call is held back until it returns (runtime.hcq.device._on_sigint).
        return self._ioctl(fd, request, arg)

    @host_entry
    def _ioctl(self, fd: int, request: int,
               arg: ctypes.Structure | ctypes.Array | int | None) -> int:
        with self.lock:
            self.ioctl_count += 1
            f = self.file(fd)
            req = int(request)
            self._fail_if_injected(req)
            # _IO requests (size 0) pass a value, or a pointer the driver sizes (VFIO's argsz).
            if (arg is not None and not isinstance(arg, int) and _ioc_size(req)
                    and ctypes.sizeof(arg) != _ioc_size(req)):
                raise OSError(E.EINVAL, f"ioctl {req:#x}: argument is {ctypes.sizeof(arg)} B, "
                                        f"the request encodes {_ioc_size(req)} B")
            return f.ioctl(req, arg)

    def _fail_if_injected(self, req: int) -> None:
        """Raises the injected failure of request `req` when one is due (under the lock)."""
        for inj in self._injections:
            if inj.request == req and inj.remaining:
                if inj.skip:
                    inj.skip -= 1
                    continue
                inj.remaining -= 1
                name = self._request_names.get(req, hex(req))
                self.log_kernel(f"mock: injected failure of {name}: errno {inj.errno}")
                raise OSError(inj.errno, os.strerror(inj.errno))

    @host_entry
    def mmap(self, addr: int | None, size: int, prot: int, flags: int, fd: int = -1,
             offset: int = 0) -> HostMapping:
        with self.lock:
            if size <= 0:
                raise OSError(E.EINVAL, "mmap of zero bytes")
            size_pages = -(-size // _PAGE) * _PAGE
            target: DoorbellTarget | None = None
            if fd == -1 or flags & MAP_ANONYMOUS:
                backing = None if prot == PROT_NONE else np.zeros(size_pages, dtype=np.uint8)
                kind = "reserve" if backing is None else "anon"
            else:
                backing, target = self.file(fd).mmap(offset, size, prot)
                kind = "device"
            if flags & MAP_FIXED:
                if addr is None:
                    raise OSError(E.EINVAL, "MAP_FIXED without an address")
                self._unmap_range(addr, size_pages)
            else:
                addr = self._take_va(size_pages)
            region = _Region(addr, size_pages, backing, kind, target)
            self._regions[addr] = region
            view = memoryview(backing)[:size] if backing is not None else None  # type: ignore[arg-type]
            return HostMapping(addr, size, view, fd, offset, keepalive=region)

    @host_entry
    def munmap(self, mapping: HostMapping) -> None:
        with self.lock:
            region = self._regions.get(mapping.addr)
            if region is None:
                raise OSError(E.EINVAL, f"munmap at {mapping.addr:#x}: nothing mapped there")
            del self._regions[mapping.addr]
        if mapping.view is not None:
            # as RealOS does: a view still exported (a live memoryview of it handed to C, say)
            # makes this raise BufferError, which is the bug to report
            mapping.view.release()

    @host_entry
    def pread(self, fd: int, size: int, offset: int) -> bytes:
        with self.lock:
            if size < 0 or offset < 0:
                raise OSError(E.EINVAL, f"pread of {size} B at {offset}")
            return bytes(self.file(fd).pread(offset, size))

    @host_entry
    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        with self.lock:
            if offset < 0:
                raise OSError(E.EINVAL, f"pwrite at {offset}")
            return self.file(fd).pwrite(offset, bytes(data))

    @host_entry
    def read(self, fd: int, size: int) -> bytes:
        with self.lock:
            return bytes(self.file(fd).read(size))

    @host_entry
    def write(self, fd: int, data: bytes) -> int:
        with self.lock:
            return self.file(fd).write(bytes(data))

    def read_sysfs(self, path: str) -> str:
        text = self.sysfs.get(path.rstrip("/"))
        if text is None:
            if self._is_dir(path):
                raise IsADirectoryError(E.EISDIR, f"Is a directory: {path!r}")
            raise FileNotFoundError(E.ENOENT, f"No such file or directory: {path!r}")
        return text

    def listdir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {k[len(prefix):].split("/", 1)[0] for k in (*self.sysfs, *self._devices)
                 if k.startswith(prefix)}
        if not names:
            raise FileNotFoundError(E.ENOENT, f"No such file or directory: {path!r}")
        return sorted(names)

    def exists(self, path: str) -> bool:
        return path in self._devices or path.rstrip("/") in self.sysfs or self._is_dir(path)

    def eventfd(self, initval: int = 0, flags: int = 0) -> int:
        return self.install(EventFd(initval, flags))

    @host_entry
    def install(self, f: MockFile) -> int:
        """Gives an already-open file a descriptor (the kernel's anon_inode_getfd: how ioctls such
        as VFIO_GROUP_GET_DEVICE_FD hand out new files)."""
        with self.lock:
            fd = self._next_fd
            self._next_fd += 1
            self._fds[fd] = f
            return fd

    def doorbell(self, mapping: HostMapping, offset: int, width: int = 8) -> Doorbell:
        region = mapping.keepalive
        if isinstance(region, _Region) and region.doorbell is not None:
            return MockDoorbell(mapping, offset, width, _Locked(region.doorbell, self.lock))
        return MappedDoorbell(mapping, offset, width)

    def kernel_log(self) -> list[str]:
        return list(self.log[-50:]) + list(self._status.values())

    # ------------------------------------------------------------------ address space
    def host_region(self, addr: int, size: int) -> np.ndarray:
        """The backing bytes of [addr, addr+size) of an anonymous read-write mapping (userptr)."""
        for r in self._regions.values():
            if r.kind == "anon" and r.addr <= addr and addr + size <= r.addr + r.size:
                assert r.backing is not None
                return r.backing[addr - r.addr:addr - r.addr + size]
        raise OSError(E.EFAULT, f"[{addr:#x}, +{size:#x}) is not anonymous user memory")

    def _take_va(self, size: int) -> int:
        addr = self._va_next
        if addr + size > VA_LIMIT:
            raise OSError(E.ENOMEM, "mock address space exhausted")
        self._va_next = addr + size + _GUARD
        return addr

    def _unmap_range(self, addr: int, size: int) -> None:
        """MAP_FIXED replaces what was there; the mock only allows replacing one whole region."""
        for base, r in list(self._regions.items()):
            if base < addr + size and addr < base + r.size:
                if base != addr or r.size != size:
                    raise OSError(E.EINVAL, f"MAP_FIXED [{addr:#x}, +{size:#x}) partially overlaps "
                                            f"the mapping at {base:#x}+{r.size:#x}")
                del self._regions[base]

    def _is_dir(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return any(k.startswith(prefix) for k in self.sysfs)


class EventFd(MockFile):
    """An eventfd (fs/eventfd.c): a 64-bit counter that writes and `signal` add to and a read
    returns and clears (or decrements by one with EFD_SEMAPHORE). Nothing in the mock can block, so
    a read of a zero counter fails with EAGAIN, as with EFD_NONBLOCK."""

    path = "anon_inode:[eventfd]"
    _MAX = (1 << 64) - 2  # ULLONG_MAX - 1: the largest value the counter may hold

    def __init__(self, value: int, flags: int = 0) -> None:
        self.value = value
        self.flags = flags

    def signal(self, n: int = 1) -> None:
        """What a kernel producer (an interrupt handler) does: eventfd_signal."""
        self.value = min(self.value + n, self._MAX)

    def read(self, size: int) -> bytes:
        if size < 8:
            raise OSError(E.EINVAL, "eventfd read needs 8 bytes")
        if self.value == 0:
            raise BlockingIOError(E.EAGAIN, "eventfd counter is zero")
        if self.flags & os.EFD_SEMAPHORE:
            got, self.value = 1, self.value - 1
        else:
            got, self.value = self.value, 0
        return got.to_bytes(8, "little")

    def write(self, data: bytes) -> int:
        if len(data) < 8:
            raise OSError(E.EINVAL, "eventfd write needs 8 bytes")
        n = int.from_bytes(data[:8], "little")
        if n == (1 << 64) - 1 or self.value + n > self._MAX:
            raise OSError(E.EAGAIN if n != (1 << 64) - 1 else E.EINVAL, "eventfd overflow")
        self.value += n
        return 8


_EventFd = EventFd  # the name this class had first


def acquire_uninterrupted(lock: Any) -> None:
    """Takes `lock` (an RLock released for a while inside a mock kernel call) even when a
    Ctrl-C strikes meanwhile, then raises that KeyboardInterrupt with the lock held, so the
    call's `with` block releases it exactly once."""
    interrupted = False
    while True:
        try:
            lock.acquire()
            break
        except KeyboardInterrupt:
            interrupted = True
            if lock._is_owned():
                break
    if interrupted:
        raise KeyboardInterrupt


class _Locked:
    """Runs a doorbell target under the mock's lock."""

    def __init__(self, target: DoorbellTarget, lock: threading.RLock) -> None:
        self._target, self._lock = target, lock

    def doorbell_rung(self, offset: int, value: int) -> None:
        if getattr(self._target, "async_doorbell", False):
            # The GPU runs on its own thread: the store only wakes it, and must not wait for
            # the lock that thread holds while it executes.
            self._target.doorbell_rung(offset, value)
            return
        with self._lock:
            self._target.doorbell_rung(offset, value)
