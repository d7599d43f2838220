"""A device under real conditions: several threads at once, Ctrl-C in the middle of a wait, fork,
and the asynchronous mock GPUs exposing a host that forgets to wait.

Parametrised over the device contract's targets: the mock AMD GPU, the mock NVIDIA GPU and,
marked `nvidia`, the real GPU (scripts/device_check.sh runs them). Interruptions are real signals
(SIGINT sent to this process by a timer thread), delivered while the main thread waits for work
held back by a gate signal that the test opens afterwards, so each run takes the same path.
"""
from __future__ import annotations

import os
import random
import re
import signal
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from runtime.hcq import Device, DeviceForked, Event, HCQError, Launch
from runtime.hcq.device import _on_sigint
from tests.runtime.test_device_contract import N, TARGETS, Target

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach only the main thread")


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    t: Target = request.param()
    return t


@pytest.fixture
def dev(target: Target) -> Iterator[Device]:
    d = target.open()
    yield d
    d.close()


def _launch(target: Target, d: Device, prg: Any, args: Callable[..., tuple[Any, ...]],
            a: Any, b: Any, c: Any, wait: bool = False) -> Any:
    return prg(*args(a, b, c, N), global_size=target.grid(N), local_size=target.local, wait=wait)


def _read(d: Device, buf: Any, n: int = N) -> np.ndarray:
    out = np.empty(n, np.float32)
    d.copyout(out, buf)
    return out


# ------------------------------------------------------------------------------------ threads
def test_threads_share_a_device(target: Target, dev: Device) -> None:
    """Several threads use one device at once (allocation, copies, launches, graphs, streams,
    signals, user queues); every result is what the thread's own serial order gives."""
    prg, args = target.vadd(dev)
    n_threads, n_ops = 4, 12
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            a, b, c = (dev.alloc(N * 4) for _ in range(3))
            stream = dev.stream()
            g = dev.graph([Launch(prg, args(a, b, c, N), target.grid(N), target.local)])
            start.wait()
            for i in range(n_ops):
                x = np.full(N, seed * 100 + i, np.float32)
                y = np.arange(N, dtype=np.float32)
                op = rng.randrange(5)
                if op == 0:     # copies and a launch on the device timeline
                    dev.copyin(a, x)
                    dev.copyin(b, y)
                    _launch(target, dev, prg, args, a, b, c)
                    np.testing.assert_array_equal(_read(dev, c), x + y)
                elif op == 1:   # a graph replay
                    dev.copyin(a, x)
                    dev.copyin(b, y)
                    g.replay(wait=True)
                    np.testing.assert_array_equal(_read(dev, c), x + y)
                elif op == 2:   # a stream of its own, ordered after the device's copies
                    t = dev.alloc(N * 4)
                    dev.copyin(a, x)
                    stream.wait(dev.record())
                    stream.copy(t, a, N * 4)
                    stream.synchronize()
                    np.testing.assert_array_equal(_read(dev, t), x)
                    dev.free(t)
                elif op == 3:   # a user queue signalling a signal of its own
                    s = dev.new_signal(0)
                    dev.compute_queue().signal(s, 7).submit()
                    s.wait(7)
                    s.release()
                else:           # an asynchronous copy out
                    dev.copyin(a, x)
                    out = np.empty(N, np.float32)
                    dev.copyout_async(out, a).wait()
                    np.testing.assert_array_equal(out, x)
            g.free()
            stream.close()
            for buf in (a, b, c):
                dev.free(buf)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k + 1,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    dev.synchronize()
    assert dev.timeline_signal.value == dev.timeline_value


def test_threads_launch_through_one_program(target: Target, dev: Device) -> None:
    """Launches of one program from several threads (the launch fast path) interleave with
    copies; the timeline counts every one and each thread's output is its own."""
    prg, args = target.vadd(dev)
    n_threads, n_launches = 4, 40
    bufs = [[dev.alloc(N * 4) for _ in range(3)] for _ in range(n_threads)]
    for k, (a, b, _) in enumerate(bufs):
        dev.copyin(a, np.full(N, k, np.float32))
        dev.copyin(b, np.ones(N, np.float32))
    dev.synchronize()
    before = dev.timeline_value
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        a, b, c = bufs[k]
        try:
            for i in range(n_launches):
                _launch(target, dev, prg, args, a, b, c, wait=(i % 10 == 9))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    dev.synchronize()
    assert dev.timeline_value == before + n_threads * n_launches
    assert dev.timeline_signal.value == dev.timeline_value
    for k, (_, _, c) in enumerate(bufs):
        np.testing.assert_array_equal(_read(dev, c), np.full(N, k + 1, np.float32))


# ------------------------------------------------------------------------------------ Ctrl-C
class _CtrlC:
    """Sends SIGINT to this process once the main thread has said it is about to wait."""

    def __init__(self, delay_s: float = 0.05) -> None:
        self.ready = threading.Event()
        self._delay = delay_s
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        if self.ready.wait(30):
            time.sleep(self._delay)  # the main thread is then blocked in the wait (gate closed)
            os.kill(os.getpid(), signal.SIGINT)

    def join(self) -> None:
        self._t.join(timeout=30)


def _gated(d: Device) -> Any:
    """A closed gate the device timeline waits for: later submissions queue up behind it."""
    gate = d.new_signal(0)
    d.wait(Event(gate, 1))
    return gate


