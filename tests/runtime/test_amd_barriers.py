"""Barriers between dependent AMD dispatches, and the mock that tells when one is missing.

The builder ends every dispatch with EVENT_WRITE CS_PARTIAL_FLUSH and starts it with an ACQUIRE_MEM
of the per-CU caches (tinygrad's sequence). The mock models the dispatches of one
queue as concurrent until such a barrier orders them and faults on a data race, so these tests
remove barriers from real streams and expect the fault, and keep them and expect the results.
"""
from __future__ import annotations

from array import array
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import DeviceFault, Launch

SRC = """
__kernel void fill(__global int *a, int v) { int i = get_global_id(0); a[i] = v + i; }
__kernel void twice(__global const int *a, __global int *b) {
  int i = get_global_id(0); b[i] = 2 * a[i]; }
__kernel void count(__global int *c) { atomic_add(c, 1); }
"""
N = 64


@pytest.fixture(scope="module")
def lib() -> bytes:
    from runtime.drivers.amd.compiler import AMDCompiler
    comp = AMDCompiler()
    if comp.available():
        pytest.skip(comp.available() or "")
    return comp.compile(SRC)


@pytest.fixture
def dev(lib: bytes) -> Iterator[Any]:
    from runtime.drivers.amd.device import AMDDevice
    d = AMDDevice("mock-amd:0")
    d.default_timeout_ms = 3000.0
    yield d
    d.close()


