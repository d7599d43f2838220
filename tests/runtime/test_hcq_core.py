"""The vendor-neutral core on its own: patch points, allocator bookkeeping, argument packing,
errors, the real OS seam, and the rule that the core never imports generated bindings."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from array import array

import numpy as np
import pytest

from runtime.hcq.device import SubmitLock
from runtime.hcq.errors import (DeviceFault, HCQError, IoctlError, ProgramError, QueueError,
                                SignalTimeout)
from runtime.hcq.memory import (Allocator, Buffer, BufferSpec, MemKind, RingArena, SlotPool,
                                round_up)
from runtime.hcq.program import ArgSlot, write_arg
from runtime.hcq.queue import HWQueue, Var, as_tuple3
from runtime.hcq.seam import MAP_ANONYMOUS, MAP_PRIVATE, PROT_READ, PROT_WRITE, RealOS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Dev:
    """Just enough of a Device for the core pieces that only need a name and a closed flag."""

    name = "fake:0"
    closed = False
    clock_hz = 100e6
    submit_lock = SubmitLock()
    tracer = None  # no profiler or debug log

    def check_usable(self) -> None:
        pass

    def note_submit_error(self, e: BaseException) -> None:
        pass


class _ListQueue(HWQueue):
    """A toy engine: `signal` emits [0xAA, lo, hi]; `_submit` records the stream."""

    def __init__(self) -> None:
        super().__init__(_Dev())  # type: ignore[arg-type]
        self.submitted: list[list[int]] = []

    def signal(self, sig, value):  # type: ignore[override]
        val, var, add = self._resolve(value)
        n = len(self._d)
        self._d.extend((0xAA, val & 0xFFFFFFFF, val >> 32))
        if var is not None:
            self._patch(var, add, n + 1, n + 2)
        return self

    def wait(self, sig, value):  # type: ignore[override]
        val, var, add = self._resolve(value, 32)
        n = len(self._d)
        self._d.extend((0xBB, val))
        if var is not None:
            self._patch(var, add, n + 1, -1, 32)
        return self

    def _submit(self) -> None:
        self.submitted.append(self._d.tolist())


def test_patch_points_rewrite_only_their_dwords() -> None:
    v, w = Var("v"), Var("w")
    q = _ListQueue().signal(None, v).wait(None, w + 1).signal(None, 7)
    assert [(p.lo, p.hi, p.add) for p in q.patch_points] == [(1, 2, 0), (4, -1, 1)]
    q.submit({v: (5 << 32) | 3, w: 9})
    assert q.submitted[-1] == [0xAA, 3, 5, 0xBB, 10, 0xAA, 7, 0]
    q.submit({v: 4})  # w keeps its binding
    assert q.submitted[-1] == [0xAA, 4, 0, 0xBB, 10, 0xAA, 7, 0]


def test_unbound_variable_and_32_bit_limit() -> None:
    q = _ListQueue().wait(None, Var("x"))
    with pytest.raises(QueueError, match="unbound variable.*x"):
        q.submit()
    with pytest.raises(QueueError, match="32-bit"):
        q.submit({q.patch_points[0].var: 1 << 32})
    with pytest.raises(QueueError, match="32-bit"):
        _ListQueue().wait(None, 1 << 33)


def test_base_commands_fail_loudly() -> None:
    q = _ListQueue()
    for call in (lambda: q.timestamp(None), lambda: q.memory_barrier(),
                 lambda: q.copy(0, 0, 1), lambda: q.exec(None, 0, (1,), (1,)),
                 lambda: q.call(q)):
        with pytest.raises(QueueError, match="_ListQueue"):
            call()


def test_as_tuple3() -> None:
    assert as_tuple3(4, "g") == (4, 1, 1)
    assert as_tuple3((2, 3), "g") == (2, 3, 1)
    assert as_tuple3((np.int64(2), np.uint8(3)), "g") == (2, 3, 1)
    for bad in ((0, 1, 1), (1.5, 1, 1), (2.0,), (1, 1, 1, 1), (), "abc", (True and None,)):
        with pytest.raises(ProgramError, match="g must be"):
            as_tuple3(bad, "g")  # type: ignore[arg-type]


class _CountingAllocator(Allocator):
    def __init__(self) -> None:
        super().__init__(_Dev())  # type: ignore[arg-type]
        self.freed: list[int] = []
        self._va = 0x1000

    def _alloc(self, size: int, spec: BufferSpec) -> Buffer:
        buf = Buffer(self.device, self._va, size, spec, memoryview(bytearray(size)))  # type: ignore
        self._va += size
        return buf

    def _free(self, buf: Buffer) -> None:
        self.freed.append(buf.va)


def test_allocator_tracks_and_releases_newest_first() -> None:
    a = _CountingAllocator()
    bufs = [a.alloc(n) for n in (1, 4096, 5000)]
    assert [b.size for b in bufs] == [1, 4096, 5000]
    assert len(bufs[2].view) == 5000 and a.live_count == 3
    a.free(bufs[0])
    with pytest.raises(HCQError, match="double free"):
        a.free(bufs[0])
    with pytest.raises(HCQError, match="slice"):
        a.free(bufs[1].slice(8, 8))
    a.release_all()
    assert a.freed == [bufs[0].va, bufs[2].va, bufs[1].va] and a.live_count == 0
    with pytest.raises(HCQError, match="freed"):
        bufs[1].cpu_view()


def test_slot_pool_and_round_up() -> None:
    a = _CountingAllocator()
    pool = SlotPool(a.alloc(64), 16)
    offs = [pool.take() for _ in range(4)]
    assert offs == [0, 16, 32, 48] and pool.free_count == 0
    pool.give(16)
    assert pool.take() == 16
    assert round_up(4097, 4096) == 8192
    assert MemKind("gtt") is MemKind.GTT
    assert RingArena  # exercised end to end by the device tests


def test_write_arg_packs_like_c() -> None:
    view = memoryview(bytearray(16))
    write_arg(view, ArgSlot("a", 0, 4, "value"), -1)
    write_arg(view, ArgSlot("b", 4, 4, "value"), 1.5)
    write_arg(view, ArgSlot("c", 8, 8, "value"), 1 << 40)
    assert bytes(view[:4]) == b"\xff\xff\xff\xff"
    assert bytes(view[4:8]) == array("f", [1.5]).tobytes()
    assert int.from_bytes(view[8:16], "little") == 1 << 40
    with pytest.raises(HCQError, match="does not fit"):
        write_arg(view, ArgSlot("d", 0, 2, "value"), 1 << 20)


def test_error_messages_carry_their_facts() -> None:
    e = IoctlError("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", errno.ENOMEM, "out of GPU memory")
    assert e.errno == errno.ENOMEM and e.name == "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"
    assert "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU" in str(e) and "ENOMEM" in str(e)
    assert isinstance(e, OSError) and isinstance(e, HCQError)
    f = DeviceFault("mock-amd:0", "page fault at 0x1000")
    assert "mock-amd:0" in str(f) and f.report == "page fault at 0x1000"
    t = SignalTimeout("sig", 5, 3, "queue blocked", 10.0)  # type: ignore[arg-type]
    assert "reach 5" in str(t) and "it is 3" in str(t) and "queue blocked" in str(t)


def test_real_os_seam_basics() -> None:
    ros = RealOS()
    m = ros.mmap(None, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS)
    assert m.view is not None and len(m.view) == 8192
    m.view[:4] = b"abcd"
    assert bytes(m.view[:4]) == b"abcd"
    ros.munmap(m)
    assert "Name:" in ros.read_sysfs("/proc/self/status")
    assert "self" in ros.listdir("/proc")
    fd = ros.eventfd(3)
    assert os.read(fd, 8) == (3).to_bytes(8, sys.byteorder)
    ros.close(fd)
    fd = ros.open("/dev/null")
    with pytest.raises(OSError):
        ros.ioctl(fd, 0x1234, None)
    ros.close(fd)


def test_core_imports_no_generated_code() -> None:
    code = ("import sys, runtime.hcq, runtime.hcq.device, runtime.hcq.graph; "
            "bad = [m for m in sys.modules if m.startswith(('hcq_bindings', 'runtime.drivers'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_device_names_parse_and_refuse_with_the_accepted_forms() -> None:
    from runtime.hcq.device import DeviceName, parse_device_name
    from runtime.hcq.errors import DeviceNotFound
    assert parse_device_name("nv:1") == DeviceName("nv", False, 1)
    assert parse_device_name("mock-amd") == DeviceName("amd", True, 0)
    assert parse_device_name("mock-nv:3", "nv") == DeviceName("nv", True, 3)
    with pytest.raises(DeviceNotFound, match=r"expected amd:N, nv:N, mock-amd:N or mock-nv:N"):
        parse_device_name("intel:0")
    with pytest.raises(DeviceNotFound, match=r"not an NVIDIA device name \(nv:N or mock-nv:N\)"):
        parse_device_name("amd:0", "nv")
    with pytest.raises(DeviceNotFound, match=r"not an AMD device name"):
        parse_device_name("mock-amd:x", "amd")
