"""The NVIDIA launch is one description with two executors: the launch helper in C
(runtime/drivers/nv/_nvlaunch.c) is an accelerator of the Python launch, so the same script of
launches leaves the same bytes in the same places with the helper on and off: launch slots
(constant bank 0, parameters, QMD, command segments), pushbuffer, GPFIFO ring, USERD's GP_PUT,
the channel's and device's submission words, signal values, and what the mock GPU decoded from
every launch. The queue path and the hot path build the same launch block (one QMD builder), and
the launch fence is one method that every route emits."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runtime.drivers.mock.nv_gpu import Launch
from runtime.drivers.mock.nv_rm import NvMockOS
from runtime.drivers.nv.device import NVDevice
from runtime.drivers.nv.launcher import native_helper
from runtime.hcq import native
from runtime.hcq.errors import ProgramError

from .device_util import hold_timeline

CUBIN = (Path(__file__).parent / "data" / "nv_kernels_cuda13.cubin").read_bytes()


class _Rig:
    """A fresh deterministic mock GPU (HCQ_MOCK_SYNC must be set) with three programs whose
    launches a kernel model records, and small rings (so that scripts wrap them)."""

    def __init__(self, launch_native: bool) -> None:
        self.dev = d = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1), pushbuf_B=16384,
                                gpfifo_entries=16)
        d.launch_native = launch_native
        self.seen: list[tuple[Any, ...]] = []
        self.gpu = d.os.nv.gpus[0]  # type: ignore[attr-defined]
        self.vadd, self.many, self.inc = (d.program(CUBIN, k)
                                          for k in ("vadd", "many_params", "inc"))
        for p in (self.vadd, self.many, self.inc):
            self.gpu.register_kernel(p.prog_va, self._model)
        self.a, self.b, self.c = (d.alloc(4096) for _ in range(3))
        d.copyin(self.a, np.arange(1024, dtype=np.float32))

    def _model(self, launch: Launch) -> None:
        self.seen.append((launch.program_va, launch.grid, launch.block, launch.cb0_va,
                          launch.cb0, sorted(launch.qmd.items())))

    def many_args(self, f32: float = 1.5, i8: int = 100) -> tuple[Any, ...]:
        return (self.a, -3, 300, 70000, -(1 << 40), f32, 2.25, 7, -8, 3.125, -0.5, i8, 1 << 50,
                -12, 99, 0.75, -1e300)

    def snapshot(self) -> dict[str, Any]:
        """Everything the launches wrote that the GPU reads, and what the GPU decoded."""
        d = self.dev
        d.synchronize()
        ch = d.compute_channel
        out: dict[str, Any] = {
            "device_words": d.words.tolist(), "channel_words": ch.state.tolist(),
            "records": ch.records.tolist(), "ring": ch.ring.tolist(),
            "gp_put": ch.userd[0x8C // 4], "pushbuffer": ch.pb.tolist(),
            "timeline": d.timeline_signal.value, "progress": ch.progress.value,
            "launches": self.seen, "launch_count": self.gpu.launch_count,
        }
        for p in (self.vadd, self.many, self.inc):
            for shape, hot in sorted(p._hot.items()):
                if hot is not None:
                    off = hot.chunk_off
                    out[f"{p.name} {shape} slots"] = bytes(hot.buf.cpu_view()[off:off + (64 << 10)])
                    out[f"{p.name} {shape} state"] = hot.state.tolist()
        return out


def _script(launch_native: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Runs one fixed script of launches on a fresh deterministic mock GPU; returns the rig's
    snapshot."""
    monkeypatch.setenv("HCQ_MOCK_SYNC", "1")
    r = _Rig(launch_native)
    d, vadd, many, inc, a, b, c = r.dev, r.vadd, r.many, r.inc, r.a, r.b, r.c
    try:
        for i in range(40):  # wraps the slot ring and the 16-entry GPFIFO
            vadd(a, b, c, 100 + i, global_size=(2, 1, 1), local_size=(64, 1, 1))
            if i % 7 == 3:  # work of another channel breaks the chain: the next launch acquires
                d.copyin(b, np.full(1024, i, np.float32))
            if i % 5 == 0:
                vadd(a, b, c, np.int32(i), global_size=(2, 1, 1), local_size=(64, 1, 1))
            if i % 6 == 0:  # 200 does not pack as int8: the careful path stores it
                many(*r.many_args(i8=200), global_size=(1, 2, 1), local_size=(32, 1, 1))
            if i % 11 == 5:  # a float beyond a 4-byte slot: refused by name, nothing launched
                with pytest.raises(ProgramError, match="4-B float argument 'arg5'"):
                    many(*r.many_args(f32=1e300), global_size=(1, 2, 1), local_size=(32, 1, 1))
            if i % 9 == 0:
                inc(a, 0xFFFFFFFF, global_size=(1, 1, 1), local_size=(32, 1, 1))  # careful path
                vadd(a, b, c, 5, global_size=(2, 1, 1), local_size=(64, 1, 1), wait=True)
        return r.snapshot()
    finally:
        d.close()


