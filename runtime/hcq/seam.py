"""The one OS seam: every open/ioctl/mmap/munmap/sysfs read/eventfd of the runtime goes through an
`OSSeam`.

Drivers receive a seam object in their constructor and never touch `os`, `fcntl` or `mmap`
themselves, so a mock can stand in for the kernel without patching anything global (tinygrad swaps
its file interface by environment variable; we pass the seam instead).
`RealOS` talks to Linux; `runtime.drivers.mock.os.MockOS` implements the same contract over virtual
devices.

Doorbell (and other MMIO) stores also go through a small object from the seam: on real hardware a
store into the mapped page is all it takes; the mock's doorbell additionally wakes its GPU's queue
processor.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import mmap as _mmap
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

# Linux mmap constants (uapi asm-generic/mman-common.h); Python's mmap module lacks
# MAP_FIXED/PROT_NONE.
PROT_NONE = 0
PROT_READ = _mmap.PROT_READ
PROT_WRITE = _mmap.PROT_WRITE
PROT_EXEC = _mmap.PROT_EXEC
MAP_SHARED = _mmap.MAP_SHARED
MAP_PRIVATE = _mmap.MAP_PRIVATE
MAP_ANONYMOUS = _mmap.MAP_ANONYMOUS
MAP_FIXED = 0x10
MAP_NORESERVE = 0x4000


@dataclass(eq=False)
class HostMapping:
    """A CPU mapping made through the seam.

    `addr` is the CPU virtual address (for the mock, an address in the mock's own address space;
    with KFD the GPU uses the same address). `view` is a writable byte memoryview of the mapped
    bytes, or None for a PROT_NONE reservation.
    """

    addr: int
    size: int
    view: memoryview | None
    fd: int = -1
    offset: int = 0
    keepalive: Any = field(default=None, repr=False)  # object that owns the memory behind `view`


class Doorbell(ABC):
    """A doorbell (or any MMIO register) the CPU rings by storing a value."""

    @abstractmethod
    def ring(self, value: int) -> None:
        """Stores `value` (the queue's new write pointer) into the doorbell."""


class MappedDoorbell(Doorbell):
    """A doorbell that is a plain store of `width` bytes into a mapped page (real hardware)."""

    __slots__ = ("_view", "_index", "width")

    def __init__(self, mapping: HostMapping, offset: int, width: int = 8) -> None:
        if mapping.view is None:
            raise ValueError("doorbell mapping has no CPU view")
        if width not in (4, 8) or offset % width:
            raise ValueError(f"doorbell at {offset:#x}: width {width} must be 4 or 8 and "
                             "divide the offset")
        self._view = mapping.view.cast("Q" if width == 8 else "I")
        self._index = offset // width
        self.width = width

    def ring(self, value: int) -> None:
        self._view[self._index] = value & ((1 << (8 * self.width)) - 1)

    def store_target(self) -> tuple[memoryview, int]:
        """(view, index): `ring(v)` is `view[index] = v` truncated to `width` bytes, for hot paths
        that store without a call."""
        return self._view, self._index


class OSSeam(ABC):
    """What a driver may ask of the operating system. Methods raise `OSError` with the errno on
    failure (drivers turn ioctl failures into `IoctlError`, which names the request)."""

    #: short name for messages ("linux", "mock")
    name: str = "os"
    #: whether the GPUs behind this seam execute kernel code (a mock may model only memory, copies,
    #: signals and submission bookkeeping; see `Device.executes_kernels`)
    executes_kernels: bool = True
    #: whether the GPUs behind this seam run on threads of this process (a mock GPU): a waiter
    #: then sleeps at once instead of spinning first, since a spinning host thread holds the GIL
    #: that the GPU's thread needs to finish the work waited for
    gpus_in_process: bool = False

    def gpu_executes_kernels(self, device_path: str) -> bool:
        """Whether the GPU behind the device node `device_path` executes kernel code (a mock
        machine may mix GPUs that do with ones that do not)."""
        return self.executes_kernels

    @property
    def kernel(self) -> object:
        """Which kernel this seam reaches: devices whose seams share one are GPUs of one process on
        one machine, so they may map each other's memory (KFD's per-process state, RM clients and
        UVM VA spaces of one process). Each mock machine is its own kernel."""
        return self

    def run_gpus_here(self) -> bool:
        """Runs pending GPU work on the calling thread where the GPUs are threads of this process
        and that work has not started (a mock GPU kicked by a doorbell): a waiter calls it before
        it sleeps. Returns whether anything progressed; hardware GPUs run by themselves (False)."""
        return False

    def busy_here(self) -> bool:
        """Whether the calling thread is inside a call of this seam that must complete before a
        Ctrl-C is raised (a mock kernel's ioctl; a real system call completes or returns EINTR
        by itself)."""
        return False

    @abstractmethod
    def open(self, path: str, flags: int = os.O_RDWR) -> int:
        """Opens a device node or file; returns a file descriptor."""

    @abstractmethod
    def close(self, fd: int) -> None:
        """Closes a descriptor from `open` or `eventfd`."""

    @abstractmethod
    def ioctl(self, fd: int, request: int,
              arg: ctypes.Structure | ctypes.Array | int | None) -> int:
        """Issues ioctl `request` with the argument struct (read and written in place), or with an
        integer passed by value (`_IO` requests such as VFIO_CHECK_EXTENSION take one); returns the
        ioctl's result (some requests, e.g. VFIO_GROUP_GET_DEVICE_FD, return a new descriptor)."""

    @abstractmethod
    def mmap(self, addr: int | None, size: int, prot: int, flags: int, fd: int = -1,
             offset: int = 0) -> HostMapping:
        """Maps `size` bytes (anonymous when fd == -1) at `addr` (a hint, or exact with
        MAP_FIXED)."""

    @abstractmethod
    def munmap(self, mapping: HostMapping) -> None:
        """Removes a mapping made by `mmap`."""

    # Descriptor I/O. Not abstract so that seams written before these existed keep working; a seam
    # that lacks one says so with ENOSYS instead of failing silently.
    def pread(self, fd: int, size: int, offset: int) -> bytes:
        """Reads up to `size` bytes at `offset` (binary sysfs files such as PCI `config`, VFIO
        regions); a short result means the file ended or the kernel allowed no more."""
        raise OSError(errno.ENOSYS, f"the {self.name} seam does not implement pread")

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        """Writes `data` at `offset`; returns the number of bytes written."""
        raise OSError(errno.ENOSYS, f"the {self.name} seam does not implement pwrite")

    def read(self, fd: int, size: int) -> bytes:
        """Reads from a descriptor at its current position (an eventfd's 8-byte counter)."""
        raise OSError(errno.ENOSYS, f"the {self.name} seam does not implement read")

    def write(self, fd: int, data: bytes) -> int:
        """Writes to a descriptor at its current position (adds to an eventfd's counter)."""
        raise OSError(errno.ENOSYS, f"the {self.name} seam does not implement write")

    @abstractmethod
    def read_sysfs(self, path: str) -> str:
        """Reads a whole sysfs (or procfs) text file."""

    @abstractmethod
    def listdir(self, path: str) -> list[str]:
        """Lists a sysfs directory; raises FileNotFoundError when it does not exist."""

    @abstractmethod
    def eventfd(self, initval: int = 0, flags: int = 0) -> int:
        """Creates an eventfd (interrupt delivery for VFIO and friends)."""

    def exists(self, path: str) -> bool:
        """True when `path` names an existing file or directory."""
        try:
            self.read_sysfs(path)
            return True
        except IsADirectoryError:
            return True
        except OSError:
            try:
                self.listdir(path)
                return True
            except OSError:
                return False

    def doorbell(self, mapping: HostMapping, offset: int, width: int = 8) -> Doorbell:
        """A doorbell at byte `offset` of a doorbell mapping made with `mmap`."""
        return MappedDoorbell(mapping, offset, width)

    def kernel_log(self) -> list[str]:
        """Recent kernel log lines about GPUs, best effort (used to enrich device-fault reports)."""
        return []


class _Libc:
    """The few libc entry points Python's stdlib does not expose with the needed flags."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.mmap = lib.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int,
                              ctypes.c_long]
        self.munmap = lib.munmap
        self.munmap.restype = ctypes.c_int
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class RealOS(OSSeam):
    """The seam over the running Linux kernel."""

    name = "linux"
    _MAP_FAILED = ctypes.c_void_p(-1).value

    @property
    def kernel(self) -> object:
        """The running kernel: every RealOS of this process reaches the same one."""
        return RealOS

    def __init__(self) -> None:
        self._libc = _Libc()

    def open(self, path: str, flags: int = os.O_RDWR) -> int:
        return os.open(path, flags | os.O_CLOEXEC)

    def close(self, fd: int) -> None:
        os.close(fd)

    def ioctl(self, fd: int, request: int,
              arg: ctypes.Structure | ctypes.Array | int | None) -> int:
        if arg is None:
            return fcntl.ioctl(fd, request, 0)
        if isinstance(arg, int):
            return fcntl.ioctl(fd, request, arg)
        # A ctypes object is a mutable buffer: the kernel's writes land in it directly.
        return fcntl.ioctl(fd, request, arg, True)

    def mmap(self, addr: int | None, size: int, prot: int, flags: int, fd: int = -1,
             offset: int = 0) -> HostMapping:
        got = self._libc.mmap(addr or 0, size, prot, flags, fd, offset)
        if got is None or got == self._MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of {size:#x} B at fd {fd} offset {offset:#x}: "
                               f"{os.strerror(err)}")
        if addr is not None and flags & MAP_FIXED and got != addr:
            raise OSError(0, f"mmap MAP_FIXED at {addr:#x} returned {got:#x}")
        view = None
        if prot != PROT_NONE:
            view = memoryview((ctypes.c_char * size).from_address(got)).cast("B")
        return HostMapping(got, size, view, fd, offset)

    def munmap(self, mapping: HostMapping) -> None:
        if mapping.view is not None:
            mapping.view.release()
        if self._libc.munmap(mapping.addr, mapping.size) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"munmap of {mapping.size:#x} B at {mapping.addr:#x}")

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def read(self, fd: int, size: int) -> bytes:
        return os.read(fd, size)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def read_sysfs(self, path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def eventfd(self, initval: int = 0, flags: int = 0) -> int:
        return os.eventfd(initval, flags | os.EFD_CLOEXEC)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def kernel_log(self) -> list[str]:
        # /dev/kmsg needs CAP_SYSLOG on most systems; without it the fault report has no log lines.
        try:
            fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return []
        lines: list[str] = []
        try:
            while True:
                try:
                    rec = os.read(fd, 8192).decode(errors="replace")
                except BlockingIOError:
                    break
                except OSError:
                    break
                msg = rec.split(";", 1)[-1].strip()
                if "amdgpu" in msg or "kfd" in msg.lower() or "NVRM" in msg:
                    lines.append(msg)
        finally:
            os.close(fd)
        return lines[-50:]
