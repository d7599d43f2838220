"""The NVIDIA launch and wait path never lets the GIL go for a moment and takes it straight back.

CPython hands the GIL to a waiting thread at every switch interval, but only when no hand-over
happened meanwhile: a waiting thread is woken by every release, and when the releasing thread
takes the GIL back first (it usually does: the release lasted one instruction), the waiting
thread starts its interval over. A loop that releases the GIL briefly, more often than once per
interval, keeps every other Python thread out; on a real GPU, whose waits end within
microseconds, a launch/wait loop did exactly that (a thread that sent a Ctrl-C every few
milliseconds got 8 turns in 1.5 s). So the runtime's own code holds the GIL through short native
calls and polls, and CPython's hand-over keeps the other threads running.

How the tests see a release: with the switch interval set far beyond the test's length, a second
thread runs only when the main thread lets the GIL go of its own accord; each time it runs it
notes where the main thread is (its innermost Python frame is the one that made the releasing
call). Releases inside the mock GPU (its interpreter's numpy work, its sleeps) are the mock's and
are not counted; every release from the runtime's code is a failure.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import Launch

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
MOCK = RUNTIME / "drivers" / "mock"


@contextmanager
def gil_releases() -> Iterator[list[str]]:
    """Collects, while the body runs, where the main thread let the GIL go of its own accord
    ("file:line" of the innermost frame, for frames in the runtime outside the mock GPUs)."""
    main = threading.get_ident()
    seen: list[str] = []
    stop = threading.Event()
    started = threading.Event()

    def watcher() -> None:
        started.set()
        while not stop.is_set():
            time.sleep(1e-4)  # a real sleep: the main thread takes the GIL meanwhile
            frame = sys._current_frames().get(main)
            if frame is None or stop.is_set():
                continue
            last = traceback.extract_stack(frame)[-1]
            path = Path(last.filename).resolve()
            if path.is_relative_to(RUNTIME) and not path.is_relative_to(MOCK):
                seen.append(f"{path.relative_to(RUNTIME.parent)}:{last.lineno}: {last.line}")

    old = sys.getswitchinterval()
    t = threading.Thread(target=watcher, daemon=True)
    sys.setswitchinterval(1000.0)
    try:
        t.start()
        started.wait()
        yield seen
    finally:
        stop.set()
        sys.setswitchinterval(old)
        t.join()


def test_the_store_fence_keeps_the_gil() -> None:
    """The fence every Python-route submission runs before its doorbell (an `sfence` stub)."""
    from runtime.drivers.nv import gpfifo
    with gil_releases() as seen:
        for _ in range(20_000):
            gpfifo.cpu_fence()
    assert not seen, seen[:5]


class _Signal:
    def __init__(self) -> None:
        self.value_view = [0]


class _NoMockOS:
    """An OS seam without the mock's `sleep_for_gpu`: the driver then polls as on a real GPU."""


def test_a_long_wait_on_a_real_gpu_keeps_the_gil() -> None:
    """`NVDevice.sleep_for_signal` as it runs on a real GPU, for 60 slices of a millisecond
    (work that is still running)."""
    from runtime.drivers.nv.device import NVDevice
    fake: Any = type("FakeNV", (), {"os": _NoMockOS()})()
    with gil_releases() as seen:
        for _ in range(60):
            NVDevice.sleep_for_signal(fake, _Signal(), 1, 1.0)  # type: ignore[arg-type]
    assert not seen, seen[:5]


def test_a_long_wait_still_lets_other_threads_run() -> None:
    """The other side of the same rule: with CPython's own switch interval, a thread that wants
    the GIL while the main thread polls gets it every interval."""
    from runtime.drivers.nv.device import NVDevice
    fake: Any = type("FakeNV", (), {"os": _NoMockOS()})()
    turns = [0]
    stop = threading.Event()

    def other() -> None:
        while not stop.wait(0.001):
            turns[0] += 1

    t = threading.Thread(target=other, daemon=True)
    t.start()
    try:
        for _ in range(300):
            NVDevice.sleep_for_signal(fake, _Signal(), 1, 1.0)  # type: ignore[arg-type]
    finally:
        stop.set()
        t.join()
    # 0.3 s of polling; one turn per switch interval (5 ms) would be 60
    assert turns[0] >= 10, turns


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_launches_copies_and_replays_keep_the_gil(native: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Ctrl-C storm test does on each round (copy in, launch, replay a graph, copy out),
    on the mock NVIDIA GPU in its deterministic mode: apart from the mock's own work, nothing on
    the way lets the GIL go."""
    monkeypatch.setenv("HCQ_MOCK_SYNC", "1")
    from tests.runtime.test_device_contract import N, _mock_nv
    target = _mock_nv()
    dev = target.open()
    try:
        prg, args = target.vadd(dev)
        dev.launch_native = native  # type: ignore[attr-defined]
        a, b, c = (dev.alloc(N * 4) for _ in range(3))
        g = dev.graph([Launch(prg, args(a, b, c, N), target.grid(N), target.local)])
        data, out = np.ones(N, np.float32), np.empty(N, np.float32)

        def ops() -> None:
            dev.copyin(a, data)
            prg(*args(a, b, c, N), global_size=target.grid(N), local_size=target.local)
            g.replay()
            dev.copyout(out, c)

        ops()  # first use: compile caches, launchers, staging buffers
        with gil_releases() as seen:
            for _ in range(10):
                ops()
        assert not seen, seen[:5]
        np.testing.assert_array_equal(out, np.ones(N, np.float32))
        g.free()
    finally:
        dev.close()
