"""The device contract: what every driver promises, checked on each device the same way.

Parametrised over the mock AMD gfx1100 GPU (kernels run by the RDNA3 interpreter), the mock AMD
gfx942 GPU (MI300, CDNA3: GPU 1 of a machine whose GPU 0 is a gfx1100, so two architectures drive
one process; kernels modelled in Python, since the mock does not execute CDNA3 code), the mock
NVIDIA GPU (NVRTC-compiled PTX run by its PTX interpreter) and, marked `nvidia`, the real GPU
(NVRTC-compiled cubins). Covered: allocation, copies, launches, signals, user queues, graphs,
timeouts, faults and close. Vendor test files keep only what is vendor-specific.

On the real GPU the fault test (`test_zz_fault_...`) runs last, in a pytest run of its own
(scripts/device_check.sh), since a faulted channel is not reused.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from runtime.hcq import (Device, DeviceClosed, DeviceFault, HCQError, Launch, MemKind, Program,
                         SignalTimeout)

DATA = Path(__file__).parent / "data"
HAVE_NV = os.path.exists("/dev/nvidiactl") and os.path.exists("/dev/nvidia-uvm")
N = 1024                  # elements of the vector kernels
UNMAPPED_VA = 1 << 46     # far from every mapping of every driver


@dataclass
class Target:
    """One device under contract: how to open it and how to load its vector-add kernel."""

    name: str
    open: Callable[[], Device]
    vadd: Callable[[Device], tuple[Program, Callable[..., tuple[Any, ...]]]]
    local: tuple[int, int, int] = (256, 1, 1)
    leaks: Callable[[Device], dict[str, int]] | None = None   # live kernel objects after close
    exclusive: bool = False   # a real GPU opens once per process: a second open is refused

    def grid(self, n: int) -> tuple[int, int, int]:
        return (n // self.local[0], 1, 1)


# ------------------------------------------------------------------------------------ targets
def _mock_amd() -> Target:
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import AMDDevice

    def open_() -> Device:
        mos = MockOS.with_amd_gpus(1)
        d = AMDDevice("amd:0", os=mos)
        d.default_timeout_ms = 5000.0
        return d

    def vadd(d: Device) -> tuple[Program, Callable[..., tuple[Any, ...]]]:
        prg = d.program((DATA / "amd_reference" / "vector_add.hsaco").read_bytes(), "vector_add")
        return prg, lambda a, b, c, n: (a, b, c)

    return Target("mock-amd", open_, vadd, leaks=lambda d: d.os.live_objects())  # type: ignore


def _mock_amd_gfx942() -> Target:
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import AMDDevice

    def open_() -> Device:
        mos = MockOS.with_amd_gpus(2, archs=("gfx1100", "gfx942"))
        d = AMDDevice("amd:1", os=mos)
        d.default_timeout_ms = 5000.0
        return d

    def vadd(d: Device) -> tuple[Program, Callable[..., tuple[Any, ...]]]:
        # gfx942 code from Triton's own LLVM (clang-16 cannot target gfx942)
        prg: Any = d.program((DATA / "triton" / "gfx942" / "vector_add.hsaco").read_bytes(),
                             "vector_add")
        gpu = d.os.drivers[0].gpus[1]  # type: ignore[attr-defined]
        gpu.register_kernel(prg.pgm_va, _amd_vadd_model,
                            prg.kd.user_sgpr_layout()["kernarg_segment_ptr"])
        # x, y, out, n, then Triton's global and profile scratch pointers (unused)
        return prg, lambda a, b, c, n: (a, b, c, n, 0, 0)

    return Target("mock-amd-gfx942", open_, vadd,
                  leaks=lambda d: d.os.live_objects())  # type: ignore


def _amd_vadd_model(launch: Any) -> None:
    """vector_add (vector_add.cl, or Triton's, whose mask n covers the grid in these tests):
    c[i] = a[i] + b[i] for every work-item of the grid."""
    a, b, c = (launch.param(o, "Q") for o in (0, 8, 16))
    n = launch.grid[0] * launch.block[0]
    launch.array(c, np.float32, n)[:] = launch.array(a, np.float32, n) \
        + launch.array(b, np.float32, n)


def _mock_nv() -> Target:
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.hcq import NVDevice

    def open_() -> Device:
        d = NVDevice("nv:0", os=NvMockOS.with_nv_gpus(1))
        d.default_timeout_ms = 5000.0
        return d

    def vadd(d: Device) -> tuple[Program, Callable[..., tuple[Any, ...]]]:
        # NVRTC compiles to PTX for the mock, which runs it through its PTX interpreter
        lib = d.compiler.compile((DATA / "nv_kernels.cu").read_text(), "nv_kernels.cu")
        return d.program(lib, "vadd"), lambda a, b, c, n: (a, b, c, n)

    return Target("mock-nv", open_, vadd, leaks=lambda d: d.os.live_objects())  # type: ignore


def _nv() -> Target:
    from runtime.hcq import NVDevice

    def open_() -> Device:
        act = os.environ.get("NV_PCAS_ACTION")  # device_check.sh's fallback action, if it set one
        d = NVDevice("nv:0", **({"pcas_action": int(act, 0)} if act else {}))
        d.default_timeout_ms = 20_000.0
        return d

    def vadd(d: Device) -> tuple[Program, Callable[..., tuple[Any, ...]]]:
        lib = d.compiler.compile((DATA / "nv_kernels.cu").read_text(), "nv_kernels.cu")
        return d.program(lib, "vadd"), lambda a, b, c, n: (a, b, c, n)

    return Target("nv", open_, vadd, exclusive=True)


TARGETS = [
    pytest.param(_mock_amd, id="mock-amd"),
    pytest.param(_mock_amd_gfx942, id="mock-amd-gfx942"),
    pytest.param(_mock_nv, id="mock-nv"),
    pytest.param(_nv, id="nv", marks=[
        pytest.mark.nvidia,
        pytest.mark.skipif(not HAVE_NV, reason="no NVIDIA GPU here (/dev/nvidiactl or "
                                               "/dev/nvidia-uvm is absent)")]),
]


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    t: Target = request.param()
    return t


_SHARED: dict[str, Device] = {}   # target name -> its open shared device


@pytest.fixture(scope="module")
def shared(target: Target) -> Iterator[Device]:
    """One device per target for the tests that leave it usable."""
    d = _SHARED[target.name] = target.open()
    yield d
    _SHARED.pop(target.name, None)
    d.close()


def _own(target: Target) -> Device:
    """A device of the test's own. Where the target opens once per process, its shared device
    is closed first: the tests that take their own device come last in this file."""
    if target.exclusive and target.name in _SHARED:
        _SHARED.pop(target.name).close()
    return target.open()


@pytest.fixture(scope="module")
def vadd(target: Target, shared: Device) -> tuple[Program, Callable[..., tuple[Any, ...]]]:
    return target.vadd(shared)


def _up(d: Device, arr: np.ndarray) -> Any:
    buf = d.alloc(max(arr.nbytes, 1))
    d.copyin(buf, arr)
    return buf


def _down(d: Device, buf: Any, dtype: Any, n: int, offset: int = 0) -> np.ndarray:
    out = np.zeros(n, dtype)
    d.copyout(out, buf, src_offset=offset)
    return out


# ------------------------------------------------------------------------------------ memory
def test_alloc_kinds_and_free(shared: Device) -> None:
    d = shared
    bufs = [d.alloc(5000, kind=k) for k in (MemKind.VRAM, MemKind.GTT, MemKind.HOST)]
    assert all(b.size >= 5000 and b.va for b in bufs)
    assert len({b.va for b in bufs}) == 3
    host = bufs[2].cpu_view()
    host[:4] = b"abcd"
    assert bytes(_down(d, bufs[2], np.uint8, 4)) == b"abcd"  # the GPU sees the CPU's bytes
    for b in bufs:
        d.free(b)
    with pytest.raises(HCQError, match="freed"):
        d.copyin(bufs[0], np.zeros(4, np.uint8))


@pytest.mark.parametrize("size", [1, 4097, (1 << 20) + 3])
def test_copies_byte_for_byte(shared: Device, size: int) -> None:
    d = shared
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    a = _up(d, data)
    b = d.alloc(size + 64)
    d.transfer(b, a, size - 1, dst_offset=64, src_offset=1)  # device to device, odd offsets
    assert np.array_equal(_down(d, a, np.uint8, size), data)
    assert np.array_equal(_down(d, b, np.uint8, size - 1, offset=64), data[1:])
    d.free(a)
    d.free(b)


# ------------------------------------------------------------------------------------ launches
def test_launch_with_wait_returns_the_gpu_time(shared: Device, target: Target, vadd: Any) -> None:
    prg, args = vadd
    x = np.arange(N, dtype=np.float32)
    a, b, c = _up(shared, x), _up(shared, 2 * x), shared.alloc(N * 4)
    t = prg(*args(a, b, c, N), global_size=target.grid(N), local_size=target.local, wait=True)
    assert t is not None and 0 <= t < 1.0
    assert np.array_equal(_down(shared, c, np.float32, N), 3 * x)


def test_launches_without_wait_run_in_order(shared: Device, target: Target, vadd: Any) -> None:
    """Each launch reads what the one before wrote; only synchronize() waits."""
    prg, args = vadd
    one = _up(shared, np.ones(N, np.float32))
    acc = [_up(shared, np.zeros(N, np.float32)), shared.alloc(N * 4)]
    for k in range(40):
        prg(*args(acc[k % 2], one, acc[(k + 1) % 2], N), global_size=target.grid(N),
            local_size=target.local)
    shared.synchronize()
    assert np.all(_down(shared, acc[0], np.float32, N) == 40)


# ------------------------------------------------------------------------------------ signals, queues
def test_user_queues_wait_and_signal(shared: Device) -> None:
    """A compute queue waits for a signal the CPU sets; a copy queue's copy signals when done."""
    d = shared
    go, done, copied = d.new_signal(0), d.new_signal(0), d.new_signal(0)
    d.compute_queue().wait(go, 1).signal(done, 5).submit()
    time.sleep(0.01)
    assert done.value == 0  # still waiting for the CPU
    go.value = 1
    done.wait(5, timeout_ms=5000)
    src = _up(d, np.arange(256, dtype=np.uint32))
    dst = d.alloc(1024)
    d.copy_queue().wait(done, 5).copy(dst.va, src.va, 1024).signal(copied, 7).submit()
    copied.wait(7, timeout_ms=5000)
    assert np.array_equal(_down(d, dst, np.uint32, 256), np.arange(256, dtype=np.uint32))
    for s in (go, done, copied):
        s.release()


def test_graph_replay_with_patched_arguments(shared: Device, target: Target, vadd: Any) -> None:
    prg, args = vadd
    d = shared
    a, b = _up(d, np.full(N, 1, np.float32)), _up(d, np.full(N, 2, np.float32))
    c, e = d.alloc(N * 4), d.alloc(N * 4)
    g = d.graph([Launch(prg, args(a, b, c, N), target.grid(N), target.local),
                 Launch(prg, args(c, c, e, N), target.grid(N), target.local)])
    g.replay(wait=True)
    assert np.all(_down(d, e, np.float32, N) == 6)       # e = 2 (a + b)
    for k in range(3):
        g.replay({0: {1: a}}, wait=True)                  # c = a + a; e = 4
        assert np.all(_down(d, e, np.float32, N) == 4)
        g.replay({0: {1: b}})                             # back to a + b, without waiting
        d.synchronize()
        assert np.all(_down(d, e, np.float32, N) == 6)
    g.free()


# ------------------------------------------------------------------------------------ failures
def test_a_timeout_reports_the_state_and_the_device_recovers(target: Target) -> None:
    d = _own(target)
    try:
        never = d.new_signal(0)
        v = d.next_timeline()
        d.compute_queue().wait(never, 1).signal(d.timeline_signal, v).submit()
        t0 = time.perf_counter()
        with pytest.raises(SignalTimeout) as e:
            d.synchronize(timeout_ms=200)
        assert time.perf_counter() - t0 < 3.0
        assert f"timeline completed {v - 1} of {v}" in str(e.value)
        never.value = 1
        d.synchronize(timeout_ms=5000)
        d.copyin(d.alloc(64), np.zeros(16, np.uint32))  # still usable
    finally:
        d.close()


def test_close_releases_everything_and_refuses_later_use(target: Target) -> None:
    d = _own(target)
    prg, args = target.vadd(d)
    a = _up(d, np.ones(N, np.float32))
    prg(*args(a, a, a, N), global_size=target.grid(N), local_size=target.local)
    d.close()
    d.close()  # idempotent
    with pytest.raises(DeviceClosed):
        d.alloc(64)
    if target.leaks is not None:
        assert all(v == 0 for v in target.leaks(d).values()), target.leaks(d)


def test_zz_fault_poisons_the_device_and_close_still_works(target: Target) -> None:
    """A kernel writing to an unmapped address raises DeviceFault (every later call raises a fresh
    one of the same report, caused by the first), and close() still releases the device."""
    d = _own(target)
    try:
        prg, args = target.vadd(d)
        a = _up(d, np.ones(N, np.float32))
        with pytest.raises(DeviceFault) as e:
            prg(*args(a, a, UNMAPPED_VA, N), global_size=target.grid(N),
                local_size=target.local, wait=True, timeout_ms=5000)
        with pytest.raises(DeviceFault) as again:
            d.alloc(64)
        first = e.value if e.value.__cause__ is None else e.value.__cause__
        assert again.value is not e.value and again.value.__cause__ is first
        assert str(again.value) == str(e.value)
    finally:
        d.close()
    if target.leaks is not None:
        assert all(v == 0 for v in target.leaks(d).values()), target.leaks(d)
