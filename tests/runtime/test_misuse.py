"""Misuse of the documented API, as a new user (or a fuzzer) would try it: every case gets a clear
HCQError naming the bad argument, nothing half-done stays behind, and the device stays fully usable
(copies work right after, close() is quick). One test per case; add new cases here.

The "refused submission" cases run on both mock GPUs and check the invariant that matters most: a
launch, copy or graph that is refused must not take a timeline value (or any other shared slot),
since every later submission would wait for it forever.
"""
from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from runtime.hcq import (Buffer, Device, DeviceClosed, DeviceFault, DeviceNotFound, GraphCopy,
                         GraphWait, HCQError, HCQMemoryError, Launch, ProgramError, open_device)

DATA = Path(__file__).parent / "data"
NV_CUBIN = (DATA / "nv_kernels_cuda13.cubin").read_bytes()
AMD_INC = "__kernel void inc(__global int *a, int n) { int i = get_global_id(0); " \
          "if (i < n) a[i] += 1; }\n" \
          "__kernel void typed(__global int *a, int i, uint u, float f, long l) { " \
          "a[0] = i; a[1] = (int)u; a[2] = (int)f; a[3] = (int)l; }"


def _have_clang() -> bool:
    from runtime.drivers.amd.compiler import AMDCompiler
    return AMDCompiler().available() is None


_AMD_LIB: list[bytes] = []


def _amd_lib() -> bytes:
    if not _AMD_LIB:
        from runtime.drivers.amd.compiler import AMDCompiler
        _AMD_LIB.append(AMDCompiler().compile(AMD_INC))
    return _AMD_LIB[0]


def _inc_model(launch: Any) -> None:
    x, n = launch.param(0, "Q"), launch.param(8, "i")
    launch.array(x, np.uint32, n)[:] += 1


def _open(vendor: str, index: int = 0) -> Device:
    if vendor == "amd":
        if not _have_clang():
            pytest.skip("clang-16 is not installed")
        from runtime.drivers.amd.device import AMDDevice
        from runtime.drivers.mock.os import MockOS
        d: Device = AMDDevice(f"mock-amd:{index}", os=MockOS.with_amd_gpus(index + 1))
    else:
        from runtime.drivers.mock.nv_rm import NvMockOS
        from runtime.drivers.nv.device import NVDevice
        d = NVDevice(f"mock-nv:{index}", os=NvMockOS.with_nv_gpus(index + 1))
    d.default_timeout_ms = 3000.0
    return d


def _inc(d: Device) -> Any:
    if d.name.startswith("mock-amd"):
        return d.program(_amd_lib(), "inc")
    prg = d.program(NV_CUBIN, "inc")
    gpu = d.os.nv.gpus[int(d.name.split(":")[1])]  # type: ignore[attr-defined]
    gpu.register_kernel(prg.prog_va, _inc_model)
    return prg