@pytest.mark.parametrize("where", ["synchronize", "launch-wait", "copyout", "pending-copy"])
def test_ctrl_c_in_a_wait_loses_no_work(target: Target, dev: Device, where: str) -> None:
    """SIGINT while the host waits for submitted work: KeyboardInterrupt reaches the caller, the
    work still runs once its gate opens, the next synchronize() waits for it, and the device
    stays usable."""
    if signal.getsignal(signal.SIGINT) not in (signal.default_int_handler, _on_sigint):
        pytest.skip("SIGINT is handled by someone else here")
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    x, y = np.arange(N, dtype=np.float32), np.full(N, 2, np.float32)
    dev.copyin(a, x)
    dev.copyin(b, y)
    dev.synchronize()
    gate = _gated(dev)
    out = np.zeros(N, np.float32)
    ctrl_c = _CtrlC()
    with pytest.raises(KeyboardInterrupt):
        if where == "synchronize":
            _launch(target, dev, prg, args, a, b, c)
            ctrl_c.ready.set()
            dev.synchronize(timeout_ms=20_000)
        elif where == "launch-wait":
            ctrl_c.ready.set()
            _launch(target, dev, prg, args, a, b, c, wait=True)
        elif where == "copyout":
            _launch(target, dev, prg, args, a, b, c)
            ctrl_c.ready.set()
            dev.copyout(out, c)
        else:
            _launch(target, dev, prg, args, a, b, c)
            pending = dev.copyout_async(out, c)
            ctrl_c.ready.set()
            pending.wait(timeout_ms=20_000)
    ctrl_c.join()
    assert dev.timeline_signal.value < dev.timeline_value  # the work is still held back
    gate.value = 1
    dev.synchronize()
    assert dev.timeline_signal.value == dev.timeline_value
    if where == "pending-copy":
        pending.wait()
        np.testing.assert_array_equal(out, x + y)
    np.testing.assert_array_equal(_read(dev, c), x + y)
    _launch(target, dev, prg, args, c, b, a)  # and the device goes on
    np.testing.assert_array_equal(_read(dev, a), x + 2 * y)
    gate.release()


def test_a_storm_of_ctrl_c_leaves_the_device_consistent(target: Target, dev: Device) -> None:
    """SIGINT every few milliseconds while the main thread launches, copies and replays a graph:
    whatever each interrupted call got to do, the device stays consistent (no half-published
    submission: the next synchronize() returns, the timeline accounts for every submission) and
    works afterwards. A Ctrl-C that arrives while a submission is being published is raised once
    it is complete. (The test's own bookkeeping runs with SIGINT blocked, so that only runtime
    calls are interrupted.)"""
    from runtime.hcq.device import interrupt_pending
    if signal.getsignal(signal.SIGINT) is not _on_sigint:
        pytest.skip("SIGINT is handled by someone else here")
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    g = dev.graph([Launch(prg, args(a, b, c, N), target.grid(N), target.local)])
    main = threading.main_thread().ident
    assert main is not None
    stop = threading.Event()
    sent = [0]

    def storm() -> None:
        rng = random.Random(1)
        while not stop.wait(rng.uniform(0.001, 0.004)):
            signal.pthread_kill(main, signal.SIGINT)
            sent[0] += 1

    data = np.ones(N, np.float32)
    out = np.empty(N, np.float32)
    interrupted = 0

    def ops() -> None:
        dev.copyin(a, data)
        _launch(target, dev, prg, args, a, b, c)
        g.replay()
        dev.record(timing=True)  # dropped at once: its finalizer hands the stamp signal back
        dev.copyout(out, c)

    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    t = threading.Thread(target=storm, daemon=True)
    try:
        t.start()
        deadline = time.perf_counter() + 1.5
        while time.perf_counter() < deadline:
            interrupted += not _exposed(ops)
        stop.set()
        t.join(timeout=10)
        quiet = 0
        while quiet < 3:  # signals on their way, or held back and sent again, land here
            ok = _exposed(lambda: (time.sleep(0.02), dev.synchronize(timeout_ms=20_000)))
            quiet = quiet + 1 if ok and not interrupt_pending() else 0
            interrupted += not ok
    finally:
        stop.set()
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    assert sent[0] > 10 and interrupted > 0
    assert dev.timeline_signal.value == dev.timeline_value
    dev.copyin(a, np.full(N, 3, np.float32))
    dev.copyin(b, np.full(N, 4, np.float32))
    _launch(target, dev, prg, args, a, b, c)
    np.testing.assert_array_equal(_read(dev, c), np.full(N, 7, np.float32))
    g.free()


def _exposed(fn: Callable[[], None]) -> bool:
    """Runs `fn` with SIGINT deliverable (the storm tests block it around their own
    bookkeeping); False if a KeyboardInterrupt ended it."""
    try:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            fn()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except KeyboardInterrupt:
        return False
    return True


def _ours() -> None:
    if signal.getsignal(signal.SIGINT) is not _on_sigint:
        pytest.skip("SIGINT is handled by someone else here")


def _ctrl_c_now() -> None:
    """A real SIGINT to the main thread, delivered before this returns (the Python handler then
    runs at the interpreter's next check)."""
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGINT)


def _interrupted(fn: Callable[[], Any]) -> bool:
    """Runs `fn`, then gives a Ctrl-C that was held back time to land; True if one did."""
    try:
        fn()
        for _ in range(400):  # a held-back one is sent again about a millisecond later
            time.sleep(0.005)
    except KeyboardInterrupt:
        return True
    return False


