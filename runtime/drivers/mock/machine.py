"""The mock machine of this process, one per vendor, shared by every mock device opened by name.

"mock-nv:0" and "mock-nv:1" are then two GPUs of one host, as "nv:0" and "nv:1" are: one mock
kernel (`MockOS`) whose driver sees both, so peer mappings, one KFD process and cross-device waits
can be modelled. A device made with an explicit `os=` uses that machine instead.

This is a lease table, not a cache: a machine lives while a device opened on it is open, and the
first open after the last close builds a fresh one, so a test that opens "mock-amd:0" never sees
what an earlier test left behind. Access is under a lock (devices may be opened from threads).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from runtime.drivers.mock.os import MockOS

#: GPUs of each mock machine ("mock-amd:0" .. "mock-amd:3"); every pair can reach the other
MOCK_GPUS = 4


@dataclass
class _Lease:
    machine: MockOS
    users: int


_leases: dict[str, _Lease] = {}
_lock = threading.Lock()


def _forget_after_fork() -> None:
    # A forked child gets copies of the parent's machines without their GPU threads, and maybe
    # with a lock another thread held: it builds machines of its own.
    global _lock
    _lock = threading.Lock()
    _leases.clear()


import os as _os  # noqa: E402  (only for the fork hook)

if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_forget_after_fork)


def _build(vendor: str) -> MockOS:
    if vendor == "amd":
        return MockOS.with_amd_gpus(MOCK_GPUS)
    from runtime.drivers.mock.nv_rm import NvMockOS
    return NvMockOS.with_nv_gpus(MOCK_GPUS)


def lease(vendor: str) -> tuple[MockOS, Callable[[], None]]:
    """The mock machine for `vendor` ("amd" or "nv") and the function that gives the lease back
    (call it exactly once, when the device using the machine is closed)."""
    with _lock:
        held = _leases.get(vendor)
        if held is None:
            held = _leases[vendor] = _Lease(_build(vendor), 0)
        held.users += 1
    done = [False]

    def release() -> None:
        with _lock:
            if done[0]:
                return
            done[0] = True
            held.users -= 1
            if held.users == 0 and _leases.get(vendor) is held:
                del _leases[vendor]

    return held.machine, release
