"""A kernel that never ends, on the mock AMD GPU through the runtime: the host is not hung (the
mock runs dispatches in time slices), the wait raises SignalTimeout within its timeout naming
each wave's program counter and instruction, the compute queue is reset, and the device keeps
working afterwards."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest

from runtime.hcq import SignalTimeout

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
