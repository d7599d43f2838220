"""Random sequences of runtime calls (Hypothesis stateful testing) on the mock GPUs.

Allocation, frees, copies in and out (synchronous and asynchronous), launches, graph replays with
argument updates, streams and events, signals, and a few threads at once, with valid and invalid
arguments. A model of every buffer's bytes is kept; the invariants:
- every refused call raises an HCQError whose message names what was wrong;
- buffers the sequence did not write keep their bytes;
- the device stays usable, and no step hangs (every wait has a timeout).

CI runs a few examples; a longer run is one command:

    HCQ_FUZZ_EXAMPLES=500 .venv/bin/python -m pytest tests/runtime/test_fuzz_stateful.py
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra")
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, invariant,  # noqa: E402
                                 precondition, rule)

from runtime.hcq import (ArgumentError, Device, GraphWait, HCQError, Launch,  # noqa: E402
                         MemKind)
from tests.runtime.test_device_contract import N, Target, _mock_amd, _mock_nv  # noqa: E402

EXAMPLES = int(os.environ.get("HCQ_FUZZ_EXAMPLES", "4"))
STEPS = int(os.environ.get("HCQ_FUZZ_STEPS", "18"))
KB = N * 4  # bytes of a kernel operand


def _refused(fn: Callable[[], Any], *words: str) -> None:
    """`fn()` must raise an HCQError whose message contains every one of `words`."""
    try:
        fn()
    except HCQError as e:
        msg = str(e)
        for w in words:
            assert w in msg, f"{type(e).__name__} does not name {w!r}: {msg}"
        return
    raise AssertionError(f"accepted; expected an HCQError naming {words}")


class _Buf:
    """A fuzz buffer and the model of its bytes."""

    def __init__(self, buf: Any, data: np.ndarray) -> None:
        self.buf, self.data = buf, data


class RuntimeMachine(RuleBasedStateMachine):
    target: Callable[[], Target]

    bufs = Bundle("bufs")

    def __init__(self) -> None:
        super().__init__()
        self.t = type(self).target()
        self.dev: Device = self.t.open()
        self.dev.default_timeout_ms = 5000.0
        self.prg, self.args = self.t.vadd(self.dev)
        self.live: list[_Buf] = []
        self.freed: list[Any] = []
        self.rng = np.random.default_rng(0)
        # The kernel's operands (c = a + b), and a graph launching it.
        self.k = [self._new(KB, fill=True) for _ in range(3)]
        for i, b in enumerate(self.k[:2]):  # finite operands: NaN payloads may differ by device
            b.data[:] = np.arange(i, i + N, dtype=np.float32).view(np.uint8)
            self.dev.copyin(b.buf, b.data)
        self.graph = self.dev.graph([Launch(self.prg, self.args(*(b.buf for b in self.k), N),
                                            self.t.grid(N), self.t.local)])
        self.graph_c = self.k[2]
        self.stream = self.dev.stream()

    def _new(self, size: int, fill: bool) -> _Buf:
        buf = self.dev.alloc(size)
        data = self.rng.integers(0, 255, size, dtype=np.uint8) if fill else \
            np.zeros(size, np.uint8)
        self.dev.copyin(buf, data)
        b = _Buf(buf, data)
        self.live.append(b)
        return b

    def _expect(self, b: _Buf) -> None:
        out = np.empty(b.buf.size, np.uint8)
        self.dev.copyout(out, b.buf)
        np.testing.assert_array_equal(out, b.data, err_msg=f"bytes of {b.buf!r} changed")

    def _vadd_model(self, a: _Buf, b: _Buf, c: _Buf) -> None:
        s = a.data[:KB].view(np.float32) + b.data[:KB].view(np.float32)
        c.data[:KB] = s.view(np.uint8)

    # ------------------------------------------------------------------ memory
    @rule(target=bufs, size=st.integers(1, 3 * 4096))
    def alloc(self, size: int) -> _Buf:
        return self._new(size, fill=True)

    @rule(kind=st.sampled_from([None, "vram", 3, 1.5]))
    def alloc_bad_kind(self, kind: Any) -> None:
        _refused(lambda: self.dev.alloc(64, kind=kind), "kind", "MemKind")

    @rule(size=st.sampled_from([-1, 1.5, "8", None]))
    def alloc_bad_size(self, size: Any) -> None:
        _refused(lambda: self.dev.alloc(size), "size")

    @rule(b=consumes(bufs))
    def free(self, b: _Buf) -> None:
        self.dev.free(b.buf)
        self.live.remove(b)
        self.freed.append(b.buf)

    @precondition(lambda self: self.freed)
    @rule(i=st.integers(0, 100))
    def use_freed(self, i: int) -> None:
        buf = self.freed[i % len(self.freed)]
        _refused(lambda: self.dev.copyin(buf, bytes(1)), "freed")
        _refused(lambda: self.dev.free(buf), "free")

    @rule(b=bufs, data=st.data())
    def copyin(self, b: _Buf, data: st.DataObject) -> None:
        if b not in self.live:
            return
        off = data.draw(st.integers(0, b.buf.size - 1))
        n = data.draw(st.integers(0, b.buf.size - off))
        payload = self.rng.integers(0, 255, n, dtype=np.uint8)
        self.dev.copyin(b.buf, payload, off)
        b.data[off:off + n] = payload

    @rule(b=bufs, extra=st.integers(1, 64))
    def copyin_out_of_range(self, b: _Buf, extra: int) -> None:
        if b not in self.live:
            return
        _refused(lambda: self.dev.copyin(b.buf, bytes(b.buf.size + extra)), "outside")
        _refused(lambda: self.dev.copyin(b.buf, bytes(1), -1), "outside")

    @rule(b=bufs, asynchronous=st.booleans())
    def copyout(self, b: _Buf, asynchronous: bool) -> None:
        if b not in self.live:
            return
        out = np.empty(b.buf.size, np.uint8)
        if asynchronous:
            p = self.dev.copyout_async(out, b.buf)
            p.wait(timeout_ms=5000)
            assert p.done()
        else:
            self.dev.copyout(out, b.buf)
        np.testing.assert_array_equal(out, b.data)

    @rule(b=bufs, off=st.one_of(st.floats(0.1, 4), st.text(max_size=2)), size=st.integers(1, 8))
    def slice_bad(self, b: _Buf, off: Any, size: int) -> None:
        if b not in self.live:
            return
        _refused(lambda: b.buf.slice(off, size), "offset")

    # ------------------------------------------------------------------ kernels and graphs
    @rule()
    def launch(self) -> None:
        a, b, c = self.k
        self.prg(*self.args(a.buf, b.buf, c.buf, N), global_size=self.t.grid(N),
                 local_size=self.t.local)
        self._vadd_model(a, b, c)

    @rule(bad=st.sampled_from(["float", "count"]))
    def launch_bad(self, bad: str) -> None:
        a, b, c = self.k
        if bad == "count":
            _refused(lambda: self.prg(a.buf, global_size=self.t.grid(N),
                                      local_size=self.t.local), "argument")
        elif self.t.name == "mock-amd":  # NVIDIA cubins do not say which parameters are pointers
            _refused(lambda: self.prg(*self.args(a.buf, 1.5, c.buf, N),
                                      global_size=self.t.grid(N), local_size=self.t.local),
                     "pointer", "1.5")

    @rule(b=bufs, wait=st.booleans())
    def replay_into(self, b: _Buf, wait: bool) -> None:
        """Replays the graph with its output (argument 2) moved to `b` when it is large enough."""
        if b in self.live and b.buf.size >= KB:
            self.graph.replay({0: {2: b.buf}}, wait=wait)
            self.graph_c = b
        else:
            self.graph.replay(wait=wait)
        self._vadd_model(self.k[0], self.k[1], self.graph_c)

    @rule()
    def replay_bad_update(self) -> None:
        """A refused update changes nothing: the next plain replay writes where it wrote."""
        bad = {0: {0: self.k[0].buf, 7: 1}} if self.t.name == "mock-nv" else \
            {0: {0: self.k[0].buf, 1: 2.5}}
        _refused(lambda: self.graph.replay(bad), "graph launch 0")
        _refused(lambda: self.graph.replay({5: {0: 1}}), "no launch 5")
        self.graph.replay()
        self._vadd_model(self.k[0], self.k[1], self.graph_c)

    @rule()
    def replay_after_free(self) -> None:
        """A graph whose buffer was freed refuses to replay, naming the node and argument."""
        tmp = self.dev.alloc(KB)
        g = self.dev.graph([Launch(self.prg, self.args(self.k[0].buf, self.k[1].buf, tmp, N),
                                   self.t.grid(N), self.t.local)])
        self.dev.free(tmp)
        _refused(g.replay, "graph node 0", "argument 2", "freed")
        g.free()

    @rule()
    def gate_never_opens(self) -> None:
        from runtime.hcq import SignalTimeout
        gate = self.dev.new_signal(0)
        g = self.dev.graph([GraphWait(gate, 1)])
        with pytest.raises(SignalTimeout, match="GraphWait 0"):
            g.replay(wait=True, timeout_ms=50)
        gate.value = 1
        self.dev.synchronize()
        g.free()
        gate.release()

    # ------------------------------------------------------------------ streams, signals
    @rule(src=bufs, dst=bufs)
    def stream_copy(self, src: _Buf, dst: _Buf) -> None:
        if src not in self.live or dst not in self.live:
            return
        n = min(src.buf.size, dst.buf.size)
        self.stream.wait(self.dev.record())
        self.stream.copy(dst.buf, src.buf, n)
        self.dev.wait(self.stream.record())
        dst.data[:n] = src.data[:n].copy()

    @rule(value=st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([-1, 2**64, 2.5, "x"])))
    def new_signal(self, value: Any) -> None:
        pools = self.dev._signal_pools
        free_before = sum(p.free_count for p in pools)
        if isinstance(value, int) and 0 <= value < 2**64:
            s = self.dev.new_signal(value)
            assert s.value == value
            s.release()
        else:
            _refused(lambda: self.dev.new_signal(value), "new_signal", "value")
        assert sum(p.free_count for p in self.dev._signal_pools) == free_before  # no leak

    @rule(n_threads=st.integers(2, 3))
    def threads(self, n_threads: int) -> None:
        """A few threads at once, each on a buffer of its own, with launches on the side."""
        own = [self._new(4096, fill=False) for _ in range(n_threads)]
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                data = np.full(4096, k + 1, np.uint8)
                self.dev.copyin(own[k].buf, data)
                out = np.empty(4096, np.uint8)
                self.dev.copyout(out, own[k].buf)
                np.testing.assert_array_equal(out, data)
                a, b, _ = self.k
                self.prg(*self.args(a.buf, b.buf, self.k[2].buf, N),
                         global_size=self.t.grid(N), local_size=self.t.local)
            except BaseException as e:
                errors.append(e)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in ts), "a thread hung"
        assert not errors, errors
        for k, b in enumerate(own):
            b.data[:] = k + 1
        self._vadd_model(*self.k)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def usable(self) -> None:
        self.dev.check_usable()

    def teardown(self) -> None:
        try:
            self.dev.synchronize(timeout_ms=10_000)
            for b in self.live:
                self._expect(b)
        finally:
            self.dev.close()


def _machine(make: Callable[[], Target]) -> type[RuntimeMachine]:
    class M(RuntimeMachine):
        target = staticmethod(make)
    M.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS,
                                   deadline=None, derandomize="HCQ_FUZZ_EXAMPLES" not in os.environ,
                                   suppress_health_check=list(HealthCheck))
    return M


TestFuzzMockAMD = _machine(_mock_amd).TestCase
TestFuzzMockNV = _machine(_mock_nv).TestCase
