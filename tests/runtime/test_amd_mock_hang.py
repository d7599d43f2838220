"""A kernel that never ends, on the mock AMD GPU through the runtime: the host is not hung (the
mock runs dispatches in time slices), the wait raises SignalTimeout within its timeout naming
each wave's program counter and instruction, the compute queue is reset, and the device keeps
working afterwards."""
from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest

from runtime.drivers.mock.host_races import HostHazard
from runtime.hcq import MemKind, SignalTimeout

from .rdna3_util import needs_compiler

SPIN = """
__kernel void spin(__global const int *flag, __global int *out) {
  int i = get_global_id(0);
  while (flag[0] == 0) { out[i] += 1; }
}
"""
STORE = "__kernel void store7(__global int *o) { o[get_global_id(0)] = 7; }"


@pytest.fixture
def dev():  # type: ignore[no-untyped-def]
    from runtime.hcq import AMDDevice
    d = AMDDevice("mock-amd:0")
    yield d
    d.close()


@needs_compiler
def test_never_ending_kernel_times_out_with_wave_pcs_and_device_recovers(dev):
    spin = dev.program(dev.compiler.compile(SPIN), "spin")
    flag, out = dev.alloc(4), dev.alloc(4 * 64)
    dev.copyin(flag, bytes(4))
    dev.copyin(out, bytes(4 * 64))
    t0 = time.perf_counter()
    with pytest.raises(SignalTimeout) as ei:
        spin(flag, out, global_size=(2, 1, 1), local_size=(32, 1, 1), wait=True,
             timeout_ms=300)
    took = time.perf_counter() - t0
    # Returns once the timeout passes (dispatches run in 10 ms slices); the upper bound only
    # separates "returned" from "hung", with room for a loaded 2-core CI machine.
    assert 0.3 <= took < 5.0
    msg = str(ei.value)
    assert "DISPATCH_DIRECT of the kernel at" in msg and "running for" in msg
    # each wave's program counter and the instruction there (LLVM syntax)
    assert re.search(r"waves 0-1 of workgroups 0-1: pc 0x[0-9a-f]+ [sv]_[a-z0-9_]+|"
                     r"waves 0-1 of workgroups 0-1: pc 0x[0-9a-f]+ global_[a-z0-9_]+", msg), msg
    assert "compute queue was reset" in msg
    # The device is usable: a new kernel runs and copies work.
    k = dev.program(dev.compiler.compile(STORE), "store7")
    o = dev.alloc(4 * 32)
    k(o, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True, timeout_ms=5000)
    got = np.empty(32, np.int32)
    dev.copyout(got, o)
    assert (got == 7).all()
    dev.synchronize(timeout_ms=5000)


@needs_compiler
def test_host_calls_are_served_while_a_long_dispatch_runs(dev):
    """The GPU's thread runs a long dispatch slice after slice under the mock kernel's lock; host
    calls into the mock kernel (allocations, waits) meanwhile get their turn between two slices
    instead of waiting for the dispatch to end."""
    spin = dev.program(dev.compiler.compile(SPIN), "spin")
    # the flag in host memory, so the host ends the kernel with a store
    flag = dev.alloc(4, kind=MemKind.GTT, cpu_access=True, uncached=True)
    out = dev.alloc(4 * 64)
    flag_host = np.frombuffer(flag.cpu_view(), np.int32)
    flag_host[0] = 0
    dev.copyin(out, bytes(4 * 64))
    spin(flag, out, global_size=(2, 1, 1), local_size=(32, 1, 1))
    slowest = 0.0
    for i in range(20):
        t0 = time.perf_counter()
        dev.free(dev.alloc(4096 * (i + 1)))  # sizes the pool has not seen: driver calls
        # a wait in the kernel, for a signal another host thread sets
        sig = dev.new_signal()
        setter = threading.Timer(0.002, lambda: setattr(sig, "value", 1))
        setter.start()
        sig.wait(1, timeout_ms=10_000)
        setter.join()
        slowest = max(slowest, time.perf_counter() - t0)
    # A slice is about 10 ms; a starved call waited seconds.
    assert slowest < 1.0, slowest
    # What the running dispatch touched is kept merged between slices (a range per access
    # otherwise: thousands a second). Read under the mock kernel's lock, so between two slices:
    # during one the GPU's thread adds a range per access.
    queues = dev.os.drivers[0].gpus[0].queues.values()
    with dev.os.lock:
        running = [q._running_mem for q in queues if getattr(q, "_running", None) is not None]
        counts = [{k: len(v) for k, v in rm.ranges.items()} for rm in running]
    assert running and all(n <= 8 for c in counts for n in c.values()), counts
    # (the race watch reports the store the kernel polls for, as it should)
    with pytest.warns(HostHazard, match="while the kernel"):
        flag_host[0] = 1
        dev.synchronize(timeout_ms=5000)