@pytest.fixture(params=["amd", "nv"])
def vendor(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def dev(vendor: str) -> Any:
    d = _open(vendor)
    yield d
    d.close()


def _assert_usable(d: Device, timeline_before: int) -> None:
    """The refused call took no timeline value; launches, copies and close still work, quickly."""
    assert d.timeline_value == timeline_before
    buf = d.alloc(64)
    d.copyin(buf, np.arange(16, dtype=np.int32))
    _inc(d)(buf, 16, global_size=(1, 1, 1), local_size=(16, 1, 1))
    out = np.zeros(16, np.int32)
    t = time.perf_counter()
    d.copyout(out, buf)
    assert np.array_equal(out, np.arange(16) + 1)
    d.synchronize(timeout_ms=1000)
    d.close()
    assert time.perf_counter() - t < 1.0


# ------------------------------------------------------------------ refused submissions, every path
_BAD_LAUNCHES: dict[str, Callable[[Device, Any, Buffer], Any]] = {
    "workgroup too large": lambda d, p, b: p(b, 4, global_size=(1, 1, 1),
                                             local_size=(2048, 1, 1)),
    "workgroup 1024x2": lambda d, p, b: p(b, 4, global_size=(1, 1, 1), local_size=(1024, 2, 1)),
    "grid 2^32": lambda d, p, b: p(b, 4, global_size=(1 << 32, 1, 1), local_size=(1, 1, 1)),
    "float grid": lambda d, p, b: p(b, 4, global_size=(1.5, 1, 1), local_size=(1, 1, 1)),
    "zero grid": lambda d, p, b: p(b, 4, global_size=(0, 1, 1), local_size=(1, 1, 1)),
    "too many args": lambda d, p, b: p(b, 4, 5, global_size=(1, 1, 1), local_size=(1, 1, 1)),
    "int too large": lambda d, p, b: p(b, 1 << 40, global_size=(1, 1, 1), local_size=(1, 1, 1)),
    "string arg": lambda d, p, b: p(b, "4", global_size=(1, 1, 1), local_size=(1, 1, 1)),
    "freed buffer": lambda d, p, b: (d.free(b), p(b, 4, global_size=(1, 1, 1),
                                                  local_size=(1, 1, 1))),
    "waited, bad shape": lambda d, p, b: p(b, 4, global_size=(1, 1, 1), local_size=(4096, 1, 1),
                                           wait=True),
    "list sizes, bad shape": lambda d, p, b: p(b, 4, global_size=[1, 1, 1],
                                               local_size=[4096, 1, 1]),
    "graph with a bad launch": lambda d, p, b: d.graph([Launch(p, (b, 4), (1, 1, 1), (1, 1, 1)),
                                                        Launch(p, (b, 4), (1, 1, 1),
                                                               (1, 1, 4096))]),
    "graph with a bad argument": lambda d, p, b: d.graph([Launch(p, (b, 1 << 40),
                                                                 (1, 1, 1), (1, 1, 1))]),
    "transfer of -5 bytes": lambda d, p, b: d.transfer(b, b, -5),
    "transfer past the end": lambda d, p, b: d.transfer(b, b, 65),
    "transfer at a negative offset": lambda d, p, b: d.transfer(b, b, 4, dst_offset=-4),
    "copyin past the end": lambda d, p, b: d.copyin(b, bytes(65)),
    "copyin of a strided array": lambda d, p, b: d.copyin(b, np.arange(32, dtype=np.int32)[::2]),
    "copyout into a strided array": lambda d, p, b: d.copyout(np.zeros(32, np.int32)[::2], b),
    "copyout into bytes": lambda d, p, b: d.copyout(bytes(16), b),
    "async copyout past the end": lambda d, p, b: d.copyout_async(bytearray(65), b),
    "async copyout into a strided array": lambda d, p, b: d.copyout_async(
        np.zeros(32, np.int32)[::2], b),
    "stream launch, bad shape": lambda d, p, b: d.stream().launch(p, b, 4, global_size=(1, 1, 1),
                                                                  local_size=(4096, 1, 1)),
    "stream launch, foreign argument kind": lambda d, p, b: d.stream().launch(
        p, b, "4", global_size=(1, 1, 1), local_size=(1, 1, 1)),
    "stream copy of -5 bytes": lambda d, p, b: d.stream().copy(b, b, -5),
    "graph copy past the end": lambda d, p, b: d.graph([GraphCopy(b, b, 128)]),
    "graph wait on a foreign object": lambda d, p, b: d.graph([GraphWait(None, 1)]),  # type: ignore
}


@pytest.mark.parametrize("case", sorted(_BAD_LAUNCHES))
def test_a_refused_submission_leaves_the_device_usable(vendor: str, case: str) -> None:
    d = _open(vendor)
    try:
        prg, buf = _inc(d), d.alloc(64)
        d.synchronize()
        before = d.timeline_value
        with pytest.raises(HCQError) as ei:
            _BAD_LAUNCHES[case](d, prg, buf)
        assert isinstance(ei.value, (ProgramError, HCQMemoryError)), ei.value
    except BaseException:
        d.close()
        raise
    _assert_usable(d, before)


def test_a_refused_graph_replay_update_leaves_the_device_usable(dev: Device) -> None:
    prg, buf = _inc(dev), dev.alloc(64)
    g = dev.graph([Launch(prg, (buf, 16), (1, 1, 1), (16, 1, 1))])
    g.replay(wait=True)
    before = dev.timeline_value
    with pytest.raises(ProgramError, match="arg"):
        g.replay({0: {1: 1 << 40}})
    with pytest.raises(ProgramError, match="no launch 3"):
        g.replay({3: {0: buf}})
    assert dev.timeline_value == before
    g.replay(wait=True)
    out = np.zeros(16, np.int32)
    dev.copyout(out, buf)
    assert (out == 2).all()


def test_a_refused_user_queue_takes_nothing(dev: Device) -> None:
    """A queue the builder refuses never reaches the ring; the device's own submissions go on."""
    prg, buf = _inc(dev), dev.alloc(64)
    q = dev.compute_queue()
    with pytest.raises(HCQError):
        q.exec(prg, prg.fill_kernargs((buf, 4), (1, 1, 1), (1, 1, 1)), (1, 1, 1), (4096, 1, 1))
    with pytest.raises(HCQError):
        dev.compute_queue().wait(dev.timeline_signal, -1)
    before = dev.timeline_value
    dev.copyin(buf, bytes(64))
    dev.synchronize(timeout_ms=1000)
    assert dev.timeline_value == before + 1


# ------------------------------------------------------------------ argument checks
def test_foreign_buffers_are_refused_everywhere(vendor: str) -> None:
    d0, d1 = _open(vendor, 0), _open(vendor, 1)
    try:
        a0, b1 = d0.alloc(64), d1.alloc(64)
        prg = _inc(d0)
        with pytest.raises(HCQMemoryError, match="src .* belongs to mock-.*:1"):
            d1.transfer(b1, a0, 64)
        with pytest.raises(HCQMemoryError, match="dst .* belongs to"):
            d0.copyin(b1, bytes(64))
        with pytest.raises(HCQMemoryError, match="src .* belongs to"):
            d0.copyout(bytearray(64), b1)
        # AMD code objects name the kernel's parameters; cubins carry no names
        first = "a" if vendor == "amd" else "arg0"
        with pytest.raises(ProgramError, match=f"argument '{first}'.*belongs to"):
            prg(b1, 4, global_size=(1, 1, 1), local_size=(1, 1, 1))
        with pytest.raises(ProgramError, match=f"argument '{first}'.*belongs to"):
            d0.graph([Launch(prg, (b1, 4))])
        with pytest.raises(HCQMemoryError, match="belongs to"):
            d0.free(b1)
        for _ in range(3):  # the hot path (a launcher per shape) refuses it too
            prg(a0, 1, global_size=(1, 1, 1), local_size=(1, 1, 1))
            with pytest.raises(ProgramError, match="belongs to"):
                prg(b1, 4, global_size=(1, 1, 1), local_size=(1, 1, 1))
        out = np.zeros(16, np.int32)
        d0.copyout(out, a0)
        assert list(out[:2]) == [3, 0]  # three launches of one thread
    finally:
        d0.close()
        d1.close()


@pytest.mark.skipif(not _have_clang(), reason="clang-16 is not installed")
def test_typed_scalar_arguments_are_checked_by_the_kernels_types() -> None:
    d = _open("amd")
    try:
        prg, buf = d.program(_amd_lib(), "typed"), d.alloc(64)
        assert [s.scalar for s in prg.slots] == ["", "i", "u", "f", "i"]
        ok = dict(global_size=(1, 1, 1), local_size=(1, 1, 1))
        # the errors name the kernel's own parameters (the code object's metadata has them)
        for args, match in (((buf, 4.0, 1, 1.0, 1), "'i' is an integer, got the float 4.0"),
                            ((buf, np.float32(4), 1, 1.0, 1), "'i' is an integer, got numpy"),
                            ((buf, 1, -1, 1.0, 1), "-1 does not fit the 4-B argument 'u'"),
                            ((buf, 1 << 31, 1, 1.0, 1), "does not fit .* 'i'"),
                            ((buf, 1, 1 << 32, 1.0, 1), "does not fit .* 'u'"),
                            ((buf, 1, 1, 1.0, 1 << 63), "does not fit .* 'l'")):
            with pytest.raises(ProgramError, match=match):
                prg(*args, **ok)
        # An int for a float parameter is its value; numpy scalars of every width are accepted.
        prg(buf, np.int8(-3), np.uint16(7), 5, np.int64(-9), wait=True, **ok)
        out = np.zeros(4, np.int32)
        d.copyout(out, buf)
        assert list(out) == [-3, 7, 5, -9]
    finally:
        d.close()


@pytest.mark.skipif(not _have_clang(), reason="clang-16 is not installed")
def test_compile_errors_are_hcq_errors() -> None:
    from runtime.drivers.amd.compiler import AMDCompiler, CompileError
    with pytest.raises(HCQError) as ei:
        AMDCompiler().compile("__kernel void f( { }")
    assert isinstance(ei.value, CompileError) and isinstance(ei.value, ProgramError)
    assert "error" in ei.value.log


# ------------------------------------------------------------------ memory
def test_alloc_sizes(dev: Device) -> None:
    live = dev.allocator.live_count
    for bad, match in ((2.5, "integer number of bytes, got float"), ("8", "got str"),
                       (None, "got NoneType"), (-1, ">= 0")):
        with pytest.raises(HCQMemoryError, match=match):
            dev.alloc(bad)  # type: ignore[arg-type]
    assert dev.allocator.live_count == live
    with pytest.raises(HCQMemoryError):
        dev.alloc(1 << 50)
    z = dev.alloc(0)
    assert z.size == 0 and z.va == 0
    dev.copyin(z, b"")
    dev.transfer(z, z, 0)
    zc = dev.alloc(0, cpu_access=True)
    assert len(zc.cpu_view()) == 0
    dev.free(z)
    dev.free(zc)
    with pytest.raises(HCQMemoryError, match="double free"):
        dev.free(z)
    assert dev.allocator.live_count == live
    b = dev.alloc(np.int64(100))  # numpy integers are integers
    assert b.size == 100


def test_alloc_of_a_float_leaks_nothing_on_the_mock() -> None:
    if not _have_clang():
        pytest.skip("clang-16 is not installed")
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.mock.os import MockOS
    mos = MockOS.with_amd_gpus(1)
    d = AMDDevice("mock-amd:0", os=mos)
    before = mos.live_objects()
    with pytest.raises(HCQMemoryError):
        d.alloc(2.5)  # type: ignore[arg-type]
    assert mos.live_objects() == before
    b = d.alloc(4096)  # the mock's address counter is still an int
    assert isinstance(b.va, int)
    d.close()
    assert all(v == 0 for v in mos.live_objects().values())


def test_free_of_the_wrong_thing(dev: Device) -> None:
    for bad, match in ((None, "expected a Buffer.*NoneType"), (b"xx", "bytes")):
        with pytest.raises(HCQMemoryError, match=match):
            dev.free(bad)  # type: ignore[arg-type]
    b = dev.alloc(8192)
    with pytest.raises(HCQMemoryError, match="slice"):
        dev.free(b.slice(0, 16))
    dev.free(b)


def test_caching_allocator_reuses_freed_memory_without_a_driver_call(dev: Device) -> None:
    st0 = dev.pool_stats()
    a = dev.alloc(100_000)
    va = a.va
    dev.free(a)
    b = dev.alloc(100_000 - 5)  # same rounded size: served from the pool
    st = dev.pool_stats()
    assert b.va == va and st.hits == st0.hits + 1 and st.misses == st0.misses + 1
    assert 0 < st.hit_rate <= 1
    with pytest.raises(HCQError, match="freed"):
        a.cpu_view()  # the freed object stays dead although its memory lives on in `b`
    dev.free(b)
    assert dev.pool_stats().cached_B >= 100_000
    dev.trim_pool()
    assert dev.pool_stats().cached_B == 0


def test_unmap_failure_in_free_is_the_error_reported() -> None:
    if not _have_clang():
        pytest.skip("clang-16 is not installed")
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import IoctlError
    mos = MockOS.with_amd_gpus(1)
    d = AMDDevice("mock-amd:0", os=mos, pool_B=0)
    b = d.alloc(4096)
    live = d.allocator.live_count
    mos.inject_ioctl_failure("AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", errno.EIO)
    with pytest.raises(IoctlError, match="UNMAP_MEMORY_FROM_GPU") as ei:
        d.free(b)
    assert ei.value.errno == errno.EIO
    assert d.allocator.live_count == live and not b.freed  # still live: close releases it
    d.close()
    assert all(v == 0 for v in mos.live_objects().values())


def test_interrupted_event_waits_are_retried() -> None:
    if not _have_clang():
        pytest.skip("clang-16 is not installed")
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.mock.os import MockOS
    mos = MockOS.with_amd_gpus(1)
    d = AMDDevice("mock-amd:0", os=mos)
    try:
        sig = d.new_signal(0)
        for err in (errno.EINTR, errno.EAGAIN):
            mos.inject_ioctl_failure("AMDKFD_IOC_WAIT_EVENTS", err, count=2)
            with pytest.raises(HCQError, match="timed out"):  # not EINTR: the wait went on
                sig.wait(1, timeout_ms=30)
        d.synchronize()
    finally:
        d.close()


def test_a_kernel_page_fault_is_reported_as_a_memory_fault() -> None:
    if not _have_clang():
        pytest.skip("clang-16 is not installed")
    d = _open("amd")
    try:
        prg = _inc(d)
        s = d.stream()
        assert d.fault is None
        with pytest.raises(DeviceFault, match="memory fault at VA 0xdead0000") as e:
            prg(0xDEAD0000, 4, global_size=(1, 1, 1), local_size=(4, 1, 1), wait=True)
        assert d.fault is e.value  # the device remembers it; every later call refuses
        s.close()  # gives its queue back without waiting for work on a faulted device
        assert s.closed and s not in d._streams
    finally:
        d.close()


# ------------------------------------------------------------------ names, lifetime
@pytest.mark.parametrize("name", ["mock-amd:0\n", "mock-amd:00", "mock-amd:\u0661", "amd:01",
                                  "mock-amd:500", "mock-nv:16", "mock-amd:" + "9" * 40, " amd:0",
                                  "amd:-1", "AMD:0"])
def test_bad_device_names(name: str) -> None:
    with pytest.raises(DeviceNotFound):
        open_device(name)


def test_objects_of_a_closed_device_raise(vendor: str) -> None:
    d = _open(vendor)
    sig = d.new_signal(5)
    assert sig.value == 5
    d.close()
    with pytest.raises(DeviceClosed):
        sig.value  # noqa: B018
    with pytest.raises(DeviceClosed):
        d.describe_state()
    with pytest.raises(DeviceClosed):
        d.alloc(16)


def test_held_signals_give_their_pools_back(dev: Device) -> None:
    n_pools, live = len(dev._signal_pools), dev.allocator.live_count
    sigs = [dev.new_signal() for _ in range(10_000)]
    assert len(dev._signal_pools) >= 3
    for s in sigs:
        s.release()
    assert len(dev._signal_pools) == n_pools and dev.allocator.live_count == live


def test_demo_refuses_a_bad_element_count(capsys: Any) -> None:
    from runtime.hcq import demo
    with pytest.raises(SystemExit) as ei:
        demo.main(["mock-amd:0", "--n", "0"])
    assert ei.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_bad_values_are_hcq_errors_that_are_also_value_errors(dev: Device) -> None:
    from runtime.hcq import ArgumentError, QueueError
    b = dev.alloc(64)
    with pytest.raises(ArgumentError, match="slice"):
        b.slice(32, 64)
    with pytest.raises(QueueError, match="expected an int or a Var, got float"):
        dev.compute_queue().wait(dev.timeline_signal, 1.5)  # type: ignore[arg-type]
    if dev.name.startswith("mock-amd"):
        from runtime.drivers.amd.device import AMDDevice
        from runtime.drivers.mock.os import MockOS
        with pytest.raises(ArgumentError, match="power of two"):
            AMDDevice("mock-amd:0", os=MockOS.with_amd_gpus(1), ring_B=3000)
    else:
        from runtime.drivers.mock.nv_rm import NvMockOS
        from runtime.drivers.nv.device import NVDevice
        with pytest.raises(ArgumentError, match="power of two"):
            NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1), gpfifo_entries=100)
    with pytest.raises(ValueError):  # still a ValueError for callers that catch that
        b.slice(-1, 4)
