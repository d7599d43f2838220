"""What a tensor engine expects of the runtime, on both mock GPUs: streams (independent hardware
queues ordered by events, all covered by synchronize), async copyout, and graphs that copy and wait
as well as launch. (The caching allocator and the compile cache have their own tests.)"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import Event, GraphCopy, GraphWait, Launch

needs_gpu = pytest.mark.skipif(not (os.path.exists("/dev/nvidiactl") and
                                   os.path.exists("/dev/nvidia-uvm")),
                               reason="no NVIDIA GPU here (/dev/nvidiactl or /dev/nvidia-uvm)")
NV_CUBIN = (Path(__file__).parent / "data" / "nv_kernels_cuda13.cubin").read_bytes()
AMD_INC = "__kernel void inc(__global uint *a, int n) { int i = get_global_id(0); " \
          "if (i < n) a[i] += 1; }"
N = 256


def _inc_model(launch: Any) -> None:
    x, n = launch.param(0, "Q"), launch.param(8, "i")
    launch.array(x, np.uint32, n)[:] += 1


@pytest.fixture(params=["amd", "nv"])
def dev(request: Any) -> Iterator[Any]:
    if request.param == "amd":
        from runtime.drivers.amd.compiler import AMDCompiler
        from runtime.drivers.amd.device import AMDDevice
        if AMDCompiler().available():
            pytest.skip(AMDCompiler().available() or "")
        from runtime.drivers.mock.os import MockOS
        d: Any = AMDDevice("mock-amd:0", os=MockOS.with_amd_gpus(1))
    else:
        from runtime.drivers.mock.nv_rm import NvMockOS
        from runtime.drivers.nv.device import NVDevice
        d = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    d.default_timeout_ms = 5000.0
    yield d
    d.close()


def _inc(d: Any) -> Any:
    if d.name.startswith("mock-amd"):
        return d.program(d.compile(AMD_INC), "inc")
    prg = d.program(NV_CUBIN, "inc")
    d.os.nv.gpus[0].register_kernel(prg.prog_va, _inc_model)
    return prg


def _read(d: Any, buf: Any) -> np.ndarray:
    out = np.zeros(N, np.uint32)
    d.copyout(out, buf)
    return out


G, L = (N // 64, 1, 1), (64, 1, 1)


def test_streams_are_separate_hardware_queues_ordered_by_events(dev: Any) -> None:
    inc = _inc(dev)
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    dev.copyin(a, np.arange(N, dtype=np.uint32))
    dev.copyin(b, np.zeros(N, np.uint32))
    s1, s2 = dev.stream(), dev.stream()
    if dev.name.startswith("mock-amd"):
        assert len(dev._rings) == 4  # compute, copy and one per stream
    else:
        assert len(dev.channels) == 4
    s1.wait(dev.record())        # after the copies
    for _ in range(3):
        s1.launch(inc, a, N, global_size=G, local_size=L)
    s2.wait(s1.record())
    ev = s2.launch(inc, a, N, global_size=G, local_size=L)
    s2.copy(b, a, 4 * N)
    dev.synchronize()            # covers both streams
    assert ev.query() and s2.value == 2
    assert np.array_equal(_read(dev, b), np.arange(N) + 4)


def test_a_blocked_stream_does_not_hold_up_the_others(dev: Any) -> None:
    inc = _inc(dev)
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    dev.copyin(a, np.zeros(N, np.uint32))
    dev.copyin(b, np.zeros(N, np.uint32))
    gate = dev.new_signal(0)
    s1, s2 = dev.stream(), dev.stream()
    s1.wait(dev.record())
    s2.wait(dev.record())
    s1.wait(Event(gate, 1))      # held until the CPU opens the gate
    blocked = s1.launch(inc, a, N, global_size=G, local_size=L)
    s2.launch(inc, b, N, global_size=G, local_size=L)
    s2.synchronize(timeout_ms=2000)
    dev.record().wait(timeout_ms=2000)   # the device timeline is not held either
    assert not blocked.query()
    assert (_read(dev, b) == 1).all() and (_read(dev, a) == 0).all()
    timer = threading.Timer(0.05, lambda: setattr(gate, "value", 1))
    timer.start()
    dev.synchronize(timeout_ms=3000)
    timer.join()
    assert blocked.query() and (_read(dev, a) == 1).all()


def test_the_device_timeline_can_wait_for_a_stream(dev: Any) -> None:
    inc = _inc(dev)
    a = dev.alloc(4 * N)
    dev.copyin(a, np.zeros(N, np.uint32))
    s = dev.stream()
    s.wait(dev.record())
    s.launch(inc, a, N, global_size=G, local_size=L)
    dev.wait(s.record())
    out = np.zeros(N, np.uint32)
    dev.copyout(out, a)          # ordered after the stream's launch
    assert (out == 1).all()


def test_closed_streams_give_their_queue_back(dev: Any) -> None:
    before = dev.os.live_objects()
    s = dev.stream()
    s.close()
    s.close()
    if dev.name.startswith("mock-amd"):
        dev.trim_pool()  # the ring's memory went to the pool first
        assert dev.os.live_objects() == before and len(dev._rings) == 2
    else:  # NVIDIA keeps the channel for the next stream
        s2 = dev.stream()
        assert len(dev.channels) == 3
        s2.close()
    with pytest.raises(Exception, match="closed"):
        s.launch(_inc(dev), dev.alloc(64), 1)


def test_copyout_async_returns_something_to_wait_on(dev: Any) -> None:
    src = dev.alloc(1 << 20)
    data = np.random.default_rng(1).integers(0, 1 << 32, (1 << 20) // 4, dtype=np.uint32)
    dev.copyin(src, data)
    out = np.zeros_like(data)
    pending = dev.copyout_async(out, src)
    pending.wait()
    assert pending.done() and np.array_equal(out, data)
    pending.wait()  # idempotent
    hits = dev.pool_stats().hits
    again = np.zeros_like(data)
    p2 = dev.copyout_async(again, src)
    assert dev.pool_stats().hits == hits + 1  # its pinned memory came from the pool
    p2.wait()
    assert np.array_equal(again, data)
    empty = dev.copyout_async(bytearray(0), src)
    empty.wait()


def test_graph_with_copies_and_waits(dev: Any) -> None:
    inc = _inc(dev)
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    dev.copyin(a, np.zeros(N, np.uint32))
    gate = dev.new_signal(1)
    g = dev.graph([Launch(inc, (a, N), G, L), GraphCopy(b, a, 4 * N), GraphWait(gate, 1),
                   Launch(inc, (b, N), G, L)])
    assert g.replay(wait=True) is not None
    assert (_read(dev, a) == 1).all() and (_read(dev, b) == 2).all()
    g.replay(wait_values={0: 2})  # now waits for the gate to reach 2
    time.sleep(0.05)
    with pytest.raises(Exception, match="timed out"):
        dev.synchronize(timeout_ms=100)
    gate.value = 2
    dev.synchronize(timeout_ms=3000)
    assert (_read(dev, a) == 2).all() and (_read(dev, b) == 3).all()
    with pytest.raises(Exception, match="no wait 1"):
        g.replay(wait_values={1: 3})
    g.free()


@pytest.mark.nvidia
@needs_gpu
def test_streams_and_graph_nodes_on_the_gpu() -> None:
    """On a real NVIDIA GPU: stream channels added after the channel group was scheduled run,
    events order them, and a graph copies and waits."""
    from runtime.hcq import open_device
    d = open_device("nv:0")
    try:
        src = (Path(__file__).parent / "data" / "nv_kernels.cu").read_text()
        inc = d.program(d.compile(src), "inc")
        a, b = d.alloc(4 * N), d.alloc(4 * N)
        d.copyin(a, np.arange(N, dtype=np.uint32))
        s1, s2 = d.stream(), d.stream()
        s1.wait(d.record())
        for _ in range(3):
            s1.launch(inc, a, N, global_size=G, local_size=L)
        s2.wait(s1.record())
        s2.launch(inc, a, N, global_size=G, local_size=L)
        s2.copy(b, a, 4 * N)
        d.synchronize(timeout_ms=10_000)
        assert np.array_equal(_read(d, b), np.arange(N) + 4)
        gate = d.new_signal(1)
        g = d.graph([Launch(inc, (a, N), G, L), GraphCopy(b, a, 4 * N), GraphWait(gate, 1),
                     Launch(inc, (b, N), G, L)])
        assert g.replay(wait=True, timeout_ms=10_000) is not None
        assert np.array_equal(_read(d, b), np.arange(N) + 6)
        t = inc(a, N, global_size=G, local_size=L, wait=True)
        assert t is not None and 0 < t < 0.1
        pending = d.copyout_async(np.zeros(N, np.uint32), a)
        pending.wait(timeout_ms=10_000)
    finally:
        d.close()
