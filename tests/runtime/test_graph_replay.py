"""Graph replays submit what was built once: no queue is built and no node is visited per replay
(each segment's submission is laid out on the first replay around a variable for its timeline
value, `HWQueue.resubmitter`), the commands are those a replay built afresh submits, and the
routes that must build afresh (a tracer, timeline values past 32 bits) still do; on NVIDIA the
prelaid GPFIFO entries (`Channel.submit_spans`) carry exactly what `Channel.submit` writes."""
from __future__ import annotations

from array import array
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.hcq import GraphCopy, GraphWait, Launch, QueueError
from runtime.hcq.queue import HWQueue

from .device_util import hold_timeline
from .test_graph_dag import GS, LS, N, _down, _open


@pytest.fixture(params=["mock-amd", "mock-nv"])
def dev(request: pytest.FixtureRequest) -> Iterator[Any]:
    d = _open(request.param, own=True)
    yield d
    d.close()


def _graph(d: Any) -> tuple[Any, Any, list[Any]]:
    """fill a; [wait gate >= 1] twice a -> b; copy b -> c; twice c -> e: a compute segment, a copy
    segment and a compute segment, with a GraphWait."""
    fill, twice = d.kern["fill"], d.kern["twice"]
    a, b, c, e = (d.alloc(4 * N) for _ in range(4))
    gate = d.new_signal(0)
    g = d.graph([Launch(fill, (a, 3), GS, LS),
                 GraphWait(gate, 1),
                 Launch(twice, (a, b), GS, LS),
                 GraphCopy(c, b, 4 * N),
                 Launch(twice, (c, e), GS, LS)])
    return g, gate, [a, b, c, e]