def test_a_queue_waiting_on_memory_is_not_reset(dev):
    """A timeout while the compute queue waits for a signal a host write can still release
    leaves the queue alone (test_amd_mock checks the state it reports)."""
    gate, done = dev.new_signal(), dev.new_signal()
    dev.compute_queue().wait(gate, 1).signal(done, 1).submit()
    with pytest.raises(SignalTimeout) as ei:
        done.wait(1, timeout_ms=50)
    assert "reset" not in str(ei.value)
    gate.value = 1
    done.wait(1, timeout_ms=1000)


# Waves spinning in twelve different loops, the loop picked by the wave's number, so each place
# holds waves scattered over the whole dispatch.
SPIN_MANY = "#define SPIN(k) case k: while (flag[0] == 0) { out[i] += k + 1; } break;\n" + """
__kernel void spin_many(__global const int *flag, __global int *out) {
  int i = get_global_id(0);
  switch ((i / 32) % 12) {
    SPIN(0) SPIN(1) SPIN(2) SPIN(3) SPIN(4) SPIN(5) SPIN(6) SPIN(7) SPIN(8) SPIN(9) SPIN(10)
    SPIN(11)
  }
}
"""


@needs_compiler
def test_the_timeout_report_stays_short_with_many_groups_of_waves(dev):
    """1024 waves at a dozen or more places: the report lists a bounded number of places, each
    with a bounded list of wave ranges, and counts the rest."""
    spin = dev.program(dev.compiler.compile(SPIN_MANY), "spin_many")
    n = 1024 * 32
    flag, out = dev.alloc(4), dev.alloc(4 * n)
    dev.copyin(flag, bytes(4))
    with pytest.raises(SignalTimeout) as ei:
        spin(flag, out, global_size=(n // 256, 1, 1), local_size=(256, 1, 1), wait=True,
             timeout_ms=300)
    msg = str(ei.value)
    report = msg[msg.index("DISPATCH_DIRECT of the kernel at"):]
    report = report[:report.index("\n")] if "\n" in report else report
    assert len(report) < 3000, report


def test_describe_skips_empty_groups_merges_places_and_counts_the_rest():
    """The report of a dispatch's waves, on a state set up by hand: 40 wave sets of one wave at 20
    program counters, with scattered waves, and empty wave sets."""
    from runtime.drivers.mock.memory import MockMemory
    from runtime.drivers.mock.rdna3 import Dispatch, DispatchRecord
    from runtime.drivers.mock.rdna3.machine import WaveSet
    from runtime.drivers.mock.rdna3.interp import DESCRIBE_MAX_PLACES
    mem = MockMemory()
    code_va = 0x10000
    mem.map(code_va, 0x1000)
    nop, branch_back = 0xBF800000, 0xBFA0FFFF - 30   # s_nop 0; s_branch to the first s_nop
    mem.write(code_va, np.array([nop] * 30 + [branch_back], np.uint32).tobytes())
    rec = DispatchRecord(code_va, rsrc1=0, rsrc2=0, rsrc3=0, user_sgprs=(), grid=(64, 1, 1),
                         block=(32, 1, 1), lds_bytes=0)
    run = Dispatch(rec, mem)
    assert not run.advance(0.0)    # stops at its first look at the clock, waves running
    m = run.machine
    assert m is not None and m.n_waves == 64
    running = list(run.wave_sets)   # put back afterwards: the paused run still owns them
    run.wave_sets[:] = [WaveSet(m, np.array([w, w + 32]), w % 20) for w in range(32)] + \
        [WaveSet(m, np.array([], dtype=np.int64), 3) for _ in range(100)]
    text = run.describe()
    places = text.split("; ")
    assert len(places) == DESCRIBE_MAX_PLACES + 1
    assert places[-1] == f"and waves at {20 - DESCRIBE_MAX_PLACES} other place(s)"
    # pc 0 holds waves 0, 20, 32 and 52 (two wave sets merged into one line)
    assert places[0].startswith("waves 0,20,32,52 of workgroups 0,20,32,52: pc 0x10000 s_nop 0")
    assert "waves  " not in text and len(text) < 2000
    run.wave_sets[:] = [WaveSet(m, np.arange(0, 64, 2), 5)]
    assert run.describe().startswith("waves 0,2,4,6,8,10,12,14,... (32 in all) of workgroups ")
    run.wave_sets[:] = running