def test_ctrl_c_right_after_a_staged_copy_is_submitted(target: Target, dev: Device,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C that lands the moment a staged copy's submission returns, before the runtime
    noted which timeline value frees the staging buffer, is held back until that is noted: the
    next copy then waits for the staging buffer instead of overwriting it while the first copy
    is still queued (behind a gate here)."""
    _ours()
    a, b = dev.alloc(N * 4), dev.alloc(N * 4)
    x, y = np.full(N, 1, np.float32), np.full(N, 2, np.float32)
    gate = _gated(dev)
    submit_copy = dev._submit_copy
    armed = [True]

    def submit_then_ctrl_c(*args: Any) -> int:
        v: int = submit_copy(*args)
        if armed[0]:
            armed[0] = False
            _ctrl_c_now()
        return v

    monkeypatch.setattr(dev, "_submit_copy", submit_then_ctrl_c)
    assert _interrupted(lambda: dev.copyin(a, x))

    def open_gate() -> None:
        gate.value = 1

    opener = threading.Timer(0.2, open_gate)  # the second copy waits for the first one
    opener.start()
    dev.copyin(b, y)
    opener.join()
    np.testing.assert_array_equal(_read(dev, a), x)
    np.testing.assert_array_equal(_read(dev, b), y)
    gate.release()


def test_ctrl_c_while_a_pending_copy_completes_leaks_nothing(target: Target, dev: Device,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """A Ctrl-C as `PendingCopy.wait()` gives its pinned buffer back is held back until it is
    back: the copy is complete, and no pinned memory is left allocated."""
    _ours()
    a = dev.alloc(N * 4)
    x = np.arange(N, dtype=np.float32)
    dev.copyin(a, x)
    out = np.zeros(N, np.float32)
    pending = dev.copyout_async(out, a)
    live = dev.allocator.live_count  # a, the pinned buffer, and what the device keeps
    free = dev.free

    def ctrl_c_then_free(buf: Any) -> None:
        if buf is pending._pinned:
            _ctrl_c_now()
        free(buf)

    monkeypatch.setattr(dev, "free", ctrl_c_then_free)
    assert _interrupted(pending.wait)
    pending.wait()
    np.testing.assert_array_equal(out, x)
    assert dev.allocator.live_count == live - 1


def test_ctrl_c_inside_the_mock_doorbell_of_a_native_launch(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The native NVIDIA launch rings the mock GPU's doorbell through a Python call, outside the
    submission lock; on hardware that is one store, so a Ctrl-C landing inside it is held back
    until the doorbell has been rung: the launch runs, and the device goes on."""
    from runtime.drivers.nv.launcher import native_helper
    from tests.runtime.test_device_contract import _mock_nv
    if native_helper() is None:
        pytest.skip("the native launch helper is not available here")
    t = _mock_nv()
    d = t.open()
    try:
        _ours()  # (the first device opened installs the handler)
        d.launch_native = True  # type: ignore[attr-defined]
        prg, args = t.vadd(d)
        a, b, c = (d.alloc(N * 4) for _ in range(3))
        d.copyin(a, np.full(N, 3, np.float32))
        d.copyin(b, np.full(N, 4, np.float32))
        _launch(t, d, prg, args, a, b, c, wait=True)  # the launcher is made: the native one
        d.copyin(c, np.zeros(N, np.float32))
        d.synchronize()
        gpu = d.os.nv.gpus[0]  # type: ignore[attr-defined]
        rung = gpu.doorbell_rung
        seen: list[bool] = []

        def ctrl_c_then_ring(offset: int, value: int) -> None:
            if not seen:
                seen.append(d._submit.held_here())
                _ctrl_c_now()
            rung(offset, value)

        monkeypatch.setattr(gpu, "doorbell_rung", ctrl_c_then_ring)
        assert _interrupted(lambda: _launch(t, d, prg, args, a, b, c))
        assert seen == [False]  # rung by the native launch (the Python one holds the lock)
        d.synchronize(timeout_ms=3000)
        assert d.timeline_signal.value == d.timeline_value
        np.testing.assert_array_equal(_read(d, c), np.full(N, 7, np.float32))
    finally:
        d.close()


# A finalizer (a __del__, a weakref.finalize or weak container callback, a generator closed when
# dropped) runs wherever the object happens to die, and an exception raised in it cannot reach the
# interrupted code: Python reports it as unraisable and drops it. So a Ctrl-C landing there is
# held back until the finalizer is done, and raised in the main thread then.
class _Mortal:
    """An object to drop (weak-referenceable)."""


class _Dies(_Mortal):
    def __init__(self, fin: Callable[[], None]) -> None:
        self.fin = fin

    def __del__(self) -> None:
        # A Ctrl-C can end __init__ before `fin` is set; the half-made object still dies here.
        fin = self.__dict__.get("fin")
        if fin is not None:
            fin()


class _SpySet(set):  # type: ignore[type-arg]
    """A weak container's storage whose discard (called by its removal callback) runs `fin`."""

    fin: Callable[[], None]

    def discard(self, item: Any) -> None:
        self.fin()
        super().discard(item)


def _drop_with_finalizer(kind: str, fin: Callable[[], None]) -> Callable[[], None]:
    """What drops an object whose finalizer of kind `kind` calls `fin`."""
    def drop() -> None:
        obj: Any = _Mortal()
        keep: list[Any] = []
        if kind == "__del__":
            obj = _Dies(fin)
        elif kind == "weakref.finalize":
            weakref.finalize(obj, fin)
        elif kind == "WeakSet":
            ws: weakref.WeakSet[Any] = weakref.WeakSet()
            ws.add(obj)
            spy = _SpySet(ws.data)
            spy.fin = fin
            ws.data = spy
            keep.append(ws)
        elif kind == "generator":
            def gen() -> Iterator[None]:
                try:
                    yield
                finally:
                    fin()
            obj = gen()
            next(obj)
        else:  # a plain weakref callback: not recognised while it runs, see below
            keep.append(weakref.ref(obj, lambda _: fin()))
        del obj  # the finalizer runs here
    return drop


def _ctrl_c_and_step() -> None:
    """A Ctrl-C to the main thread, then Python code until the SIGINT handler has run (and held
    it back), or until it raised KeyboardInterrupt here."""
    from runtime.hcq.device import interrupt_pending
    _ctrl_c_now()
    deadline = time.monotonic() + 10
    while not interrupt_pending():
        assert time.monotonic() < deadline, "the SIGINT handler did not run"
        _ours()


def _record_unraisable(monkeypatch: pytest.MonkeyPatch, record: Callable[[Any], None]) -> None:
    """`record` stands in for the unraisable hook that the runtime's hook passes other
    exceptions on to (for the hook itself, where the runtime installed none)."""
    hook = sys.unraisablehook
    if hasattr(hook, "previous"):
        monkeypatch.setattr(hook, "previous", record)
    else:
        monkeypatch.setattr(sys, "unraisablehook", record)


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """A device is open (so the runtime handles SIGINT), and what reaches the unraisable hook
    that was installed before the runtime's is recorded instead of reported."""
    from tests.runtime.test_device_contract import _mock_amd
    d = _mock_amd().open()
    try:
        _ours()
        seen: list[Any] = []
        _record_unraisable(monkeypatch, lambda u: seen.append((u.exc_type, u.object)))
        yield seen
    finally:
        d.close()


@pytest.mark.parametrize("kind", ["__del__", "weakref.finalize", "WeakSet", "generator"])
def test_ctrl_c_inside_a_finalizer_is_held_until_it_is_done(kind: str,
                                                            unraisable: list[Any]) -> None:
    """A Ctrl-C that lands while a finalizer runs is held back: the finalizer completes, nothing
    is reported as unraisable, and the KeyboardInterrupt is raised once it is done."""
    done: list[bool] = []

    def fin() -> None:
        _ctrl_c_and_step()
        done.append(True)

    assert _interrupted(_drop_with_finalizer(kind, fin))
    assert done == [True]
    assert unraisable == []


def test_a_storm_of_ctrl_c_while_finalizers_run(unraisable: list[Any]) -> None:
    """SIGINT every few milliseconds while objects with finalizers of every recognised kind die
    (each finalizer runs Python code for a while): every finalizer that started completes, none
    reports an unraisable KeyboardInterrupt, and the Ctrl-Cs are raised outside them."""
    from runtime.hcq.device import interrupt_pending
    main = threading.main_thread().ident
    assert main is not None
    stop = threading.Event()
    kinds = ["__del__", "weakref.finalize", "WeakSet", "generator"]
    started, done = [0], [0]

    def fin() -> None:
        started[0] += 1
        for _ in range(200):
            _ours()
        done[0] += 1

    def storm() -> None:
        rng = random.Random(2)
        while not stop.wait(rng.uniform(0.001, 0.004)):
            signal.pthread_kill(main, signal.SIGINT)

    def drop_then_linger(kind: str) -> None:
        _drop_with_finalizer(kind, fin)()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.0005:  # where a held-back Ctrl-C lands
            _ours()

    interrupted = 0

    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    t = threading.Thread(target=storm, daemon=True)
    try:
        t.start()
        deadline = time.perf_counter() + 1.0
        i = 0
        while time.perf_counter() < deadline:
            interrupted += not _exposed(lambda: drop_then_linger(kinds[i % len(kinds)]))
            i += 1
        stop.set()
        t.join(timeout=10)
        for _ in range(100):  # the last ones, held back or on their way
            interrupted += not _exposed(lambda: time.sleep(0.005))
            if not interrupt_pending():
                break
    finally:
        stop.set()
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    assert interrupted > 0 and started[0] > 0
    assert done[0] == started[0]
    assert unraisable == []


def test_ctrl_c_escaping_a_weakref_callback_is_raised_not_dropped(unraisable: list[Any]) -> None:
    """A plain weakref callback is not recognised as a finalizer while it runs, so a Ctrl-C
    there ends it; the KeyboardInterrupt it lets escape is not printed and dropped as unraisable
    but raised again in the main thread."""
    def fin() -> None:
        _ctrl_c_now()
        while True:  # until the KeyboardInterrupt ends the callback
            _ours()

    assert _interrupted(_drop_with_finalizer("weakref callback", fin))
    assert unraisable == []


def test_ctrl_c_while_an_unraisable_error_is_reported_is_held(unraisable: list[Any],
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """A Ctrl-C that lands while the unraisable hook reports a finalizer's own error waits for
    the report to be made."""
    seen: list[Any] = []

    def report(u: Any) -> None:
        _ctrl_c_and_step()
        seen.append(u.exc_type)

    _record_unraisable(monkeypatch, report)

    def fails() -> None:
        raise ValueError("a finalizer's own error")

    assert _interrupted(_drop_with_finalizer("__del__", fails))
    assert seen == [ValueError]


def _small_device(vendor: str, room: str) -> Device:
    """A mock device whose copy ring (room "ring") or kernel-argument arena ("arena") fills up
    after a few submissions."""
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import AMDDevice, NVDevice
    arena = {"kernarg_arena_B": 4096} if room == "arena" else {}
    if vendor == "amd":
        return AMDDevice("mock-amd:0", os=MockOS.with_amd_gpus(1), sdma_ring_B=4096, **arena)
    return NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1), gpfifo_entries=16,
                    pushbuf_B=8192, **arena)


