"""The mock's host-race watch on its own: a change of a watched allocation counts as the host's
only when no engine wrote memory meanwhile and no small GPU store (a signal) landed there, and it
is reported only where the kernel actually touched memory when that is known. (The end-to-end
cases, on both mock GPUs, are in test_real_conditions.py.)"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pytest

from runtime.drivers.mock.host_races import HostHazard, HostRaces, pointers_in
from runtime.drivers.mock.memory import MockMemory

BUF, ARGS, OTHER = 0x10000, 0x20000, 0x30000


def _machine() -> tuple[MockMemory, HostRaces, np.ndarray, list[int]]:
    mem = MockMemory()
    races = HostRaces()
    mem.races = races
    buf = mem.map(BUF, 4096)
    args = mem.map(ARGS, 256)
    mem.map(OTHER, 1 << 21)  # too large to watch whole
    args[:24] = np.frombuffer(b"".join(v.to_bytes(8, "little") for v in (BUF, 7, OTHER + 8)),
                              np.uint8)
    ptrs = pointers_in(mem, [(ARGS, 256)])
    assert ptrs == [BUF, OTHER + 8]  # 7 is not an address
    return mem, races, buf, ptrs


def _reports(fn: Callable[[], None]) -> list[str]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in got if issubclass(w.category, HostHazard)]


def _run_on(races: HostRaces, key: str, touched: list[tuple[int, int]] | None = None,
            wrote: bool = False) -> Callable[[], None]:
    """The kernel `key` runs to its end (writing memory itself when `wrote`)."""
    def run() -> None:
        races.resume(key)
        if wrote:
            races.gpu_wrote()
        races.finished(key, touched)
    return run


def test_a_host_write_to_a_queued_kernels_buffer_is_reported() -> None:
    mem, races, buf, ptrs = _machine()
    races.watch("k", "kernel K", ptrs, mem, "queued", skip_va=[ARGS])
    buf[100:104] = 9  # the host

    (msg,) = _reports(_run_on(races, "k", wrote=True))
    assert f"bytes [{BUF + 100:#x}, {BUF + 104:#x}) of the allocation at {BUF:#x} (+0x1000) " \
           "while kernel K, which uses it, was queued" in msg
    assert races.hazards == [msg]


def test_what_the_gpu_wrote_is_not_the_hosts() -> None:
    mem, races, buf, ptrs = _machine()
    races.watch("k", "kernel K", ptrs, mem, "queued")
    buf[0] = 1
    races.gpu_wrote()  # a copy ran meanwhile: the change cannot be told apart, so it is not judged
    assert not _reports(_run_on(races, "k"))
    races.watch("k", "kernel K", ptrs, mem, "queued")
    mem.write_u64(BUF + 8, 5)  # a signal the GPU stored
    assert not _reports(_run_on(races, "k"))


def test_only_bytes_the_kernel_touched_are_reported() -> None:
    mem, races, buf, ptrs = _machine()
    for touched, expect in (([(BUF + 200, BUF + 300)], 0), ([(BUF, BUF + 120)], 1)):
        races.watch("k", "kernel K", ptrs, mem, "queued")
        buf[100] += 1
        assert len(_reports(_run_on(races, "k", touched))) == expect


def test_a_running_kernels_own_writes_are_not_the_hosts() -> None:
    mem, races, buf, ptrs = _machine()
    races.resume("k")  # not watched: its first slice starts
    buf[0] = 3  # the kernel writes during its slice
    races.gpu_wrote()
    races.paused("k", "kernel K", ptrs, mem, [ARGS])  # more to run: looked at now
    races.resume("k")
    buf[1] = 4  # the kernel again
    races.gpu_wrote()
    races.paused("k", "kernel K", ptrs, mem, [ARGS])
    buf[2] = 5  # the host, between slices
    msgs = _reports(_run_on(races, "k", wrote=True))
    assert len(msgs) == 1 and f"[{BUF + 2:#x}, {BUF + 3:#x})" in msgs[0]
    assert "was running" in msgs[0]
    races.forget("k")
    assert not races._watches and not races._stores


def test_host_writes_during_a_slice_are_told_from_the_kernels_own() -> None:
    """When the GPU says what a slice wrote, the other changes made while it ran are the
    host's, and the watch goes on with the bytes it compared."""
    mem, races, buf, ptrs = _machine()
    races.watch("k", "the kernel at 0x1000", ptrs, mem, "queued", skip_va=[ARGS])
    races.resume("k")
    buf[0] = 3  # the kernel, during its slice
    buf[9] = 4  # the host, during the same slice
    races.gpu_wrote()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        races.paused("k", "kernel K", ptrs, mem, [ARGS], written=[(BUF, BUF + 1)])
    races.resume("k")
    buf[1] = 5  # the kernel, during its last slice
    races.gpu_wrote()
    msgs = _reports(lambda: races.finished("k", written=[(BUF + 1, BUF + 2)]))
    assert len(msgs) == 1 and f"[{BUF + 9:#x}, {BUF + 10:#x})" in msgs[0]
    assert "while kernel K, which uses it, was running" in msgs[0]  # named as it ran


def test_a_large_allocation_is_watched_from_where_the_argument_points() -> None:
    """Of an allocation too large to copy whole, the MAX_WATCH_B bytes from the argument's
    pointer are watched: a host write there is reported naming the whole allocation; one
    beyond the window is not seen."""
    from runtime.drivers.mock.host_races import MAX_WATCH_B
    mem, races, _, ptrs = _machine()
    big, _ = mem.find(OTHER, 1)
    for off, seen in ((8 + 100, True), (8 + MAX_WATCH_B + 100, False), (4, False)):
        races.watch("k", "kernel K", ptrs, mem, "queued", skip_va=[ARGS])
        big[off] += 1
        msgs = _reports(_run_on(races, "k", wrote=True))
        assert len(msgs) == seen, (off, msgs)
        if seen:
            assert f"[{OTHER + off:#x}, {OTHER + off + 1:#x}) of the allocation at " \
                   f"{OTHER:#x} (+{1 << 21:#x})" in msgs[0]


def test_the_watch_is_a_warning_category_tests_can_assert() -> None:
    assert issubclass(HostHazard, UserWarning)
    with pytest.warns(HostHazard):
        HostRaces()._report("x")
