"""Graph launches with `early_start` (programmatic dependent launch): the QMD fields the NVIDIA
driver writes on a linked edge, the results on mock-nv, the mock's refusal of any other
combination of those fields, the refusal of a PTX kernel that never waits, the edges where the
flag is ignored (fan-out, AMD) staying correct, and the PTX interpreter's griddepcontrol."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import DeviceFault, Launch, ProgramError

N = 64
GS, LS = (N // 32, 1, 1), (32, 1, 1)
SRC = """
extern "C" __global__ void pstep(const unsigned *src, unsigned *dst, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  asm volatile("griddepcontrol.launch_dependents;");
  if (i < n) dst[i] = src[n - 1 - i] + 1; }
extern "C" __global__ void step(const unsigned *src, unsigned *dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[n - 1 - i] + 1; }
"""
PRODUCER = ("ENABLE_PROGRAM_PRE_EXIT", "ARRIVE_AT_LATCH_VALID")
CONSUMER = ("WAIT_ON_LATCH_VALID", "LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE",
            "LATCH_ACQUIRE_INVALIDATE_TEXTURE_DATA_CACHE")


@pytest.fixture
def nv() -> Iterator[Any]:
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.hcq import NVDevice
    d = NVDevice("nv:0", os=NvMockOS.with_nv_gpus(1))
    d.default_timeout_ms = 5000.0
    lib = d.compiler.compile(SRC, "pdl.cu")
    d.pstep, d.step = d.program(lib, "pstep"), d.program(lib, "step")
    yield d
    d.close()


def _bufs(d: Any) -> tuple[Any, Any]:
    a, b = d.alloc(4 * N), d.alloc(4 * N)
    d.copyin(a, np.zeros(N, np.uint32))
    d.copyin(b, np.full(N, 0xDEAD, np.uint32))
    return a, b


def _chain(d: Any, a: Any, b: Any, count: int, prg: Any = None) -> Any:
    prg = prg or d.pstep
    return d.graph([Launch(prg, (a, b, N) if i % 2 == 0 else (b, a, N), GS, LS,
                           early_start=True) for i in range(count)])


def _down(d: Any, buf: Any) -> np.ndarray:
    out = np.zeros(N, np.uint32)
    d.copyout(out, buf)
    return out


def _qmds(d: Any, g: Any) -> list[Any]:
    return [d.qmd_class(bytearray(k.qmd)) for k in g.kernargs]


def test_a_chain_starts_early_with_one_latch_per_edge_and_gives_the_serial_result(nv: Any) -> None:
    a, b = _bufs(nv)
    g = _chain(nv, a, b, 6)
    cmds = " ".join(g.body.describe_commands())
    assert "WAIT_FOR_IDLE" not in cmds and cmds.count("SEND_PCAS_A") == 1
    qs = _qmds(nv, g)
    for i, q in enumerate(qs):
        has_next, has_prev = i < len(qs) - 1, i > 0
        assert [q.get(f) for f in PRODUCER] == [int(has_next)] * 2
        assert q.get("ARRIVE_AT_LATCH_ID") == (i + 1 if has_next else 0)
        assert [q.get(f) for f in CONSUMER] == [int(has_prev)] * 3
        assert q.get("WAIT_ON_LATCH_ID") == (i if has_prev else 0)
    for r in range(3):
        g.replay(wait=True)
        assert (_down(nv, a) == 6 * (r + 1)).all()
        assert (_down(nv, b) == 6 * (r + 1) - 1).all()


def test_without_early_start_no_latch_field_is_written(nv: Any) -> None:
    a, b = _bufs(nv)
    g = nv.graph([Launch(nv.pstep, (a, b, N) if i % 2 == 0 else (b, a, N), GS, LS)
                  for i in range(3)])
    for q in _qmds(nv, g):
        assert all(q.get(f) == 0 for f in PRODUCER + CONSUMER)


def test_a_fan_out_ignores_early_start_and_stays_correct(nv: Any) -> None:
    a, b = _bufs(nv)
    c = nv.alloc(4 * N)
    g = nv.graph([Launch(nv.pstep, (a, b, N), GS, LS, name="top"),
                  Launch(nv.pstep, (b, a, N), GS, LS, after=("top",), early_start=True),
                  Launch(nv.pstep, (b, c, N), GS, LS, after=("top",), early_start=True)])
    for q in _qmds(nv, g):
        assert all(q.get(f) == 0 for f in PRODUCER + CONSUMER)
    g.replay(wait=True)
    assert (_down(nv, a) == 2).all() and (_down(nv, c) == 2).all()


def test_a_ptx_kernel_that_never_waits_is_refused_naming_it(nv: Any) -> None:
    a, b = _bufs(nv)
    with pytest.raises(ProgramError, match=r"graph node 0: kernel step .*griddepcontrol\.wait"):
        _chain(nv, a, b, 2, nv.step)


WAIT_IN_CALLEE = """
__device__ __noinline__ void dep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __noinline__ void unused_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
extern "C" __global__ void via_call(const unsigned *src, unsigned *dst, int n) {
  dep_wait();
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[n - 1 - i] + 1; }
extern "C" __global__ void no_call(const unsigned *src, unsigned *dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[n - 1 - i] + 1; }
extern "C" __global__ void keep(void) { unused_wait(); }
"""


def test_the_wait_counts_in_a_called_function_but_not_in_one_the_kernel_never_calls(
        nv: Any) -> None:
    lib = nv.compiler.compile(WAIT_IN_CALLEE, "callee.cu")
    via_call, no_call = nv.program(lib, "via_call"), nv.program(lib, "no_call")
    a, b = _bufs(nv)
    g = _chain(nv, a, b, 4, via_call)
    g.replay(wait=True)
    assert (_down(nv, a) == 4).all()
    # the module has a function with the wait, but no_call never calls it
    with pytest.raises(ProgramError, match=r"graph node 0: kernel no_call .*griddepcontrol"):
        _chain(nv, a, b, 2, no_call)


def test_a_queue_link_with_early_start_refuses_a_kernel_that_never_waits(nv: Any) -> None:
    a, b = _bufs(nv)
    ka = [nv.step.fill_kernargs((a, b, N), GS, LS), nv.step.fill_kernargs((b, a, N), GS, LS)]
    q = nv.compute_queue().exec(nv.step, ka[0], GS, LS)
    with pytest.raises(ProgramError, match=r"exec_after\(early_start=True\): kernel step "):
        q.exec_after(ka[0], nv.step, ka[1], GS, LS, early_start=True)
    q.exec_after(ka[0], nv.step, ka[1], GS, LS)  # without the promise: an ordinary link
    q.submit()
    nv.synchronize()
    assert (_down(nv, a) == 2).all()


@pytest.mark.parametrize("tamper,match", [
    # producer pre-exits but arrives nowhere
    (lambda qs: qs[0].set("ARRIVE_AT_LATCH_VALID", 0), "ARRIVE_AT_LATCH_VALID=0"),
    # the consumer waits on another latch than its producer arrives at
    (lambda qs: qs[1].set("WAIT_ON_LATCH_ID", 77), "WAIT_ON_LATCH_ID=0x4d"),
    # the consumer of an early start does not wait
    (lambda qs: qs[1].set("WAIT_ON_LATCH_VALID", 0), "WAIT_ON_LATCH_VALID=0"),
    (lambda qs: qs[1].set("LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE", 0),
     "LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE=0"),
    # the first grid waits on a latch, but no predecessor started it
    (lambda qs: qs[0].write(WAIT_ON_LATCH_VALID=1, WAIT_ON_LATCH_ID=5),
     "WAIT_ON_LATCH_VALID set on a grid no pre-exiting"),
    # a pre-exiting grid with a second link would start that one early too
    (lambda qs: qs[0].set_dependent(1, qs[2].data and 0x100000), "2 linked dependent QMDs"),
])
def test_the_mock_refuses_any_other_combination_naming_the_field(nv: Any, tamper: Any,
                                                                 match: str) -> None:
    a, b = _bufs(nv)
    g = _chain(nv, a, b, 3)
    qs = _qmds(nv, g)
    tamper(qs)
    for k, q in zip(g.kernargs, qs):
        k.qmd[:] = q.data
    with pytest.raises(DeviceFault, match="(?s)Xid 13.*" + match):
        g.replay(wait=True)


def test_amd_ignores_early_start_and_stays_correct() -> None:
    from runtime.drivers.amd.compiler import AMDCompiler
    from runtime.drivers.amd.device import AMDDevice
    comp = AMDCompiler()
    if comp.available():
        pytest.skip(comp.available() or "")
    d = AMDDevice("mock-amd:0")
    try:
        lib = comp.compile("__kernel void step(__global const uint *s, __global uint *d, int n) {"
                           " int i = get_global_id(0); if (i < n) d[i] = s[n - 1 - i] + 1; }")
        prg = d.program(lib, "step")
        a, b = _bufs(d)
        g = d.graph([Launch(prg, (a, b, N) if i % 2 == 0 else (b, a, N), GS, LS,
                            early_start=True) for i in range(5)])
        g.replay(wait=True)
        assert (_down(d, b) == 5).all() and (_down(d, a) == 4).all()
    finally:
        d.close()