@pytest.mark.parametrize("vendor,room", [("amd", "ring"), ("nv", "ring"), ("amd", "arena")])
def test_ctrl_c_while_a_submission_waits_for_room(vendor: str, room: str) -> None:
    """The timeline is held back by a gate and the host submits until a submission has to wait,
    holding the submission lock, for ring space (copy-engine fills) or for the argument arena to
    wrap (launches). A Ctrl-C then is raised at once, not when the wait gives up; the device is
    consistent (the waiting submission left nothing behind) and goes on once the gate opens."""
    from tests.runtime.test_device_contract import _mock_amd, _mock_nv
    t = (_mock_amd if vendor == "amd" else _mock_nv)()
    d = _small_device(vendor, room)
    try:
        _ours()  # (the first device opened installs the handler)
        d.default_timeout_ms = 10_000.0  # how long a held-back Ctrl-C would wait
        prg, args = t.vadd(d)
        a, b, c = (d.alloc(N * 4) for _ in range(3))
        d.copyin(a, np.full(N, 1, np.float32))
        d.copyin(b, np.full(N, 2, np.float32))
        d.synchronize()
        gate = _gated(d)
        sent = [0.0]

        def ctrl_c_once_stuck() -> None:
            last = -1
            while d.timeline_value != last:  # the host stopped getting submissions through
                last = d.timeline_value
                time.sleep(0.2)
            sent[0] = time.perf_counter()
            _ctrl_c_now()

        sender = threading.Thread(target=ctrl_c_once_stuck, daemon=True)
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            for _ in range(100_000):
                if room == "ring":
                    d.fill(c, 0)
                else:
                    _launch(t, d, prg, args, a, b, c)
        assert sent[0] and time.perf_counter() - sent[0] < 3.0
        sender.join()
        assert d.timeline_signal.value < d.timeline_value  # the gate still holds the work
        gate.value = 1
        d.synchronize()
        assert d.timeline_signal.value == d.timeline_value
        _launch(t, d, prg, args, a, b, c)
        np.testing.assert_array_equal(_read(d, c), np.full(N, 3, np.float32))
    finally:
        d.close()