def test_replays_build_no_queue_after_the_first_and_give_the_serial_result(
        dev: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    g, gate, (a, b, c, e) = _graph(dev)
    gate.value = 5
    g.replay(wait=True)
    g.replay()  # each of the two routes (timed or not) lays its submissions out once
    dev.synchronize()
    built: list[str] = []
    replaying = [False]
    init = HWQueue.__init__

    def counting_init(self: HWQueue, device: Any) -> None:
        if replaying[0]:
            built.append(type(self).__name__)
        init(self, device)

    monkeypatch.setattr(HWQueue, "__init__", counting_init)
    for r in range(6):
        v = 10 + r
        replaying[0] = True
        t = g.replay({0: {1: v}}, wait=r % 2 == 0, wait_values={0: r})
        replaying[0] = False
        if r % 2 == 0:
            assert t is not None and t >= 0
        dev.synchronize()
        assert (_down(dev, e) == 4 * (v + np.arange(N))).all()
    assert built == []
    assert len(g._plans[True]) == len(g._plans[False]) == 3  # compute, copy, compute


def test_a_replay_after_free_is_refused(dev: Any) -> None:
    g, gate, _ = _graph(dev)
    gate.value = 1
    g.replay(wait=True)
    g.replay()  # both routes laid out while the bodies were bound
    g.free()
    for wait in (False, True):
        with pytest.raises(QueueError, match="bound"):
            g.replay(wait=wait)
    dev.synchronize()  # the refused replays left the timeline as it was


def _submissions(d: Any, run: Any, names: dict[int, str]) -> list[list[object]]:
    """What `run()` put on the compute and copy channels: per GPFIFO entry the pushbuffer dwords
    it points at, or (va, length) for commands elsewhere (bound bodies), with the words `names`
    names and each channel's sequence numbers ("compute 2": its second submission) replaced by
    their names."""
    from runtime.drivers.nv.methods import decode_gp_entry
    chans = (d.compute_channel, d.copy_channel)
    before = [(ch.gp_put, ch.seq) for ch in chans]
    run()
    d.synchronize()
    out: list[list[object]] = []
    for ch, (put, seq) in zip(chans, before):
        known = names | {seq + k: f"{ch.name} {k}" for k in range(1, ch.seq - seq + 1)}
        base = ch.pushbuf.va
        for i in range(put, ch.gp_put):
            va, n = decode_gp_entry(int(ch.ring[i & (ch.entries - 1)]))
            if base <= va < base + 4 * ch.pb_dw:
                off = (va - base) // 4
                out.append([known.get(w, w) for w in ch.pb[off:off + n].tolist()])
            else:
                out.append([(va, n)])
    return out


def _without_timeline_waits(run: list[list[object]]) -> list[list[object]]:
    """`_submissions`' entries less the waits for a named timeline value that open them (and
    the entries left with nothing)."""
    from runtime.drivers.nv.gpfifo import SEM_ACQUIRE_GEQ_64
    out = []
    for words in run:
        if len(words) >= 6 and str(words[3]).startswith("timeline + ") and \
                words[5] == SEM_ACQUIRE_GEQ_64:
            words = words[6:]
        if words:
            out.append(words)
    return out


def test_nv_a_replay_submits_the_commands_a_built_replay_submits() -> None:
    """The same commands, but for the waits that open each segment's submission: a laid-out
    replay leaves out those whose value was reached when it was submitted (the next test)."""
    d = _open("mock-nv", own=True)
    try:
        g, gate, _ = _graph(d)
        gate.value = 1
        d.synchronize()
        for wait in (False, True):
            runs = []
            for k, submit in enumerate((lambda: g._submit_built(wait),
                                        lambda: g.replay(wait=wait))):
                # distinctive timeline values (everything before is complete), so that they can
                # be told apart from every other word
                base = 0x5A5A0000 + 0x100 * k
                d.timeline_value = base
                d.timeline_signal.value = base
                runs.append(_submissions(d, submit,
                                         {base + i: f"timeline + {i}" for i in range(4)}))
            assert len(runs[0]) == 7  # 3 + 1 + 3 entries
            assert _without_timeline_waits(runs[0]) == _without_timeline_waits(runs[1])
            # without timestamps the first segment's first entry is its wait alone
            assert len(_without_timeline_waits(runs[1])) == (6 if wait else 5)
    finally:
        d.close()


@pytest.mark.parametrize("launch_native", [True, False])
def test_nv_a_replay_leaves_out_its_wait_only_for_a_value_already_reached(
        launch_native: bool) -> None:
    """A one-segment graph's replay opens with a wait for the timeline's previous value, unless
    the timeline has reached that value when the replay is submitted: then everything it orders
    the graph after is complete. Here the previous value is held back by a copy that waits for
    a gate: the replay keeps its wait (and runs only once the gate opens); once everything is
    complete, the next replay leaves it out. Both routes, the native call and Python's."""
    from runtime.drivers.nv.gpfifo import SEM_ACQUIRE_GEQ_64
    d = _open("mock-nv", own=True)
    d.launch_native = launch_native
    try:
        fill, twice = d.kern["fill"], d.kern["twice"]
        a, b = d.alloc(4 * N), d.alloc(4 * N)
        g = d.graph([Launch(fill, (a, 3), GS, LS), Launch(twice, (a, b), GS, LS)])
        for _ in range(2):
            g.replay(wait=True)
            g.replay()
        d.synchronize()
        gate = d.new_signal(0)
        v = hold_timeline(d, gate)
        held = _submissions_now(d, g.replay)
        assert held[0][5] == SEM_ACQUIRE_GEQ_64 and held[0][3] == v and len(held) == 3
        assert d.timeline_signal.value == v - 1
        gate.value = 1
        d.synchronize()
        assert (_down(d, b) == 2 * (3 + np.arange(N))).all()
        done = _submissions_now(d, g.replay)
        # the body's call, then the release and the progress word (their values move on)
        assert len(done) == 2 and done[0] == held[1] and len(done[1]) == len(held[2])
        assert SEM_ACQUIRE_GEQ_64 not in [w for e in done for w in e[:6]]
        assert (g._native.get(False) is not None) == launch_native
        d.synchronize()
    finally:
        d.close()


def _submissions_now(d: Any, run: Any) -> list[list[Any]]:
    """The compute channel's entries that `run()` wrote (dwords, or (va, length) for commands
    elsewhere), read right away: nothing waits for the GPU."""
    from runtime.drivers.nv.methods import decode_gp_entry
    ch = d.compute_channel
    put = ch.gp_put
    run()
    out: list[list[Any]] = []
    base = ch.pushbuf.va
    for i in range(put, ch.gp_put):
        va, n = decode_gp_entry(int(ch.ring[i & (ch.entries - 1)]))
        if base <= va < base + 4 * ch.pb_dw:
            off = (va - base) // 4
            out.append(ch.pb[off:off + n].tolist())
        else:
            out.append([(va, n)])
    return out


def test_timeline_values_past_32_bits_take_the_built_route(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the copy engine's semaphore compares 32 bits: the built route releases such values from
    # the host instead, which a queue laid out once around a variable cannot
    d = _open("mock-nv", own=True)
    try:
        g, gate, (a, b, c, e) = _graph(d)
        gate.value = 1
        g.replay(wait=True)
        routes: list[bool] = []
        built = g._submit_built
        monkeypatch.setattr(g, "_submit_built", lambda wait: routes.append(wait) or built(wait))
        d.synchronize()
        start = (1 << 32) - 3  # the first replay's last segment signals 2^32
        d.timeline_value = start
        d.timeline_signal.value = start
        for r in range(3):
            g.replay({0: {1: 7 + r}}, wait=True)
            assert (_down(d, e) == 4 * (7 + r + np.arange(N))).all()
        assert routes == [True, True, True] and d.timeline_value > 1 << 32
    finally:
        d.close()


@pytest.fixture(scope="module")
def nv_channel() -> Iterator[Any]:
    d = _open("mock-nv", own=True)
    yield d.compute_channel
    d.close()


# a stream: runs of words (lists) and commands already in GPU memory ((va, length))
_part = st.one_of(st.lists(st.integers(0, 0xFFFFFFFF), min_size=1, max_size=40),
                  st.tuples(st.integers(1, 1 << 20).map(lambda k: k * 0x100),
                            st.integers(1, 500)))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_part, min_size=1, max_size=6), room=st.integers(0, 300))
