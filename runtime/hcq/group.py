"""Several devices of one process: opening them together, copies between them, and host waits on
many signals at once.

A device knows other devices only through `Device.map_peer` (another device's buffer mapped into
its address space) and `Device.map_signal` (another device's signal, for its queues to wait on or
write). This module composes those:

- `transfer(dst, src, size)` copies between buffers of any two devices and says how it did:
  `TransferPath.PEER` when the source's copy engine can write the destination directly (peer
  access for VRAM; any device of the same kernel for host memory), `HOST_BOUNCE` through pinned host
  memory both devices map (both copy engines, chunks pipelined on the GPUs by cross-device waits),
  `CPU_BOUNCE` when the devices do not share a kernel (the CPU copies chunk by chunk).
- `wait_all([(signal, value), ...])` blocks until every signal reached its value.
- `open_devices("nv:0", "nv:1")` opens several devices (all or none).

Ordering of a peer transfer, without a host wait: the source device's copy waits for the
destination's timeline (earlier work on `dst` is done), and the destination device's next
submission waits for that copy (a barrier on its copy queue that waits for the source's timeline).
"""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from runtime.hcq.errors import HCQError, HCQMemoryError, SignalTimeout
from runtime.hcq.memory import Buffer, MemKind

if TYPE_CHECKING:
    from runtime.hcq.device import Device
    from runtime.hcq.signal import Signal

#: bytes per chunk of a bounce transfer (two chunks in flight)
BOUNCE_CHUNK_B = 8 << 20
# Longest kernel sleep of `wait_all` between checks: the signal's device may not be the one whose
# interrupt announces it (a view made by map_signal), so waits are re-checked this often.
_WAIT_SLICE_MS = 5.0


class TransferPath(enum.Enum):
    """How `transfer` moved the bytes."""

    LOCAL = "local"              # both buffers on one device: its copy engine
    PEER = "peer"                # the source's copy engine wrote the destination directly
    HOST_BOUNCE = "host-bounce"  # both copy engines through pinned host memory both devices map
    CPU_BOUNCE = "cpu-bounce"    # the CPU copied between the two devices' staging buffers


@dataclass(frozen=True)
class TransferReport:
    """What `transfer` did: the path, the bytes, and the number of chunks it was split into."""

    path: TransferPath
    size_B: int
    chunks: int


def open_devices(*names: str) -> list["Device"]:
    """Opens every named device ("nv:0", "mock-amd:1", ...); if one fails, closes the others and
    re-raises. Mock devices opened by name share one mock machine per vendor."""
    from runtime.hcq import open_device
    devices: list[Device] = []
    try:
        for name in names:
            devices.append(open_device(name))
    except BaseException:
        for d in reversed(devices):
            d.close()
        raise
    return devices


def direct_possible(dst: Buffer, src: Buffer) -> str | None:
    """None when `src`'s device can write `dst` directly (what `TransferPath.PEER` needs), else
    why not."""
    sd, dd = src.device, dst.device
    if sd.os.kernel is not dd.os.kernel:
        return sd.peer_access(dd)
    if dst.spec.kind is not MemKind.VRAM:
        return None  # host memory: every GPU of the kernel can map it
    return sd.peer_access(dd)


def transfer(dst: Buffer, src: Buffer, size: int, dst_offset: int = 0, src_offset: int = 0, *,
             path: TransferPath | None = None) -> TransferReport:
    """Copies `size` bytes from `src` (at `src_offset`) to `dst` (at `dst_offset`), buffers of any
    two devices. By default the direct path when the source's device can write the destination
    (peer access), else a bounce through pinned host memory; `path` forces one (a forced `PEER`
    that is impossible raises `HCQMemoryError` with the reason).

    `LOCAL` and `PEER` transfers are ordered on both devices' timelines and not waited for; the
    bounce paths return when the bytes have arrived."""
    sd, dd = src.device, dst.device
    sd.check_range(src, src_offset, size, "transfer", "src")
    dd.check_range(dst, dst_offset, size, "transfer", "dst")
    if sd is dd:
        if path not in (None, TransferPath.LOCAL):
            raise HCQError(f"{path} does not apply: both buffers are on {sd.name}")
        sd.transfer(dst, src, size, dst_offset, src_offset)
        return TransferReport(TransferPath.LOCAL, size, 1 if size else 0)
    if path is TransferPath.LOCAL:
        raise HCQError(f"a LOCAL transfer needs one device, not {sd.name} and {dd.name}")
    same_kernel = sd.os.kernel is dd.os.kernel
    why_not = direct_possible(dst, src)
    if path is None:
        path = TransferPath.PEER if why_not is None else \
            TransferPath.HOST_BOUNCE if same_kernel else TransferPath.CPU_BOUNCE
    if path is TransferPath.PEER and why_not is not None:
        raise HCQMemoryError(f"no direct path from {sd.name} to {dd.name}: {why_not}")
    if path is TransferPath.HOST_BOUNCE and not same_kernel:
        raise HCQMemoryError(f"{sd.name} and {dd.name} cannot share host memory: they are not "
                             "GPUs of one kernel (use CPU_BOUNCE)")
    if size == 0:
        return TransferReport(path, 0, 0)
    if path is TransferPath.PEER:
        _peer_copy(dst, src, size, dst_offset, src_offset)
        return TransferReport(path, size, 1)
    if path is TransferPath.HOST_BOUNCE:
        return TransferReport(path, size, _host_bounce(dst, src, size, dst_offset, src_offset))
    return TransferReport(path, size, _cpu_bounce(dst, src, size, dst_offset, src_offset))