def test_ctrl_c_from_a_timer_signal(target: Target, dev: Device) -> None:
    """The same with the signal from the kernel's interval timer (SIGALRM made a Ctrl-C)."""
    if not hasattr(signal, "setitimer"):
        pytest.skip("no interval timers here")
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    dev.copyin(a, np.ones(N, np.float32))
    dev.copyin(b, np.ones(N, np.float32))
    gate = _gated(dev)
    _launch(target, dev, prg, args, a, b, c)

    def to_ctrl_c(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, to_ctrl_c)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            dev.synchronize(timeout_ms=20_000)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    gate.value = 1
    dev.synchronize()
    np.testing.assert_array_equal(_read(dev, c), np.full(N, 2, np.float32))


# ------------------------------------------------------------------------------------ fork
@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="needs fork")
def test_a_forked_child_refuses_the_parents_device(target: Target, dev: Device) -> None:
    """After fork the child's copy of the device refuses every use with DeviceForked (the queues
    and memory are the parent's) and the child opens a device of its own; the parent's device is
    untouched."""
    if target.name == "nv":
        pytest.skip("the child would have to open the real GPU again")
    buf = dev.alloc(4096)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 0
        try:
            for use in (lambda: dev.alloc(16), lambda: dev.copyin(buf, bytes(16)),
                        dev.synchronize, lambda: dev.free(buf)):
                try:
                    use()
                    code |= 1
                except DeviceForked as e:
                    if dev.name not in str(e) or "fork" not in str(e):
                        code |= 2
            dev.close()  # releases nothing of the parent's
            from runtime.hcq import open_device
            with open_device(f"mock-{target.name.split('-')[1]}:3") as own:  # a device of its own
                b = own.alloc(64)
                own.copyin(b, b"\x05" * 64)
                got = bytearray(64)
                own.copyout(got, b)
                if got != b"\x05" * 64:
                    code |= 8
        except BaseException:
            code |= 4
        os.write(w, bytes([code]))
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    got = os.read(r, 1)
    os.close(r)
    assert status == 0 and got == b"\x00", (status, got)
    dev.copyin(buf, b"\x07" * 16)  # the parent's device goes on
    out = bytearray(16)
    dev.copyout(out, buf)
    assert out == b"\x07" * 16


# ------------------------------------------------------------------------------------ misc
def test_a_second_open_of_the_same_gpu_names_the_open_device() -> None:
    from runtime.hcq import open_device
    d = open_device("mock-amd:1")
    try:
        with pytest.raises(HCQError, match=r"mock-amd:1: this GPU is already open in this "
                                           r"process as AMDDevice\('mock-amd:1'"):
            open_device("mock-amd:1")
        d.alloc(16)  # the open device is unaffected
    finally:
        d.close()
    open_device("mock-amd:1").close()  # and once closed it opens again


