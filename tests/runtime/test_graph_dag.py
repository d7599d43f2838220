"""Graphs whose nodes name their dependencies: validation, the ordering each driver emits, the mock
AMD hazard model confirming every edge (and catching a dropped one), and random DAGs on mock-amd
and mock-nv giving the results of the serial order."""
from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.hcq import (DeviceFault, GraphCopy, GraphWait, HCQError, Launch, MemKind,
                         ProgramError)

N = 64  # elements per buffer: two workgroups of 32
HAVE_NV = os.path.exists("/dev/nvidiactl") and os.path.exists("/dev/nvidia-uvm")

CL_SRC = """
__kernel void fill(__global int *a, int v) { int i = get_global_id(0); a[i] = v + i; }
__kernel void twice(__global const int *a, __global int *b) {
  int i = get_global_id(0); b[i] = 2 * a[i]; }
__kernel void axpb(__global int *dst, __global const int *src, int c) {
  int i = get_global_id(0); dst[i] = dst[i] * 3 + src[i] + c; }
"""
CU_SRC = """
extern "C" __global__ void fill(int *a, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; a[i] = v + i; }
extern "C" __global__ void twice(const int *a, int *b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; b[i] = 2 * a[i]; }
extern "C" __global__ void axpb(int *dst, const int *src, int c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; dst[i] = dst[i] * 3 + src[i] + c; }
"""
STEP_SRC = """
extern "C" __global__ void step(const unsigned *src, unsigned *dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[n - 1 - i] + 1; }
extern "C" __global__ void join(unsigned *d, const unsigned *b, const unsigned *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) d[i] = d[i] * 3u + b[i] + 2u * c[i]; }
"""
GS, LS = (N // 32, 1, 1), (32, 1, 1)


def _open(kind: str, own: bool = False) -> Any:
    """A device of `kind` with the test kernels; `own`: mock-amd on a mock machine of its own
    (tests that open one while the module's `dev` may still hold the shared machine's GPU)."""
    if kind == "mock-amd":
        from runtime.drivers.amd.compiler import AMDCompiler
        from runtime.drivers.amd.device import AMDDevice
        from runtime.drivers.mock.os import MockOS
        comp = AMDCompiler()
        if comp.available():
            pytest.skip(comp.available() or "")
        d = AMDDevice("amd:0", os=MockOS.with_amd_gpus(1)) if own else AMDDevice("mock-amd:0")
        lib = comp.compile(CL_SRC)
    else:
        from runtime.hcq import NVDevice
        if kind == "nv":
            d = NVDevice("nv:0")
        else:
            from runtime.drivers.mock.nv_rm import NvMockOS
            d = NVDevice("nv:0", os=NvMockOS.with_nv_gpus(1))
        lib = d.compiler.compile(CU_SRC + STEP_SRC, "dag.cu")
    d.default_timeout_ms = 5000.0
    d.kern = {k: d.program(lib, k) for k in ("fill", "twice", "axpb")}
    return d


@pytest.fixture(scope="module", params=[
    "mock-amd", "mock-nv",
    pytest.param("nv", marks=[pytest.mark.nvidia, pytest.mark.skipif(
        not HAVE_NV, reason="no NVIDIA GPU here (/dev/nvidiactl or /dev/nvidia-uvm is absent)")])])
def dev(request: pytest.FixtureRequest) -> Iterator[Any]:
    d = _open(request.param)
    d.kind = request.param
    yield d
    d.close()


def _up(d: Any, arr: np.ndarray) -> Any:
    b = d.alloc(arr.nbytes)
    d.copyin(b, arr)
    return b


def _down(d: Any, b: Any) -> np.ndarray:
    out = np.zeros(N, np.int32)
    d.copyout(out, b)
    return out


# ------------------------------------------------------------------------------ validation
def test_bad_dependencies_are_refused_naming_the_node(dev: Any) -> None:
    fill = dev.kern["fill"]
    a = dev.alloc(4 * N)
    before = dev.mem_info().free_B

    def launch(**kw: Any) -> Launch:
        return Launch(fill, (a, 1), GS, LS, **kw)
    cases = [
        ([launch(), launch(after=(5,))], "node 1 depends on node 5, but the graph has nodes 0 to 1"),
        ([launch(), launch(after=("x",))], "node 1 depends on 'x', but no node has that name"),
        ([launch(name="me", after=("me",))], "node 0 ('me') depends on itself"),
        ([launch(after=(1,)), launch(after=(0,))], "cycle: node 0 depends on node 1 depends on "
                                                   "node 0"),
        ([launch(name="a", after=()), launch(name="b", after=("c",)),
          launch(name="c", after=("b",))], "cycle: node 1 ('b') depends on node 2 ('c') "
                                           "depends on node 1 ('b')"),
        ([launch(name="a"), launch(name="a")], "graph nodes 0 and 1 are both named 'a'"),
        ([launch(after=(1.5,))], "after= takes node indices or names, got 1.5"),
        ([launch(name="")], "name must be a non-empty string"),
    ]
    for nodes, msg in cases:
        with pytest.raises(ProgramError) as ei:
            dev.graph(nodes)
        assert isinstance(ei.value, HCQError)
        assert msg in str(ei.value), (msg, str(ei.value))
    assert dev.mem_info().free_B == before  # a refused graph allocates nothing
    dev.free(a)


def test_after_accepts_one_reference_and_names(dev: Any) -> None:
    fill, twice = dev.kern["fill"], dev.kern["twice"]
    a, b = dev.alloc(4 * N), dev.alloc(4 * N)
    g = dev.graph([Launch(twice, (a, b), GS, LS, after="f"),
                   Launch(fill, (a, 7), GS, LS, name="f", after=())])
    assert g.deps == [(1,), ()]
    assert g.order == [1, 0]
    g.replay(wait=True)
    assert (_down(dev, b) == 2 * (7 + np.arange(N))).all()
    g.free()
    dev.free(a)
    dev.free(b)


# ------------------------------------------------------------------------------ AMD: edges as barriers
def _hazard_graph(d: Any, drop_edge: bool) -> Any:
    fill, twice = d.kern["fill"], d.kern["twice"]
    a, b = d.alloc(4 * N), d.alloc(4 * N)
    g = d.graph([Launch(fill, (a, 5), GS, LS, name="w"),
                 Launch(twice, (a, b), GS, LS, after=() if drop_edge else ("w",))])
    return g, b


def test_amd_an_edge_is_a_barrier_and_the_hazard_model_confirms_it() -> None:
    d = _open("mock-amd", own=True)
    try:
        g, b = _hazard_graph(d, drop_edge=False)
        names = [p.name.removeprefix("PACKET3_") for p in _packets(g.body)]
        i, j = names.index("DISPATCH_DIRECT"), len(names) - 1 - names[::-1].index(
            "DISPATCH_DIRECT")
        assert "EVENT_WRITE" in names[i:j]  # CS_PARTIAL_FLUSH between the two dispatches
        g.replay(wait=True)
        assert (_down(d, b) == 2 * (5 + np.arange(N))).all()
    finally:
        d.close()


def test_amd_dropping_the_edge_is_caught_by_the_hazard_model() -> None:
    d = _open("mock-amd", own=True)
    try:
        g, _ = _hazard_graph(d, drop_edge=True)
        names = [p.name.removeprefix("PACKET3_") for p in _packets(g.body)]
        assert "EVENT_WRITE" not in names  # independent dispatches carry no barrier
        with pytest.raises(DeviceFault, match="(?i)hazard|race"):
            g.replay(wait=True)
    finally:
        d.close()


def test_amd_independent_dispatches_carry_no_barrier() -> None:
    d = _open("mock-amd", own=True)
    try:
        fill = d.kern["fill"]
        bufs = [d.alloc(4 * N) for _ in range(4)]
        g = d.graph([Launch(fill, (b, i), GS, LS, after=()) for i, b in enumerate(bufs)])
        names = [p.name.removeprefix("PACKET3_") for p in _packets(g.body)]
        assert names.count("DISPATCH_DIRECT") == 4 and "EVENT_WRITE" not in names
        g.replay(wait=True)
        for i, b in enumerate(bufs):
            assert (_down(d, b) == i + np.arange(N)).all()
    finally:
        d.close()


def _packets(q: Any) -> list[Any]:
    from runtime.drivers.amd.decode import decode_pm4
    return list(decode_pm4(q.dwords(), arch=q.device.gfx))



# ------------------------------------------------------------------------------ NVIDIA: QMD links
def _nv_commands(g: Any) -> list[str]:
    return [c.split()[2] for c in g.body.describe_commands() if len(c.split()) > 2]


def test_nv_a_chain_is_linked_through_the_qmds_without_wait_for_idle() -> None:
    d = _open("mock-nv")
    try:
        fill, twice = d.kern["fill"], d.kern["twice"]
        a, b = d.alloc(4 * N), d.alloc(4 * N)
        g = d.graph([Launch(fill, (a, 3), GS, LS), Launch(twice, (a, b), GS, LS),
                     Launch(twice, (b, a), GS, LS)])
        cmds = " ".join(g.body.describe_commands())
        assert "WAIT_FOR_IDLE" not in cmds
        assert cmds.count("SEND_PCAS_A") == 1  # only the first is sent; its QMD schedules the rest
        q0 = d.qmd_class(bytearray(g.kernargs[0].qmd)).decode()
        assert q0["DEPENDENT_QMD0_POINTER"] << 8 == g.kernargs[1].va + twice.qmd_offset(
            g.kernargs[1].va)
        qs = [d.qmd_class(bytearray(k.qmd)) for k in g.kernargs]
        # grids that start the next one complete with a GPU-scope barrier and task chasing (as
        # CUDA's graphs do); the last one, whose completion the host waits for, at system scope
        l1, sysm = (qs[0].value("CWD_MEMBAR_TYPE_" + v) for v in ("L1_MEMBAR", "L1_SYSMEMBAR"))
        assert [q.get("CWD_MEMBAR_TYPE") for q in qs] == [l1, l1, sysm]
        assert [q.get("CWD_MEMBAR_TASK_CHASING_ENABLE") for q in qs] == [1, 1, 0]
        for _ in range(3):
            g.replay(wait=True)
        assert (_down(d, a) == 4 * (3 + np.arange(N))).all()
    finally:
        d.close()


def test_nv_fan_in_and_wide_fan_out_fall_back_to_wait_for_idle() -> None:
    d = _open("mock-nv")
    try:
        fill, axpb = d.kern["fill"], d.kern["axpb"]
        bufs = [d.alloc(4 * N) for _ in range(5)]
        nodes = [Launch(fill, (bufs[0], 1), GS, LS, name="root")]
        # four dependents of one launch: a V04 QMD schedules two, the others need a barrier
        nodes += [Launch(axpb, (bufs[i], bufs[0], i), GS, LS, after=("root",))
                  for i in range(1, 5)]
        nodes += [Launch(axpb, (bufs[0], bufs[1], 9), GS, LS, after=(1, 2))]  # fan-in
        for b in bufs[1:]:
            d.copyin(b, np.zeros(N, np.int32))
        g = d.graph(nodes)
        cmds = " ".join(g.body.describe_commands())
        assert "WAIT_FOR_IDLE" in cmds
        g.replay(wait=True)
        root = 1 + np.arange(N)
        for i in range(2, 5):
            assert (_down(d, bufs[i]) == root + i).all()
        assert (_down(d, bufs[0]) == root * 3 + (root + 1) + 9).all()
    finally:
        d.close()


def test_nv_independent_launches_are_sent_without_ordering() -> None:
    d = _open("mock-nv")
    try:
        fill = d.kern["fill"]
        bufs = [d.alloc(4 * N) for _ in range(4)]
        g = d.graph([Launch(fill, (b, i), GS, LS, after=()) for i, b in enumerate(bufs)])
        cmds = " ".join(g.body.describe_commands())
        assert cmds.count("SEND_PCAS_A") == 4 and "WAIT_FOR_IDLE" not in cmds
        g.replay(wait=True)
        for i, b in enumerate(bufs):
            assert (_down(d, b) == i + np.arange(N)).all()
    finally:
        d.close()


# ------------------------------------------------------------------------------ random DAGs
@st.composite
def dags(draw: Any) -> dict[str, Any]:
    """Nodes (kind, dst, src, c) on a few buffers, the edges their conflicts need (to the last
    writer of what a node touches, and from the readers since to a writer), random extra edges,
    and the order the nodes are listed in."""
    nbufs = draw(st.integers(2, 4))
    n = draw(st.integers(1, 9))
    nodes = []
    for _ in range(n):
        kind = draw(st.sampled_from(["axpb", "axpb", "axpb", "copy", "wait"]))
        dst, src = draw(st.integers(0, nbufs - 1)), draw(st.integers(0, nbufs - 1))
        if kind == "copy" and dst == src:
            src = (dst + 1) % nbufs
        nodes.append((kind, dst, src, draw(st.integers(0, 50))))
    deps: list[set[int]] = []
    last_write: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    for i, (kind, dst, src, _) in enumerate(nodes):
        e: set[int] = set()
        if kind != "wait":
            for b in {dst, src}:
                if b in last_write:
                    e.add(last_write[b])
            e.update(readers.get(dst, []))
            readers.setdefault(src, []).append(i)
            readers[dst] = []
            last_write[dst] = i
        extra = draw(st.lists(st.integers(0, max(0, i - 1)), max_size=2)) if i else []
        e.update(extra)
        deps.append(e)
    perm = draw(st.permutations(range(n)))
    refs = draw(st.lists(st.booleans(), min_size=n, max_size=n))  # by name or by index
    return {"nbufs": nbufs, "nodes": nodes, "deps": deps, "perm": perm, "by_name": refs}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(spec=dags())
def test_random_dags_give_the_serial_result(dev: Any, spec: dict[str, Any]) -> None:
    rng = np.random.default_rng(len(spec["nodes"]))
    init = [rng.integers(-100, 100, N).astype(np.int32) for _ in range(spec["nbufs"])]
    bufs = [_up(dev, a) for a in init]
    gate = dev.new_signal(1)
    ref = [a.copy() for a in init]
    for kind, dst, src, c in spec["nodes"]:  # the serial order: node generation order
        if kind == "axpb":
            ref[dst] = ref[dst] * 3 + ref[src] + c
        elif kind == "copy":
            ref[dst] = ref[src].copy()
    perm = spec["perm"]  # node i is listed at position pos[i]
    pos = {i: p for p, i in enumerate(perm)}
    listed: list[Any] = [None] * len(perm)
    for i, (kind, dst, src, c) in enumerate(spec["nodes"]):
        after = tuple(f"n{j}" if spec["by_name"][j] else pos[j] for j in sorted(spec["deps"][i]))
        kw = {"after": after, "name": f"n{i}"}
        if kind == "axpb":
            node: Any = Launch(dev.kern["axpb"], (bufs[dst], bufs[src], c), GS, LS, **kw)
        elif kind == "copy":
            node = GraphCopy(bufs[dst], bufs[src], 4 * N, **kw)
        else:
            node = GraphWait(gate, 1, **kw)
        listed[pos[i]] = node
    g = dev.graph(listed)
    try:
        for replay in range(2):  # the second by the replay built on the first (native on NVIDIA)
            if replay:
                for b, a in zip(bufs, init):
                    dev.copyin(b, a)
            g.replay(wait=True)
            for b, want in zip(bufs, ref):
                got = _down(dev, b)
                assert (got == want).all(), (spec, replay, got[:4], want[:4])
    finally:
        g.free()
        for b in bufs:
            dev.free(b)
        gate.release()


def test_nv_a_launch_after_a_wait_or_a_call_still_waits_for_the_launches_before() -> None:
    """An acquire does not drain the engine, nor does a call: the next ordered launch of the
    queue needs WAIT_FOR_IDLE to follow the launches before them (a release with WFI drains)."""
    d = _open("mock-nv")
    try:
        fill = d.kern["fill"]
        a = d.alloc(4 * N)
        s = d.new_signal(1)

        def words(q: Any) -> str:
            return " ".join(q.describe_commands())
        ka, kb = (fill.fill_kernargs((a, i), GS, LS) for i in range(2))
        q = d.compute_queue().exec(fill, ka, GS, LS).wait(s, 1).exec(fill, kb, GS, LS)
        assert words(q).count("WAIT_FOR_IDLE") == 1
        body = d.compute_queue().exec(fill, ka, GS, LS).bind()
        q = d.compute_queue().call(body).exec(fill, kb, GS, LS)
        assert words(q).count("WAIT_FOR_IDLE") == 1
        q = d.compute_queue().exec(fill, ka, GS, LS).timestamp(s).exec(fill, kb, GS, LS)
        assert "WAIT_FOR_IDLE" not in words(q)  # the release with WFI drained the engine
        body.unbind()
        s.release()
    finally:
        d.close()


# ------------------------------------------------------------------------------ the real GPU, at scale
def _ping_pong(stp: Any, x: Any, y: Any, n: int, count: int, **kw: Any) -> list[Launch]:
    """`count` launches of y[i] = x[n-1-i] + 1 that alternate the two buffers (x to y first)."""
    return [Launch(stp, (x, y, n) if i % 2 == 0 else (y, x, n), (n // 256, 1, 1), (256, 1, 1),
                   **kw) for i in range(count)]


def _check_host_chain(dev: Any, stp: Any, nh: int, count: int, replays: int, **kw: Any) -> None:
    """The ping-pong chain over two host-memory buffers of `nh` elements, read by the CPU after
    each of `replays` replays: every element of both is checked."""
    ha, hb = (dev.alloc(4 * nh, kind=MemKind.HOST, cpu_access=True) for _ in range(2))
    va, vb = (np.frombuffer(h.cpu_view(), np.uint32) for h in (ha, hb))
    va[:] = 0
    vb[:] = 0xDEAD
    g = dev.graph(_ping_pong(stp, ha, hb, nh, count, **kw))
    for r in range(replays):
        g.replay(wait=True)
        assert int((va != count * (r + 1)).sum()) == 0
        assert int((vb != count * (r + 1) - 1).sum()) == 0
    g.free()
    for h in (ha, hb):
        dev.free(h)


def test_nv_dependent_chains_see_every_write_at_a_size_that_fills_the_gpu(dev: Any) -> None:
    """1000 launches y[i] = x[n-1-i] + 1 alternating two buffers of 2M elements (several waves of
    the whole GPU), linked through their QMDs, replayed three times; and 300 diamonds in a row
    (one launch feeding two, both feeding a join). Every element is checked."""
    if dev.kind != "nv":
        pytest.skip("the real GPU only (the mock runs grids one after another)")
    lib = dev.compiler.compile(STEP_SRC, "step.cu")
    stp, join = dev.program(lib, "step"), dev.program(lib, "join")
    n = 1 << 21
    gs = (n // 256, 1, 1)
    a, b = dev.alloc(4 * n), dev.alloc(4 * n)
    dev.copyin(a, np.zeros(n, np.uint32))
    dev.copyin(b, np.full(n, 0xDEAD, np.uint32))
    g = dev.graph(_ping_pong(stp, a, b, n, 1000))
    cmds = " ".join(g.body.describe_commands())
    assert "WAIT_FOR_IDLE" not in cmds and cmds.count("SEND_PCAS_A") == 1
    for _ in range(3):
        g.replay()
    dev.synchronize()
    out = np.zeros(n, np.uint32)
    dev.copyout(out, a)
    assert int((out != 3000).sum()) == 0
    g.free()
    # the same chain over host memory, read by the CPU: the grids that start the next one
    # complete with a GPU-scope barrier, and what they wrote must still reach the host (here the
    # buffer the second-to-last grid wrote last) once the last grid's completion is seen
    _check_host_chain(dev, stp, n // 8, 1000, 3)
    # diamond: a -> (b, c) -> d, 300 times in one graph
    c, d_ = dev.alloc(4 * n), dev.alloc(4 * n)
    nodes: list[Any] = []
    for k in range(300):
        top = len(nodes)
        nodes.append(Launch(stp, (d_, a, n), gs, (256, 1, 1), after=(top - 1,) if k else ()))
        nodes.append(Launch(stp, (a, b, n), gs, (256, 1, 1), after=(top,)))
        nodes.append(Launch(stp, (a, c, n), gs, (256, 1, 1), after=(top,)))
        nodes.append(Launch(join, (d_, b, c, n), gs, (256, 1, 1), after=(top + 1, top + 2)))
    dev.copyin(d_, np.zeros(n, np.uint32))
    g = dev.graph(nodes)
    g.replay(wait=True)
    ref = np.zeros(n, np.int64)
    for _ in range(300):
        av = ref[::-1] + 1
        bv = av[::-1] + 1
        ref = (ref * 3 + bv + 2 * bv) & 0xFFFFFFFF  # c is computed as b is
    got = np.zeros(n, np.uint32)
    dev.copyout(got, d_)
    assert (got == ref.astype(np.uint32)).all()
    g.free()
    for x in (a, b, c, d_):
        dev.free(x)


PSTEP_SRC = """
extern "C" __global__ void pstep(const unsigned *src, unsigned *dst, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[n - 1 - i] + 1; }
extern "C" __global__ void ptrig(const unsigned *src, unsigned *dst, int n) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[n - 1 - i] + 1; }
"""


@pytest.mark.parametrize("kernel", ["pstep", "ptrig"])
def test_nv_early_start_chains_see_every_write(dev: Any, kernel: str) -> None:
    """3000 launches y[i] = x[n-1-i] + 1 alternating two buffers, each edge with `early_start`
    (the successor starts at its predecessor's pre-exit and waits in griddepcontrol.wait): over
    VRAM (2M elements, several waves of the GPU), then over host memory read by the CPU after
    every replay. Every element is checked. `ptrig` lets its successor launch before it even
    waits (griddepcontrol.launch_dependents first), so every grid's CTAs may be resident while
    its predecessor's last wave still runs."""
    if dev.kind != "nv":
        pytest.skip("the real GPU only (the mock runs grids one after another)")
    stp = dev.program(dev.compiler.compile(PSTEP_SRC, "pstep.cu"), kernel)
    n = 1 << 21
    a, b = dev.alloc(4 * n), dev.alloc(4 * n)
    dev.copyin(a, np.zeros(n, np.uint32))
    dev.copyin(b, np.full(n, 0xDEAD, np.uint32))
    g = dev.graph(_ping_pong(stp, a, b, n, 3000, early_start=True))
    q1 = dev.qmd_class(bytearray(g.kernargs[1].qmd))
    assert q1.get("WAIT_ON_LATCH_VALID") == 1 and q1.get("ENABLE_PROGRAM_PRE_EXIT") == 1
    g.replay(wait=True)
    out = np.zeros(n, np.uint32)
    dev.copyout(out, a)
    assert int((out != 3000).sum()) == 0
    g.free()
    _check_host_chain(dev, stp, n // 8, 3000, 2, early_start=True)
    for x in (a, b):
        dev.free(x)


def test_early_start_chains_on_two_channels_at_once_keep_to_their_own_latches(dev: Any) -> None:
    """Latch ids are counted from 1 in every queue, so two early-start chains use the same ids:
    a graph's replay on the device's timeline and, at the same time, a chain recorded on a
    stream's channel (its queue linked with `exec_after(early_start=True)`). Each grid must
    still be started only by its own predecessor's arrival: both ping-pong chains give the
    serial result, every element checked, over five rounds of both at once."""
    if dev.kind == "mock-amd":
        pytest.skip("NVIDIA latches (AMD ignores early_start)")
    stp = dev.program(dev.compiler.compile(PSTEP_SRC, "pstep.cu"), "pstep")
    real = dev.kind == "nv"
    n, count, rounds = (1 << 16, 1000, 5) if real else (256, 6, 2)
    gs, ls = (n // 256, 1, 1), (256, 1, 1)
    a, b, c, d_ = (dev.alloc(4 * n) for _ in range(4))
    for x, v in ((a, 0), (b, 0xDEAD), (c, 0), (d_, 0xDEAD)):
        dev.copyin(x, np.full(n, v, np.uint32))
    g = dev.graph(_ping_pong(stp, a, b, n, count, early_start=True))
    s = dev.stream()
    q = s._make_queue()  # a queue on the stream's own channel
    assert q.channel is not g.body.channel
    size = -(-stp.kernargs_size() // 64) * 64
    args_buf = dev.alloc_kernargs(size * count)
    view = args_buf.cpu_view()
    kas = [stp.fill_kernargs(ln.args, gs, ls, (args_buf.va + i * size,
                                                view[i * size:(i + 1) * size]))
           for i, ln in enumerate(_ping_pong(stp, c, d_, n, count))]
    q.exec(stp, kas[0], gs, ls)
    for prev, ka in zip(kas, kas[1:]):
        q.exec_after(prev, stp, ka, gs, ls, early_start=True)
    done = dev.new_signal(0)
    q.signal(done, 1)
    ids = [dev.qmd_class(bytearray(k.qmd)).get("WAIT_ON_LATCH_ID") for k in g.kernargs[1:4]]
    assert ids == [dev.qmd_class(bytearray(k.qmd)).get("WAIT_ON_LATCH_ID") for k in kas[1:4]]
    assert all(ids)
    for r in range(rounds):
        done.value = 0
        q.submit()  # the stream's chain, then the graph's, with no order between them
        g.replay()
        done.wait(1, 20_000)
        dev.synchronize()
        for x, y in ((a, b), (c, d_)):
            out = np.zeros(n, np.uint32)
            dev.copyout(out, x)
            assert int((out != count * (r + 1)).sum()) == 0, (r, x)
            dev.copyout(out, y)
            assert int((out != count * (r + 1) - 1).sum()) == 0, (r, y)
    g.free()
    s.close()
    done.release()
    dev.free(args_buf)
    for x in (a, b, c, d_):
        dev.free(x)


SLOW_SRC = """
extern "C" __global__ void slow_set(unsigned *x, int n, unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 1; }
"""


def test_nv_a_replay_waits_for_the_timeline_work_still_running(dev: Any) -> None:
    """A replay leaves out its wait for the timeline's previous value only when the timeline has
    reached it. Here the previous value is a kernel that spins for 2 ms before it writes x = 1,
    launched just before the replay, whose first node reads x (y = x + 1): the replay must wait
    (y == 2), five times. Without the wait the same replay reads x before it is written (y ==
    1 somewhere): the check that this test can see a missing order."""
    if dev.kind != "nv":
        pytest.skip("the real GPU only (the mock runs grids one after another)")
    lib = dev.compiler.compile(SLOW_SRC + STEP_SRC, "slow.cu")
    slow, stp = dev.program(lib, "slow_set"), dev.program(lib, "step")
    n = 1 << 16
    x, y = dev.alloc(4 * n), dev.alloc(4 * n)
    g = dev.graph([Launch(stp, (x, y, n), (n // 256, 1, 1), (256, 1, 1))])
    g.replay(wait=True)

    def round_(replay: Any) -> np.ndarray:
        dev.copyin(x, np.zeros(n, np.uint32))
        dev.synchronize()
        slow(x, n, 2_000_000, global_size=(1, 1, 1), local_size=(256, 1, 1))
        replay()
        dev.synchronize()
        out = np.zeros(n, np.uint32)
        dev.copyout(out, y)
        return out

    for _ in range(5):
        assert int((round_(g.replay) != 2).sum()) == 0
    # the same body submitted without the wait (as a replay would that wrongly left it out)
    from runtime.hcq.queue import Var
    var = Var("timeline value")
    q = dev.compute_queue().update({var: 1})
    q.call(g.body)
    unordered = q.signal(dev.timeline_signal, var).resubmitter(var)

    def replay_unordered() -> None:
        with dev.submit_lock:
            dev.resubmit_timeline(unordered)
    assert int((round_(replay_unordered) == 1).sum()) > 0
    g.free()
    for b in (x, y):
        dev.free(b)
