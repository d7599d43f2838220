"""Errors of the HCQ runtime.

One root, `HCQError`, so callers can catch everything the runtime raises; each subclass carries the
structured facts a caller (or a test) needs rather than only a message. No bare RuntimeError, no
print-and-continue; after a device fault every later call raises a fresh `DeviceFault` whose
`__cause__` is the original.
"""
from __future__ import annotations

import errno as _errno
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported for annotations only; signal.py imports this module
    from runtime.hcq.signal import Signal


class HCQError(Exception):
    """Root of every error the HCQ runtime raises."""


class IoctlError(HCQError, OSError):
    """An ioctl failed. `name` is the request's C name (``AMDKFD_IOC_CREATE_QUEUE``), `errno` the
    error number, `decoded` a short explanation of what that errno means for this request."""

    def __init__(self, name: str, errno: int, decoded: str = "") -> None:
        self.name, self.decoded = name, decoded
        sym = _errno.errorcode.get(errno, "E?")
        msg = f"ioctl {name} failed: errno {errno} ({sym}: {os.strerror(errno)})"
        if decoded:
            msg += f" — {decoded}"
        OSError.__init__(self, errno, msg)
        self.errno = errno

    def __str__(self) -> str:
        return self.args[1] if len(self.args) > 1 else super().__str__()

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.errno, self.decoded))


class DeviceFault(HCQError):
    """The GPU reported a fault (page fault, bad packet, kernel trap, hang). `report` is the full
    text; once raised, the device is unusable and every later call raises a fresh copy of it
    (`again()`), with the first as `__cause__`."""

    def __init__(self, device: str, report: str) -> None:
        self.device, self.report = device, report
        super().__init__(f"{device}: device fault: {report}")

    def again(self) -> "DeviceFault":
        """A new error of the same kind and report, chained to this one: re-raising one object
        would grow its traceback with every call that hit it."""
        e = DeviceFault.__new__(type(self))
        e.device, e.report = self.device, self.report
        e.args = self.args
        e.__cause__ = self
        return e


class DeviceForked(HCQError):
    """A device object was inherited through fork(): its queues and memory belong to the parent
    process (KFD and the NVIDIA driver refuse a child's use of them too). Open a device of its own
    in the child."""


class SignalTimeout(HCQError, TimeoutError):
    """A wait for `signal` to reach `want` timed out with the signal at `got`. `state` describes the
    device when the wait gave up (last completed timeline value, queue read/write pointers, what
    each queue is blocked on), so a hang can be diagnosed from the message alone."""

    def __init__(self, signal: "Signal", want: int, got: int, state: str = "",
                 timeout_ms: float | None = None) -> None:
        self.signal, self.want, self.got, self.state = signal, want, got, state
        self.timeout_ms = timeout_ms
        after = f" after {timeout_ms:.0f} ms" if timeout_ms is not None else ""
        msg = f"timed out{after} waiting for {signal!r} to reach {want} (it is {got})"
        super().__init__(msg + (f"\ndevice state:\n{state}" if state else ""))


class HCQMemoryError(HCQError, MemoryError):
    """Device (or pinned host) memory could not be allocated or mapped."""


class DeviceClosed(HCQError):
    """The device was closed; nothing more can be done with it or with objects it made."""


class ProgramError(HCQError):
    """A code object could not be loaded or a launch was malformed (bad sizes, wrong arguments)."""


class QueueError(HCQError):
    """A command could not be built or submitted (unsupported command, value out of range, ring
    full)."""


class ArgumentError(HCQError, ValueError):
    """A value given to the runtime is of the wrong kind or out of range (a ring size that is not
    a power of two, a slice outside its buffer); the message names it and what is accepted."""


class DeviceNotFound(HCQError):
    """No device of the requested kind is present (or its driver is not installed)."""