# ------------------------------------------------------------------------------------ gates
def test_a_gate_that_never_opens_is_named_and_the_device_goes_on(target: Target,
                                                                 dev: Device) -> None:
    """A graph waiting for a signal nothing sets times out naming the graph node and the signal;
    once the host sets it the held-back work runs and the device goes on."""
    from runtime.hcq import GraphWait, SignalTimeout
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    dev.copyin(a, np.ones(N, np.float32))
    dev.copyin(b, np.ones(N, np.float32))
    gate = dev.new_signal(0)
    g = dev.graph([GraphWait(gate, 1), Launch(prg, args(a, b, c, N), target.grid(N),
                                              target.local)])
    with pytest.raises(SignalTimeout) as e:
        g.replay(wait=True, timeout_ms=300)
    assert "waiting for graph node 0 (GraphWait 0" in str(e.value)
    assert f"{gate!r} must reach 1" in str(e.value)
    gate.value = 1
    dev.synchronize()
    np.testing.assert_array_equal(_read(dev, c), np.full(N, 2, np.float32))
    assert "GraphWait" not in dev.describe_state()  # reached: no longer reported
    g.replay(wait=True)
    g.free()


# ------------------------------------------------------------------------------------ a host that
# forgets to wait: the mock GPUs run asynchronously, so these mistakes show as on hardware
def test_reading_before_the_kernel_ran_sees_old_bytes(target: Target, dev: Device) -> None:
    """A host that reads a kernel's output through a CPU mapping without waiting sees what was
    there before (the kernel is held back by a gate, so this is deterministic), and `done()` of
    an asynchronous copy stays False until the work has run. (A read leaves no trace the mock
    could report as a hazard: the stale value is what shows.)"""
    if target.name == "nv":
        pytest.skip("device memory of the real GPU is not mapped here")
    prg, args = target.vadd(dev)
    a, b = (dev.alloc(N * 4) for _ in range(2))
    c = dev.alloc(N * 4, cpu_access=True)
    dev.copyin(a, np.ones(N, np.float32))
    dev.copyin(b, np.ones(N, np.float32))
    dev.synchronize()
    gate = _gated(dev)
    _launch(target, dev, prg, args, a, b, c)
    out = np.zeros(N, np.float32)
    pending = dev.copyout_async(out, c)
    time.sleep(0.05)  # however long the host waits, the gate holds the work back
    assert not pending.done()
    assert not np.frombuffer(c.cpu_view(), np.float32).any()  # too early: nothing written yet
    gate.value = 1
    pending.wait()
    np.testing.assert_array_equal(out, np.full(N, 2, np.float32))
    np.testing.assert_array_equal(np.frombuffer(c.cpu_view(), np.float32), out)


def test_a_host_write_racing_a_queued_kernel_changes_its_input(target: Target,
                                                               dev: Device) -> None:
    """The host writes a kernel's input through a CPU mapping after the launch but before the
    kernel ran: the kernel sees the new bytes (the launch did not copy them), as on a GPU, and
    the mock, which sees the kernel queued behind the gate, reports the race as a HostHazard
    naming the buffer and the kernel."""
    from runtime.drivers.mock.host_races import HostHazard
    if target.name == "nv":
        pytest.skip("device memory of the real GPU is not mapped here")
    prg, args = target.vadd(dev)
    a = dev.alloc(N * 4, cpu_access=True)
    b, c = (dev.alloc(N * 4) for _ in range(2))
    a.cpu_view()[:] = np.ones(N, np.float32).tobytes()
    dev.copyin(b, np.ones(N, np.float32))
    dev.synchronize()
    gate = _gated(dev)
    _launch(target, dev, prg, args, a, b, c)
    dev.os.wait_idle()  # type: ignore[attr-defined]  (the GPU has seen the launch)
    a.cpu_view()[:] = np.full(N, 5, np.float32).tobytes()  # the host forgot to wait
    kernel = "kernel vadd" if target.name == "mock-nv" else f"the kernel at {prg.pgm_va:#x}"
    with pytest.warns(HostHazard, match=rf"allocation at {a.va:#x} \(\+{N * 4:#x}\) while "
                                        rf"{kernel} .*was queued"):
        gate.value = 1
        dev.synchronize()
    np.testing.assert_array_equal(_read(dev, c), np.full(N, 6, np.float32))
    assert any(f"{a.va:#x}" in h for h in dev.os.host_races.hazards)  # type: ignore[attr-defined]


def test_a_host_write_racing_a_running_kernel_is_reported() -> None:
    """A kernel that polls a flag the host then sets (through its CPU mapping) while the kernel
    runs: the kernel sees it and ends, and the mock AMD GPU, which runs the kernel in time
    slices, reports the host's write as a HostHazard naming the flag's buffer and the kernel.
    (A deliberate flag like this one is reported too: the mock cannot tell it from a race.)"""
    from runtime.drivers.mock.host_races import HostHazard
    from runtime.drivers.amd.compiler import AMDCompiler
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import AMDDevice
    from tests.runtime.test_amd_mock_hang import SPIN
    missing = AMDCompiler().available()
    if missing is not None:
        pytest.skip(f"OpenCL compiler unavailable: {missing}")
    d = AMDDevice("amd:0", os=MockOS.with_amd_gpus(1))  # a machine of its own: a clean log
    try:
        spin = d.program(d.compiler.compile(SPIN), "spin")
        flag, out = d.alloc(4, cpu_access=True), d.alloc(4 * 64)
        d.copyin(out, bytes(4 * 64))
        flag.cpu_view()[:] = bytes(4)
        spin(flag, out, global_size=(2, 1, 1), local_size=(32, 1, 1))
        deadline = time.perf_counter() + 30
        while not any("running for" in ln for ln in d.os.kernel_log()):
            assert time.perf_counter() < deadline, "the kernel never ran a time slice"
            time.sleep(0.005)  # polls the mock's status until the kernel has run a slice
        with pytest.warns(HostHazard, match=rf"allocation at {flag.va:#x} \(\+0x1000\) "
                                            rf"while the kernel at {spin.pgm_va:#x} .*was "
                                            "running"):
            flag.cpu_view()[:] = (1).to_bytes(4, "little")
            d.synchronize(timeout_ms=20_000)
    finally:
        d.close()