def test_prelaid_entries_carry_what_submit_writes(nv_channel: Any, parts: list[Any],
                                                  room: int) -> None:
    """Channel.submit_spans against Channel.submit on the same stream, from the same ring state
    (`room`: dwords left before the pushbuffer wraps): every GPFIFO entry points at the same
    dwords, the progress release included."""
    from runtime.drivers.nv.gpfifo import GP_FREE_UNTIL, GP_PUT, PB_FREE_UNTIL, PB_PUT, SEQ
    from runtime.drivers.nv.methods import decode_gp_entry, gp_entry
    ch = nv_channel
    st_ = ch.state
    saved = st_.tolist()
    ring_mask = ch.entries - 1
    entries: list[list[object]] = []

    def publish(seq: int, entry: int) -> None:  # the stores of a publish, without the doorbell
        ch.ring[st_[GP_PUT] & ring_mask] = entry
        st_[GP_PUT] += 1
        st_[SEQ] = seq

    def content(put: int) -> list[object]:
        out: list[object] = []
        for i in range(put, st_[GP_PUT]):
            va, n = decode_gp_entry(int(ch.ring[i & ring_mask]))
            if ch.pushbuf.va <= va < ch.pushbuf.va + 4 * ch.pb_dw:
                off = (va - ch.pushbuf.va) // 4
                out.append(ch.pb[off:off + n].tolist())
            else:
                out.append((va, n))
        return out

    words = array("I")
    spans: list[tuple[int, int, int]] = []
    for p in parts:
        if isinstance(p, list):
            spans.append((0, len(words), len(p)))
            words.extend(p)
        else:
            spans.append((1, gp_entry(*p), 0))
    if spans[-1][0]:
        spans.append((0, len(words), 0))
    orig = ch.publish
    ch.publish = publish
    try:
        for route in ("submit", "spans"):
            st_[PB_PUT] = ch.pb_dw * 3 - room  # the same position, `room` before a wrap
            st_[PB_FREE_UNTIL] = st_[PB_PUT] + ch.pb_dw
            st_[GP_PUT] = saved[GP_PUT]
            st_[GP_FREE_UNTIL] = saved[GP_PUT] + ch.entries - 1
            st_[SEQ] = saved[SEQ]
            if route == "submit":
                seq = ch.submit([array("I", p) if isinstance(p, list) else p for p in parts])
            else:
                seq = ch.submit_spans(words, spans)
            assert seq == saved[SEQ] + 1
            entries.append(content(saved[GP_PUT]))
    finally:
        ch.publish = orig
        st_[:] = array("Q", saved)
    assert entries[0] == entries[1]