def _peer_copy(dst: Buffer, src: Buffer, size: int, dst_offset: int, src_offset: int) -> None:
    sd, dd = src.device, dst.device
    peer_dst = sd.map_peer(dst)
    dd_tl_here = sd.map_signal(dd.timeline_signal)
    sd_tl_there = dd.map_signal(sd.timeline_signal)
    after = dd.timeline_value
    with sd.submit_lock:  # one device's lock at a time: two devices' locks could deadlock
        v = sd.timeline_value + 1  # taken once the queue is built (Device.submit_timeline)
        q = sd.copy_queue().wait(sd.timeline_signal, v - 1)
        if after:
            q.wait(dd_tl_here, after)  # earlier work of the destination device on `dst` is done
        q.copy(peer_dst.va + dst_offset, src.va + src_offset, size)
        sd.submit_timeline(q.signal(sd.timeline_signal, v), v)
    _barrier(dd, sd_tl_there, v)


def _barrier(dev: "Device", other: "Signal", value: int) -> None:
    """Orders `dev`'s later submissions after `other` reaching `value` (a copy-queue wait)."""
    with dev.submit_lock:
        w = dev.timeline_value + 1  # taken once the queue is built (Device.submit_timeline)
        dev.submit_timeline(dev.copy_queue().wait(dev.timeline_signal, w - 1).wait(other, value)
                            .signal(dev.timeline_signal, w), w)


def _host_bounce(dst: Buffer, src: Buffer, size: int, dst_offset: int, src_offset: int) -> int:
    """Two pinned host chunks that both devices map: the source's copy engine fills one while the
    destination's drains the other; every hand-over is a cross-device wait on the GPUs."""
    sd, dd = src.device, dst.device
    chunk = min(size, BOUNCE_CHUNK_B)
    stages = [sd.alloc(chunk, kind=MemKind.GTT) for _ in range(2 if size > chunk else 1)]
    try:
        there = [dd.map_peer(s) for s in stages]
        sd_tl_there = dd.map_signal(sd.timeline_signal)
        dd_tl_here = sd.map_signal(dd.timeline_signal)
        busy = [0] * len(stages)   # destination timeline value that frees each stage
        off = k = last = 0
        while off < size:
            n, s = min(chunk, size - off), k % len(stages)
            with sd.submit_lock:
                v = sd.timeline_value + 1  # timeline values are taken once each queue is built
                q = sd.copy_queue().wait(sd.timeline_signal, v - 1)
                if busy[s]:
                    q.wait(dd_tl_here, busy[s])
                q.copy(stages[s].va, src.va + src_offset + off, n).signal(sd.timeline_signal, v)
                sd.submit_timeline(q, v)
            with dd.submit_lock:
                last = dd.timeline_value + 1
                q = dd.copy_queue().wait(dd.timeline_signal, last - 1).wait(sd_tl_there, v)
                q.copy(dst.va + dst_offset + off, there[s].va, n).signal(dd.timeline_signal, last)
                dd.submit_timeline(q, last)
            busy[s] = last
            off, k = off + n, k + 1
        dd.timeline_signal.wait(last)
    finally:
        for stage in stages:
            sd.free(stage)
    return k


def _cpu_bounce(dst: Buffer, src: Buffer, size: int, dst_offset: int, src_offset: int) -> int:
    """Devices of different kernels: copy out of one and into the other chunk by chunk (copyin
    returns once the chunk is staged, so its transfer overlaps the next copyout)."""
    import numpy as np
    sd, dd = src.device, dst.device
    chunk = min(size, BOUNCE_CHUNK_B)
    host = np.empty(chunk, np.uint8)
    off = k = 0
    while off < size:
        n = min(chunk, size - off)
        sd.copyout(host[:n], src, src_offset + off)
        dd.copyin(dst, host[:n], dst_offset + off)
        off, k = off + n, k + 1
    dd.synchronize()
    return k


def wait_all(waits: Iterable[tuple["Signal", int]], timeout_ms: float | None = None) -> None:
    """Blocks until every `signal` reached its `value` (signals of any devices). Raises the first
    device fault seen, or `SignalTimeout` for the first signal still short, with every involved
    device's state."""
    pending: Sequence[tuple[Signal, int]] = [(s, v) for s, v in waits if s.value < v]
    if not pending:
        return
    devices = list({id(s.device): s.device for s, _ in pending}.values())
    if timeout_ms is None:
        timeout_ms = max(d.default_timeout_ms for d in devices)
    start = time.perf_counter()
    deadline = start + timeout_ms / 1000.0
    spin_s = min(d.wait_spin_s for d in devices)
    while pending and time.perf_counter() < start + spin_s:
        pending = [(s, v) for s, v in pending if s.value < v]
    while pending:
        for d in devices:
            d.check_fault()
        pending = [(s, v) for s, v in pending if s.value < v]
        if not pending:
            return
        remaining_ms = (deadline - time.perf_counter()) * 1000.0
        sig, want = pending[0]
        if remaining_ms <= 0:
            state = "\n".join(d.describe_state() for d in devices)
            raise SignalTimeout(sig, want, sig.value, state, timeout_ms)
        sig.device.sleep_for_signal(sig, want, min(remaining_ms, _WAIT_SLICE_MS))
