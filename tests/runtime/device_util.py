"""Helpers for tests that drive a device's timeline by hand."""
from __future__ import annotations

from typing import Any


def hold_timeline(dev: Any, gate: Any) -> int:
    """Submits, as the timeline's next value, a copy-queue entry that waits for `gate` >= 1:
    the timeline stops there until the gate is set. Returns that value."""
    with dev.submit_lock:
        v = dev.timeline_value + 1
        q = dev.copy_queue().wait(dev.timeline_signal, v - 1).wait(gate, 1)
        dev.submit_timeline(q.signal(dev.timeline_signal, v), v)
    return int(v)