def test_nv_the_native_replay_declines_and_the_python_route_raises_or_waits() -> None:
    """The one-call replay declines, writing nothing, whenever the Python route has something
    to raise or wait for: a freed buffer (refused by name, the timeline as it was), another
    thread inside a submission (the replay waits for it), a closed device. A replay with
    updates goes the Python route; the next one is native again."""
    import threading

    from runtime.drivers.nv.launcher import native_helper
    from runtime.hcq import DeviceClosed, ProgramError
    d = _open("mock-nv", own=True)
    try:
        if native_helper() is None:
            pytest.skip("native launch helper unavailable")
        fill, twice = d.kern["fill"], d.kern["twice"]
        a, b, c = d.alloc(4 * N), d.alloc(4 * N), d.alloc(4 * N)
        g = d.graph([Launch(fill, (a, 3), GS, LS), Launch(twice, (a, b), GS, LS)])
        g.replay(wait=True)
        g.replay()
        results: list[int] = []
        natives = g._native[False]
        assert natives is not None and len(natives) == 1
        fast = natives[0]
        held, go = threading.Event(), threading.Event()

        def counted(live: Any, *flag: bool) -> int:
            v = fast(live, *flag)
            results.append(v)
            if held.is_set():
                go.set()  # declined while the other thread holds the lock: let it go on
            return v
        g._native[False] = (counted,)
        d.synchronize()
        g.replay()
        d.synchronize()
        assert results[-1] == d.timeline_value
        d.free(b)
        before = d.timeline_value
        with pytest.raises(ProgramError, match=r"graph node 1 .*argument 1.* was freed"):
            g.replay()
        assert results[-1] == 0 and d.timeline_value == before
        g.replay({1: {1: c}})  # the Python route, which checks and applies the update
        n = len(results)
        g.replay()
        d.synchronize()
        assert len(results) == n + 1 and results[-1] == d.timeline_value
        assert (_down(d, c) == 2 * (3 + np.arange(N))).all()

        def hold() -> None:
            with d.submit_lock:
                held.set()
                go.wait(10)
        t = threading.Thread(target=hold)
        t.start()
        held.wait(10)
        g.replay()  # declined while the lock is held, then submitted by the Python route
        t.join()
        held.clear()
        assert results[-1] == 0 and go.is_set()
        d.synchronize()
        assert d.timeline_signal.value == d.timeline_value
    finally:
        d.close()
    with pytest.raises(DeviceClosed):
        g.replay()
    assert results[-1] == 0


def _native_segments(g: Any, wait: bool) -> tuple[Any, ...]:
    natives = g._native.get(wait)
    if natives is None:
        from runtime.drivers.nv.launcher import native_helper
        from runtime.hcq import native
        if native_helper() is None:
            pytest.skip(f"native launch helper unavailable: {native.unavailable}")
    assert natives is not None
    return natives  # type: ignore[no-any-return]