def test_the_native_launch_and_the_python_launch_write_the_same_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if native_helper() is None:
        pytest.skip(f"native launch helper unavailable: {native.unavailable}")
    with_c = _script(True, monkeypatch)
    without = _script(False, monkeypatch)
    assert with_c["launch_count"] == without["launch_count"] == 65
    assert with_c.keys() == without.keys()
    for key in with_c:
        assert with_c[key] == without[key], key


REPLAYS = 300


def _replay_script(launch_native: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Graph replays laid out once, among hot launches and copies, on a fresh deterministic mock
    GPU with small rings (the replays wrap the pushbuffer and the GPFIFO, and wait for room);
    returns the rig's snapshot and the graphs' results."""
    from runtime.hcq import GraphCopy, GraphWait
    from runtime.hcq import Launch as GraphLaunch
    monkeypatch.setenv("HCQ_MOCK_SYNC", "1")
    r = _Rig(launch_native)
    d, vadd, inc, a, b, c = r.dev, r.vadd, r.inc, r.a, r.b, r.c
    try:
        chain = d.graph([GraphLaunch(inc, (a, 7), (1, 1, 1), (32, 1, 1)) for _ in range(3)])
        # three segments (copy, compute with a wait, copy) on two channels
        e, f, opened = d.alloc(4096), d.alloc(4096), d.new_signal(1)
        mixed = d.graph([GraphCopy(e, a, 4096), GraphWait(opened, 1),
                         GraphLaunch(inc, (e, 5), (1, 1, 1), (32, 1, 1)),
                         GraphCopy(f, e, 4096)])
        pair = d.graph([GraphLaunch(vadd, (a, b, c, 9), (2, 1, 1), (64, 1, 1)),
                        GraphLaunch(inc, (c, 3), (1, 1, 1), (32, 1, 1), after=())])
        dead = d.alloc(256)
        doomed = d.graph([GraphLaunch(inc, (dead, 1), (1, 1, 1), (32, 1, 1))])
        doomed.replay(wait=True)
        d.free(dead)
        times = []
        for i in range(REPLAYS):
            chain.replay()
            if i % 4 == 1:
                times.append(pair.replay(wait=True) > 0)
            if i % 5 == 2:
                vadd(a, b, c, i, global_size=(2, 1, 1), local_size=(64, 1, 1))
            if i % 3 == 0:
                mixed.replay(wait=i % 2 == 0)
            if i % 7 == 3:  # another channel's work: the next replay's acquire waits for it
                d.copyin(b, np.full(1024, i, np.float32))
            if i % 13 == 6:
                chain.replay({1: {1: 100 + i}})
            if i % 17 == 8:
                with pytest.raises(ProgramError, match="graph node 0 .* was freed"):
                    doomed.replay()
            if i % 19 == 9:  # the timeline held back: the next replay keeps its opening wait
                gate = d.new_signal(0)
                hold_timeline(d, gate)
                chain.replay()
                gate.value = 1
                d.synchronize()
                gate.release()
        used = {k: chain._native.get(k) is not None for k in (False,)}
        used["pair"] = pair._native.get(True) is not None
        used["mixed"] = {k: mixed._native.get(k) is not None for k in (False, True)}
        out = r.snapshot()
        cch = d.copy_channel
        out["copy channel"] = (cch.state.tolist(), cch.records.tolist(), cch.ring.tolist(),
                               cch.pb.tolist(), cch.progress.value)
        got = [np.empty(1024, np.uint32) for _ in range(2)]
        d.copyout(got[0], e)
        d.copyout(got[1], f)
        out["mixed"] = [x.tolist() for x in got]
        out["times"], out["native"] = times, used
        out["pushbuffer wraps"] = d.compute_channel.pb_put // d.compute_channel.pb_dw
        return out
    finally:
        d.close()


def test_a_native_replay_and_the_python_replay_write_the_same_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`Graph.replay`'s one native call (_nvlaunch.c `make_replay`) is an accelerator of the
    Python route (`NVQueue.resubmitter`): the same script leaves the same bytes everywhere."""
    if native_helper() is None:
        pytest.skip(f"native launch helper unavailable: {native.unavailable}")
    with_c = _replay_script(True, monkeypatch)
    without = _replay_script(False, monkeypatch)
    assert with_c.pop("native") == {False: True, "pair": True, "mixed": {False: True, True: True}}
    assert without.pop("native") == {False: False, "pair": False,
                                     "mixed": {False: False, True: False}}
    assert with_c.keys() == without.keys()
    for key in with_c:
        assert with_c[key] == without[key], key
    n = REPLAYS
    assert with_c["launch_count"] == 1 + 3 * n + 2 * len(range(1, n, 4)) + len(range(2, n, 5)) \
        + 3 * len(range(6, n, 13)) + 3 * len(range(9, n, 19)) + len(range(0, n, 3))
    assert with_c["pushbuffer wraps"] >= 1


def test_the_launch_fence_is_one_method_every_route_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A different fence in `NVComputeQueue.launch_fence` (here the host's WFI) reaches the hot
    path's segments, queues with several launches and graph bodies, and no route emits the old
    one (the compute class's WAIT_FOR_IDLE) on its own; the launches still run in order."""
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.methods import SUBC_COMPUTE, SUBC_HOST, decode_gp_entry, nvm
    from runtime.drivers.nv.queue import NVComputeQueue
    from runtime.hcq import Launch as GraphLaunch

    def host_wfi(self: NVComputeQueue) -> NVComputeQueue:
        self.words.extend(nvm(SUBC_HOST, cl.NVC56F_WFI, 0))
        return self

    monkeypatch.setattr(NVComputeQueue, "launch_fence", host_wfi)
    mos = NvMockOS.with_nv_gpus(1)
    d = NVDevice("mock-nv:0", os=mos)
    try:
        marker = nvm(SUBC_HOST, cl.NVC56F_WFI, 0)
        old = nvm(SUBC_COMPUTE, d.gen.compute.WAIT_FOR_IDLE, 0)

        def count(words: list[int], pattern: list[int]) -> int:
            return sum(words[i:i + len(pattern)] == pattern for i in range(len(words)))

        inc = d.program(CUBIN, "inc")
        gpu = d.os.nv.gpus[0]  # type: ignore[attr-defined]
        gpu.register_kernel(inc.prog_va, lambda L: L.array(L.param(0, "Q"), np.uint32,
                                                           L.param(8, "i")).__iadd__(1))
        x = d.alloc(256)
        d.copyin(x, np.zeros(64, np.uint32))
        for _ in range(3):  # hot path: the chained entries start at the fence
            inc(x, 64, global_size=(1, 1, 1), local_size=(64, 1, 1))
        hot = inc._hot[(1, 1, 1), (64, 1, 1)]
        assert hot is not None
        words = hot.buf.cpu_view().cast("I")
        seg = words[hot.layout.acquire_idx[0] - 3:hot.layout.seq_idx[0] + 3].tolist()
        assert count(seg, marker) == 1 and count(seg, old) == 0
        fence_va = hot.segment_va(1) + 4 * 6  # past the acquire (six dwords)
        assert decode_gp_entry(hot.layout.entry_chained[1])[0] == fence_va
        ka = [inc.fill_kernargs((x, 64), (1, 1, 1), (64, 1, 1)) for _ in range(2)]
        q = d.compute_queue()
        for k in ka:
            q.exec(inc, k, (1, 1, 1), (64, 1, 1))
        assert count(q.dwords(), marker) == 1 and count(q.dwords(), old) == 0
        # a graph's chain is linked through the QMDs (no fence); a join of two takes the fence
        g = d.graph([GraphLaunch(inc, (x, 64), (1, 1, 1), (64, 1, 1))] * 3)
        bodies = [s for s in g._segments if isinstance(s, NVComputeQueue)]
        assert len(bodies) == 1
        assert count(bodies[0].dwords(), marker) == 0 and count(bodies[0].dwords(), old) == 0
        g.replay(wait=True)
        g.free()
        y = d.alloc(256)
        d.copyin(y, np.zeros(64, np.uint32))
        g = d.graph([GraphLaunch(inc, (x, 64), (1, 1, 1), (64, 1, 1), after=()),
                     GraphLaunch(inc, (y, 64), (1, 1, 1), (64, 1, 1), after=()),
                     GraphLaunch(inc, (x, 64), (1, 1, 1), (64, 1, 1), after=(0, 1))])
        bodies = [s for s in g._segments if isinstance(s, NVComputeQueue)]
        assert count(bodies[0].dwords(), marker) == 1 and count(bodies[0].dwords(), old) == 0
        g.replay(wait=True)
        d.synchronize()
        out = np.zeros(64, np.uint32)
        d.copyout(out, x)
        assert (out == 8).all()
        d.copyout(out, y)
        assert (out == 1).all()
        g.free()
    finally:
        d.close()


_NP_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
_OPS = st.one_of(
    st.tuples(st.just("vadd"), st.integers(-(1 << 33), 1 << 33)),
    st.tuples(st.just("vadd_np"), st.sampled_from(range(len(_NP_INTS))),
              st.integers(0, 1 << 64)),
    st.tuples(st.just("many"), st.floats(width=64), st.integers(-300, 300)),
    st.tuples(st.just("many_f32_edge"), st.integers(-4, 4)),
    st.tuples(st.just("copy")),
    st.tuples(st.just("wait")),
    st.tuples(st.just("vals"), st.integers(0, 1000)),
)


def _run_op(r: _Rig, op: tuple[Any, ...]) -> object:
    g, l = (2, 1, 1), (64, 1, 1)
    try:
        if op[0] == "vadd":
            r.vadd(r.a, r.b, r.c, op[1], global_size=g, local_size=l)
        elif op[0] == "vadd_np":
            t = _NP_INTS[op[1]]
            info = np.iinfo(t)
            r.vadd(r.a, r.b, r.c, t(info.min + op[2] % (int(info.max) - int(info.min) + 1)),
                   global_size=g, local_size=l)
        elif op[0] in ("many", "many_f32_edge"):
            # the largest float32 and the doubles around it, where rounding decides overflow
            f = op[1] if op[0] == "many" else float(np.nextafter(
                np.float64(np.finfo(np.float32).max), np.inf)) * (1 + op[1] * 2.0 ** -26)
            i8 = op[2] if op[0] == "many" else 1
            r.many(*r.many_args(f32=f, i8=i8), global_size=(1, 2, 1), local_size=(32, 1, 1))
        elif op[0] == "copy":
            r.dev.copyin(r.b, np.ones(1024, np.float32))
        elif op[0] == "wait":
            r.vadd(r.a, r.b, r.c, 7, global_size=g, local_size=l, wait=True)
        else:
            r.vadd(r.a, r.b, r.c, vals=(op[1],), global_size=g, local_size=l)
    except ProgramError as e:
        return str(e)
    return "ok"


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(_OPS, min_size=1, max_size=50))
@example(ops=[("many_f32_edge", 0)])                  # rounds to the largest float32: it fits
@example(ops=[("vadd_np", 6, (1 << 32) - 1)])         # uint32 0xFFFFFFFF in an int slot
@example(ops=[("vadd_np", 7, (1 << 64) - 1), ("wait",)])  # uint64 beyond the 4-byte slot
# an int after a numpy unsigned integer: the specialization for the numpy type must decline it
@example(ops=[("vadd_np", 4, 0), ("vadd", 1 << 31)])
def test_any_script_leaves_the_same_bytes_with_either_executor(
        monkeypatch: pytest.MonkeyPatch, ops: list[tuple[Any, ...]]) -> None:
    """Any sequence of launches (arguments of every kind, in and out of their slot's range,
    floats at the float32 limit, chains broken by copies, timed launches, the short path) has the
    same outcome, launch by launch, and leaves the same bytes with the C helper as without."""
    if native_helper() is None:
        pytest.skip(f"native launch helper unavailable: {native.unavailable}")
    monkeypatch.setenv("HCQ_MOCK_SYNC", "1")
    rigs = [_Rig(True), _Rig(False)]
    try:
        for op in ops:
            outcome = [_run_op(r, op) for r in rigs]
            assert outcome[0] == outcome[1], op
        snaps = [r.snapshot() for r in rigs]
        assert snaps[0].keys() == snaps[1].keys()
        for key in snaps[0]:
            assert snaps[0][key] == snaps[1][key], key
    finally:
        for r in rigs:
            r.dev.close()