def test_a_host_write_during_a_time_slice_of_a_mock_nv_grid_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mock NVIDIA GPU runs a PTX grid in time slices; a host write that lands while a
    slice runs (made here from inside the second slice, so it surely does) is told from the
    grid's own writes, which the mock records for a grid it watches, and reported naming the
    flag's buffer and the kernel. The grid's own store to `out` is not reported."""
    from pathlib import Path
    from runtime.drivers.mock.host_races import HostHazard
    from runtime.drivers.mock.ptx.execute import Grid
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.hcq import MemKind, NVDevice
    from tests.runtime.test_ptx_interp import _nvrtc
    _nvrtc()
    d = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))  # a machine of its own
    try:
        src = (Path(__file__).parent / "data" / "nv_kernels.cu").read_text()
        prg = d.program(d.compiler.compile(src, "nv_kernels.cu"), "wait_flag")
        flag, out = d.alloc(4, kind=MemKind.HOST), d.alloc(4)
        d.copyin(out, bytes(4))
        fv = np.frombuffer(flag.view, np.uint32)  # type: ignore[arg-type]
        fv[0] = 0
        advance = Grid.advance
        slices = [0]

        def host_writes_in_slice_two(grid: Grid, budget_s: float) -> bool:
            slices[0] += 1
            if slices[0] == 2:
                fv[0] = 7  # as if the host's store landed now
            return advance(grid, budget_s)

        monkeypatch.setattr(Grid, "advance", host_writes_in_slice_two)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            prg(flag, out, global_size=(1, 1, 1), local_size=(32, 1, 1))
            d.synchronize(timeout_ms=20_000)
        msgs = [str(w.message) for w in got if issubclass(w.category, HostHazard)]
        assert slices[0] >= 2
        assert len(msgs) == 1, msgs
        assert re.search(rf"bytes \[{flag.va:#x}, {flag.va + 1:#x}\) of the allocation at "
                         rf"{flag.va:#x} \(\+0x1000\) while kernel wait_flag .* was running",
                         msgs[0]), msgs[0]
        got_out = np.zeros(1, np.uint32)
        d.copyout(got_out, out)
        assert got_out[0] == 7
    finally:
        d.close()


# ------------------------------------------------------------------------------------ both modes
def test_the_device_contract_holds_in_the_deterministic_mode() -> None:
    """The suite runs against the asynchronous mocks; the device contract (on both mock GPUs) is
    run again here with HCQ_MOCK_SYNC=1, where the queues run inside the doorbell write."""
    import subprocess
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HCQ_MOCK_SYNC": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        "tests/runtime/test_device_contract.py", "-k", "mock",
                        "tests/runtime/test_real_conditions.py::test_threads_share_a_device"],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout


def test_the_deterministic_mode_runs_inside_the_doorbell() -> None:
    from runtime.drivers.mock.amd_gpu import MockAMDGPU
    from runtime.drivers.mock.engine import SYNC_ENV, sync_from_env
    from runtime.drivers.mock.os import MockOS
    old = os.environ.get(SYNC_ENV)
    try:
        os.environ[SYNC_ENV] = "1"
        assert sync_from_env()
        gpu: MockAMDGPU = MockOS.with_amd_gpus(1).drivers[0].gpus[0]
        assert gpu.sync and not gpu.async_doorbell
        os.environ[SYNC_ENV] = "0"
        assert not MockOS.with_amd_gpus(1).drivers[0].gpus[0].sync
    finally:
        if old is None:
            os.environ.pop(SYNC_ENV, None)
        else:
            os.environ[SYNC_ENV] = old


# ------------------------------------------------------------------------------------ arguments
def test_bad_arguments_are_refused_naming_them(target: Target, dev: Device) -> None:
    from runtime.hcq import ArgumentError, ProgramError
    for kind in (None, "vram", 3):
        with pytest.raises(ArgumentError, match=f"kind must be a MemKind.*{kind!r}"):
            dev.alloc(64, kind=kind)  # type: ignore[arg-type]
    free_before = sum(p.free_count for p in dev._signal_pools)
    for value in (-1, "x", 2.5, 2**64):
        with pytest.raises(ArgumentError, match="new_signal: value"):
            dev.new_signal(value)  # type: ignore[arg-type]
    assert sum(p.free_count for p in dev._signal_pools) == free_before  # no slot leaked
    buf = dev.alloc(64)
    with pytest.raises(ArgumentError, match="slice: offset must be an integer.*0.5"):
        buf.slice(0.5, 4)  # type: ignore[arg-type]
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    if target.name == "mock-amd":  # the code object says which parameters are pointers
        with pytest.raises(ProgramError, match="argument 'arg1' is a pointer.*1.5"):
            prg(a, 1.5, c, global_size=target.grid(N), local_size=target.local)
        g = dev.graph([Launch(prg, args(a, b, c, N), target.grid(N), target.local)])
        with pytest.raises(ProgramError, match="graph launch 0: argument 'arg2' is a pointer"):
            g.replay({0: {0: b, 2: 1.5}})  # the first update is valid, the second is not
        assert g.kernargs[0].view[:8].cast("Q")[0] == a.va  # nothing was applied
        g.free()
    assert dev.timeline_signal.value == dev.timeline_value or dev.synchronize() is None


def test_a_graph_refuses_to_run_on_a_freed_buffer(target: Target, dev: Device) -> None:
    from runtime.hcq import ProgramError
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    g = dev.graph([Launch(prg, args(a, b, c, N), target.grid(N), target.local)])
    dev.free(c)
    other = dev.alloc(N * 4)  # may take c's memory
    dev.copyin(other, np.full(N, 9, np.float32))
    with pytest.raises(ProgramError, match=r"graph node 0 \(launch 0 of \w+\) argument 2: "
                                           r"Buffer.* was freed"):
        g.replay()
    g.replay({0: {2: other}})  # a live buffer in its place
    dev.copyin(a, np.ones(N, np.float32))
    dev.copyin(b, np.ones(N, np.float32))
    g.replay(wait=True)
    np.testing.assert_array_equal(_read(dev, other), np.full(N, 2, np.float32))
    g.free()


def test_a_copy_out_dropped_before_its_wait_gives_its_pinned_memory_back(target: Target,
                                                                         dev: Device) -> None:
    """Copies out dropped unwaited (also after a Ctrl-C ended their wait) while the GPU has not
    written them yet: their pinned memory is not freed under the GPU's writes, and it goes back
    once the GPU is done (at the next synchronize), instead of staying allocated until close."""
    a = dev.alloc(N * 4)
    dev.copyin(a, np.arange(N, dtype=np.float32))
    dev.copyout_async(np.zeros(N, np.float32), a).wait()  # the pool has pinned memory now
    gate = _gated(dev)
    live = dev.allocator.live_count
    out = np.zeros(N, np.float32)
    for _ in range(3):
        dev.copyout_async(out, a)  # dropped at once
    held = dev.copyout_async(out, a)
    if signal.getsignal(signal.SIGINT) is _on_sigint:
        timer = threading.Timer(0.05, _ctrl_c_now)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            held.wait(timeout_ms=20_000)
        timer.join()
    del held
    assert dev.allocator.live_count == live + 4  # the GPU has yet to write them
    gate.value = 1
    dev.synchronize()
    assert dev.allocator.live_count == live
    np.testing.assert_array_equal(out, np.zeros(N, np.float32))  # none was waited for


def test_a_pending_copy_refuses_a_source_freed_while_in_flight(target: Target,
                                                               dev: Device) -> None:
    """A copy out whose source buffer is freed (and its memory handed to a new allocation that
    the host fills) before the GPU copied it: wait() refuses, naming the copy and the buffer, and
    leaves the destination alone; a source freed after the copy finished is fine."""
    from runtime.hcq import HCQMemoryError
    a, spare = dev.alloc(N * 4), dev.alloc(N * 4)
    dev.copyin(a, np.full(N, 1, np.float32))
    dev.synchronize()
    gate = _gated(dev)
    out = np.zeros(N, np.float32)
    pending = dev.copyout_async(out, a.slice(0, N * 4))
    a_repr = repr(a)
    dev.free(a)
    other = dev.alloc(N * 4)  # may take a's memory
    dev.copyin(other, np.full(N, 9, np.float32))
    gate.value = 1
    for _ in range(2):  # and again: the refusal stays
        with pytest.raises(HCQMemoryError) as e:
            pending.wait()
        assert f"PendingCopy({dev.name}, {N * 4} B, timeline value {pending.value})" \
            in str(e.value)
        assert "was freed before the copy finished" in str(e.value)
        assert a_repr.split(",")[0] in str(e.value)
    assert not out.any()
    np.testing.assert_array_equal(_read(dev, other), np.full(N, 9, np.float32))
    done = dev.copyout_async(out, other)  # freed once the GPU copied it: no complaint
    dev.synchronize()
    dev.free(other)
    done.wait()
    np.testing.assert_array_equal(out, np.full(N, 9, np.float32))
    dev.free(spare)
    assert not dev._pending_copies
    gate.release()


def test_elapsed_time_between_timing_events(target: Target, dev: Device) -> None:
    prg, args = target.vadd(dev)
    a, b, c = (dev.alloc(N * 4) for _ in range(3))
    start = dev.record(timing=True)
    _launch(target, dev, prg, args, a, b, c)
    end = dev.record(timing=True)
    end.wait()
    with pytest.raises(HCQError, match="the start event .* has no timestamp"):
        end.elapsed_time(dev.record())
    dt = end.elapsed_time(start)
    assert 0 <= dt < 10.0
    s = dev.stream()
    s0 = s.record(timing=True)
    s.launch(prg, *args(a, b, c, N), global_size=target.grid(N), local_size=target.local)
    s1 = s.record(timing=True)
    s.synchronize()
    assert 0 <= s1.elapsed_time(s0) < 10.0
    s.close()