def test_nv_a_graph_of_several_segments_replays_natively_under_one_lock(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph of three segments on two channels, with a GraphWait, replays through one native
    call per segment and no Python resubmission; a segment declined after the first (its ring
    short of room) is submitted by the Python route and the replay completes in order; a gate
    closed again is named by the native route's timeout report."""
    from runtime.hcq import SignalTimeout
    d = _open("mock-nv", own=True)
    try:
        g, gate, (a, b, c, e) = _graph(d)
        gate.value = 1
        g.replay(wait=True)
        g.replay()  # both plans built
        d.synchronize()
        for wait in (False, True):
            assert len(_native_segments(g, wait)) == 3
        python_route: list[int] = []
        resubmit = d.resubmit_timeline
        monkeypatch.setattr(d, "resubmit_timeline",
                            lambda fn: python_route.append(1) or resubmit(fn))
        for r in range(6):
            before = d.timeline_value
            t = g.replay({0: {1: 10}}, wait=True) if r == 3 else g.replay(wait=r % 2 == 0)
            assert d.timeline_value == before + 3 and g._last == before + 3
            assert t is None or t > 0
            d.synchronize()
            assert (_down(d, e) == 4 * ((10 if r >= 3 else 3) + np.arange(N))).all()
        assert len(python_route) == 3  # the update's replay only

        # the copy segment declines once, as for a ring short of room
        natives = _native_segments(g, False)
        declined: list[int] = []

        def once_short(live: Any, *flag: bool) -> int:
            if not declined:
                declined.append(1)
                return 0
            return natives[1](live, *flag)
        g.replay({0: {1: 11}}, wait=True)  # (the Python route)
        d.synchronize()
        g._native[False] = (natives[0], once_short, natives[2])
        python_route.clear()
        before = d.timeline_value
        g.replay()
        assert declined == [1] and len(python_route) == 2  # segments 1 and 2 in Python
        assert d.timeline_value == before + 3
        d.synchronize()
        assert (_down(d, e) == 4 * (11 + np.arange(N))).all()
        g.replay()  # native again for every segment
        assert len(python_route) == 2
        d.synchronize()

        gate.value = 0  # closed again: the native route names the gate in the timeout
        with pytest.raises(SignalTimeout) as err:
            g.replay(wait=True, timeout_ms=200)
        assert len(python_route) == 2
        assert "waiting for graph node 1 (GraphWait 0" in str(err.value)
        gate.value = 1
        d.synchronize()
        assert (_down(d, e) == 4 * (11 + np.arange(N))).all()
    finally:
        d.close()


def test_nv_replays_of_several_segments_from_two_threads_stay_whole() -> None:
    """Two threads replay graphs of three segments (switching threads as often as the
    interpreter allows): every replay's segments take consecutive timeline values, since its
    native calls run under one holding of the submission lock; both results are right."""
    import sys
    import threading
    REPLAYS = 60
    d = _open("mock-nv", own=True)
    try:
        graphs = [_graph(d) for _ in range(2)]
        seen: list[tuple[int, int, int]] = []
        for gi, (g, gate, _) in enumerate(graphs):
            gate.value = 1
            g.replay()  # the plan built
            natives = _native_segments(g, False)

            def recording(gi: int, k: int, fn: Any) -> Any:
                def rec(live: Any, *flag: bool) -> int:
                    v = fn(live, *flag)
                    seen.append((gi, k, v))
                    return int(v)
                return rec
            g._native[False] = tuple(recording(gi, k, fn) for k, fn in enumerate(natives))
        d.synchronize()
        errors: list[BaseException] = []

        def run(g: Any) -> None:
            try:
                for _ in range(REPLAYS):
                    g.replay()
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=run, args=(g,)) for g, _, _ in graphs]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        finally:
            sys.setswitchinterval(old)
        assert not errors
        d.synchronize(timeout_ms=60_000)  # (the mock GPU's thread ran slowly meanwhile)
        assert len(seen) == 2 * REPLAYS * 3 and all(v for _, _, v in seen)
        for i in range(0, len(seen), 3):
            (g0, k0, v0), (g1, k1, v1), (g2, k2, v2) = seen[i:i + 3]
            assert g0 == g1 == g2 and (k0, k1, k2) == (0, 1, 2)
            assert (v1, v2) == (v0 + 1, v0 + 2)
        for _, _, (_, _, _, e) in graphs:
            assert (_down(d, e) == 4 * (3 + np.arange(N))).all()
    finally:
        d.close()