def _launch(d: Any, q: Any, prg: Any, *args: Any) -> Any:
    ka = prg.fill_kernargs(args, (N // 32, 1, 1), (32, 1, 1))
    return q.exec(prg, ka, (N // 32, 1, 1), (32, 1, 1))


def _without(q: Any, names: tuple[str, ...], gcr: int | None = None) -> array:
    """The queue's dwords minus the packets named (ACQUIRE_MEM only with GCR_CNTL `gcr`)."""
    from runtime.drivers.amd.decode import decode_pm4
    out = array("I")
    for pkt in decode_pm4(q.dwords(), arch=q.device.gfx):
        if pkt.name in names and (gcr is None or pkt.fields.get("gcr_cntl") == gcr):
            continue
        out.extend(pkt.dwords)
    return out


def _submit_raw(d: Any, words: array) -> None:
    from runtime.hcq.queue import extend_from
    v = d.timeline_value + 1
    q = d.compute_queue().wait(d.timeline_signal, v - 1)
    extend_from(q, words)
    d.submit_timeline(q.signal(d.timeline_signal, v), v)
    d.synchronize()


def test_every_dispatch_is_fenced_by_a_partial_flush_and_a_cache_invalidation(dev: Any,
                                                                             lib: bytes) -> None:
    from runtime.drivers.amd.decode import decode_pm4
    fill, twice = dev.program(lib, "fill"), dev.program(lib, "twice")
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    q = dev.compute_queue()
    _launch(dev, q, fill, a, 1)
    _launch(dev, q, twice, a, b)
    names = [(p.name, p.fields) for p in decode_pm4(q.dwords(), arch=dev.gfx)]
    disp = [i for i, (n, _) in enumerate(names) if n == "PACKET3_DISPATCH_DIRECT"]
    assert len(disp) == 2
    for i in disp:
        assert names[i + 1] == ("PACKET3_EVENT_WRITE", {"event_type": 7, "event_index": 4})
        before = [f for n, f in names[:i] if n == "PACKET3_ACQUIRE_MEM"]
        assert before and before[-1]["gcr_cntl"] == dev.gfx.acquire_mem_dispatch == 0x3F0
    # EVENT_TYPE CS_PARTIAL_FLUSH (7), EVENT_INDEX 4
    assert dev.pm4_encoding.cs_partial_flush_event == 0x407


def test_dependent_dispatches_with_barriers_compute_the_right_result(dev: Any, lib: bytes) -> None:
    fill, twice = dev.program(lib, "fill"), dev.program(lib, "twice")
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    q = dev.compute_queue()
    _launch(dev, q, fill, a, 5)
    _launch(dev, q, twice, a, b)
    _submit_raw(dev, array("I", q.dwords()))
    out = np.zeros(N, np.int32)
    dev.copyout(out, b)
    assert np.array_equal(out, 2 * (5 + np.arange(N)))


@pytest.mark.parametrize("second,hazard", [("twice", "read-after-write"),
                                           ("fill", "write-after-write")])
def test_a_missing_partial_flush_is_a_hazard(dev: Any, lib: bytes, second: str,
                                             hazard: str) -> None:
    fill, other = dev.program(lib, "fill"), dev.program(lib, second)
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    q = dev.compute_queue()
    _launch(dev, q, fill, a, 1)
    _launch(dev, q, other, *((a, b) if second == "twice" else (a, 2)))
    with pytest.raises(DeviceFault, match=f"{hazard} hazard on bytes \\[{a.va:#x}, "
                                          f"{a.va + 4 * N:#x}\\).*no barrier orders them"):
        _submit_raw(dev, _without(q, ("PACKET3_EVENT_WRITE",)))


def test_a_missing_cache_invalidation_is_a_stale_read(dev: Any, lib: bytes) -> None:
    fill, twice = dev.program(lib, "fill"), dev.program(lib, "twice")
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    q = dev.compute_queue()
    _launch(dev, q, fill, a, 1)
    _launch(dev, q, twice, a, b)
    with pytest.raises(DeviceFault, match="stale-cache hazard.*GLV_INV"):
        _submit_raw(dev, _without(q, ("PACKET3_ACQUIRE_MEM",), dev.gfx.acquire_mem_dispatch))


def test_independent_or_atomic_dispatches_need_no_barrier(dev: Any, lib: bytes) -> None:
    """The mock does not call every unordered pair a race: disjoint buffers and atomics on the
    same counter are fine, and a wait on the queue's own end-of-pipe release orders too."""
    fill, count = dev.program(lib, "fill"), dev.program(lib, "count")
    a, b, c = dev.alloc(4 * N), dev.alloc(4 * N), dev.alloc(4)
    dev.copyin(c, np.zeros(1, np.int32))
    q = dev.compute_queue()
    _launch(dev, q, fill, a, 1)
    _launch(dev, q, fill, b, 2)
    _launch(dev, q, count, c)
    _launch(dev, q, count, c)
    _submit_raw(dev, _without(q, ("PACKET3_EVENT_WRITE",)))
    out = np.zeros(1, np.int32)
    dev.copyout(out, c)
    assert out[0] == 2 * N
    sig = dev.new_signal(0)
    q = dev.compute_queue()
    _launch(dev, q, fill, a, 3)
    q.signal(sig, 1).wait(sig, 1)  # RELEASE_MEM at end of pipe (with invalidation), then wait
    _launch(dev, q, dev.program(lib, "twice"), a, b)
    _submit_raw(dev, _without(q, ("PACKET3_EVENT_WRITE",)))
    dev.copyout(out, b)
    assert out[0] == 6


def test_graph_bodies_order_their_dependent_launches(dev: Any, lib: bytes) -> None:
    fill, twice = dev.program(lib, "fill"), dev.program(lib, "twice")
    a, b, c = dev.alloc(4 * N), dev.alloc(4 * N), dev.alloc(4 * N)
    g = dev.graph([Launch(fill, (a, 7), (N // 32, 1, 1), (32, 1, 1)),
                   Launch(twice, (a, b), (N // 32, 1, 1), (32, 1, 1)),
                   Launch(twice, (b, c), (N // 32, 1, 1), (32, 1, 1))])
    g.replay(wait=True)
    out = np.zeros(N, np.int32)
    dev.copyout(out, c)
    assert np.array_equal(out, 4 * (7 + np.arange(N)))


def test_overlap_helpers() -> None:
    from runtime.drivers.mock.amd_hazards import merge, overlap
    assert merge([(5, 8), (0, 2), (1, 3), (8, 9)]) == [(0, 3), (5, 9)]
    assert overlap([(0, 3), (5, 9)], [(3, 5)]) is None
    assert overlap([(0, 3), (5, 9)], [(3, 6), (7, 8)]) == (5, 6)
