"""Programs: a loaded kernel, its kernel-argument layout, and launches.

Drivers parse their code-object format (AMDHSA ELF, NVIDIA cubin), load the code into GPU memory and
describe the explicit arguments as `ArgSlot`s; this base class writes arguments into a
kernel-argument block and launches through the device's compute queue, optionally timing the launch
on the GPU clock.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Sequence, overload

from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import Buffer
from runtime.hcq.queue import as_tuple3

if TYPE_CHECKING:
    from runtime.hcq.device import Device
    from runtime.hcq.queue import HWQueue, Value

ArgValue = Buffer | int | float | bytes


@dataclass(frozen=True)
class ArgSlot:
    """One explicit kernel argument: byte `offset` and `size` in the argument block; `kind` is
    "buffer" (a GPU address: a Buffer or an integer address, never a float), "value" (a scalar
    passed by value), or "" where the code object does not say (a raw NVIDIA cubin's 8-B
    parameter may be a pointer or a double). `scalar` is what a value holds
    when the code object says so: "i" (signed integer), "u" (unsigned), "f" (floating point), or
    "" when unknown (NVIDIA cubins carry no types: a float is then stored as IEEE bits)."""

    name: str
    offset: int
    size: int
    kind: str
    scalar: str = ""


@dataclass
class KernArgs:
    """A kernel-argument block in GPU memory: `va` is what the kernel sees as its argument pointer,
    `view` the CPU view of the explicit arguments (and whatever the driver placed after them)."""

    va: int
    view: memoryview
    slots: tuple[ArgSlot, ...]
    device: "Device | None" = field(default=None, repr=False)

    def set(self, index: int, value: ArgValue) -> None:
        """Writes explicit argument `index` (a buffer's address, an int or a float)."""
        try:
            slot = self.slots[index]
        except IndexError:
            raise ProgramError(f"argument {index} out of range: kernel has "
                               f"{len(self.slots)}") from None
        write_arg(self.view, slot, value, self.device)


_INT_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


def write_arg(view: memoryview, slot: ArgSlot, value: ArgValue,
              device: "Device | None" = None) -> None:
    """Stores one argument at its slot (two's complement for negative ints, IEEE for floats, raw
    bytes of exactly the slot's size for a struct passed by value). A numpy scalar of the slot's
    size and kind is stored bit for bit (np.float32(x) stays that float32); otherwise as its
    Python value. Refused with a ProgramError naming the argument: a float for an integer slot,
    an int outside the slot's range, a buffer of another device than `device`."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "dtype"):  # a numpy scalar
        kind = value.dtype.kind  # type: ignore[union-attr]
        if kind not in "iub" and slot.kind == "buffer":
            raise ProgramError(f"argument {slot.name!r} is a pointer: pass a Buffer (or an "
                               f"integer address), got numpy {value.dtype} {value!r}")
        if kind == "f" and slot.scalar in ("i", "u"):
            raise ProgramError(f"argument {slot.name!r} is an integer, got numpy "
                               f"{value.dtype} {value!r}")  # type: ignore[union-attr]
        if value.dtype.itemsize == slot.size and kind in "iufb" and \
                (not slot.scalar or (kind == "f") == (slot.scalar == "f")):  # type: ignore
            value = value.tobytes()  # type: ignore[union-attr]
        else:
            value = value.item()  # type: ignore[union-attr]
    if isinstance(value, (bytes, bytearray)):
        if len(value) != slot.size:
            raise ProgramError(f"argument {slot.name!r} is {slot.size} B, got {len(value)} bytes")
        view[slot.offset:slot.offset + slot.size] = value
    elif isinstance(value, Buffer):
        if device is not None and value.device is not device:
            raise ProgramError(f"argument {slot.name!r}: {value!r} belongs to "
                               f"{value.device.name}, not {device.name}")
        if value.freed or (value.base is not None and value.base.freed):
            raise ProgramError(f"argument {slot.name!r}: {value!r} was freed")
        if slot.size != 8:
            raise ProgramError(f"argument {slot.name!r} is {slot.size} B; a buffer address needs 8")
        struct.pack_into("<Q", view, slot.offset, value.va)
    elif isinstance(value, float):
        if slot.kind == "buffer":
            raise ProgramError(f"argument {slot.name!r} is a pointer: pass a Buffer (or an "
                               f"integer address), got the float {value!r}")
        if slot.scalar in ("i", "u"):
            raise ProgramError(f"argument {slot.name!r} is an integer, got the float {value!r}")
        fmt = {4: "<f", 8: "<d", 2: "<e"}.get(slot.size)
        if fmt is None:
            raise ProgramError(f"cannot pass a float in the {slot.size}-B argument {slot.name!r}")
        try:
            struct.pack_into(fmt, view, slot.offset, value)
        except OverflowError:
            raise ProgramError(f"{value!r} is beyond the range of the {slot.size}-B float "
                               f"argument {slot.name!r}") from None
    elif isinstance(value, int):
        fmt = _INT_FMT.get(slot.size)
        if fmt is None:
            raise ProgramError(f"cannot pass an int in the {slot.size}-B argument {slot.name!r}")
        if slot.scalar == "f":  # an integer where the kernel takes a float: its value
            write_arg(view, slot, float(value), device)
            return
        bits = slot.size * 8
        lo = 0 if slot.scalar == "u" else -(1 << (bits - 1))
        hi = (1 << (bits - 1)) if slot.scalar == "i" else (1 << bits)
        if not lo <= value < hi:
            raise ProgramError(f"{value} does not fit the {slot.size}-B argument {slot.name!r} "
                               f"(range {lo} to {hi - 1})")
        struct.pack_into(fmt, view, slot.offset, value & ((1 << bits) - 1))
    else:
        raise ProgramError(f"argument {slot.name!r}: expected Buffer, int, float or bytes, "
                           f"got {type(value).__name__}")


class Program:
    """A kernel loaded on a device. Drivers set `slots` (explicit arguments) and implement
    `kernargs_size` / `_fill_block` for their ABI (AMD: dispatch packet and hidden arguments)."""

    def __init__(self, device: "Device", name: str, lib: bytes) -> None:
        self.device, self.name, self.lib = device, name, lib
        self.slots: tuple[ArgSlot, ...] = ()
        self._t0 = device.new_signal()
        self._t1 = device.new_signal()

    def fill_kernargs(self, args: Sequence[ArgValue], global_size: Sequence[int],
                      local_size: Sequence[int], block: tuple[int, memoryview] | None = None,
                      ) -> KernArgs:
        """Writes a kernel-argument block for one launch (into `block` = (va, view) when given, else
        into fresh memory from the device's argument arena)."""
        if len(args) != len(self.slots):
            names = ", ".join(s.name for s in self.slots)
            raise ProgramError(f"{self.name} takes {len(self.slots)} arguments ({names}), "
                               f"got {len(args)}")
        gsz, lsz = as_tuple3(global_size, "global_size"), as_tuple3(local_size, "local_size")
        self.check_launch(gsz, lsz)
        if block is None:
            block = self.device.kernarg_arena().take(self.kernargs_size(), 64)
        va, view = block
        kargs = self._fill_block(va, view, gsz, lsz)
        kargs.device = self.device
        for slot, value in zip(self.slots, args):
            write_arg(kargs.view, slot, value, self.device)
        return kargs

    def check_launch(self, global_size: tuple[int, int, int], local_size: tuple[int, int, int]
                     ) -> None:
        """Raises ProgramError for a launch shape the hardware cannot run (drivers override)."""

    def check_early_start(self, what: str) -> None:
        """Raises ProgramError when this kernel is known not to call `griddepcontrol.wait`
        before it reads its predecessor's results (`Launch.early_start`), naming `what` launches
        it; a driver that cannot tell (or ignores early starts) accepts it."""

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: Literal[False] = ..., timeout_ms: float | None = ...) -> None: ...

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: Literal[True], timeout_ms: float | None = ...) -> float: ...

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: bool = ..., timeout_ms: float | None = ...) -> float | None: ...

    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = (),
                 global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 wait: bool = False, timeout_ms: float | None = None) -> float | None:
        """Launches with `args` (buffers and scalars, in the kernel's order; `vals` are appended) on
        a grid of `global_size` workgroups of `local_size` threads. With `wait`, blocks until done
        and returns the kernel's duration in seconds of GPU clock."""
        dev = self.device
        if dev.tracer is not None:
            return dev.tracer.launch(self, tuple(args) + tuple(vals), global_size, local_size,
                                     wait, timeout_ms)
        dev.check_usable()
        with dev.submit_lock:
            kargs = self.fill_kernargs(tuple(args) + tuple(vals), global_size, local_size)
            # The timeline value is taken once the whole submission is built (submit_timeline).
            v = dev.timeline_value + 1
            q = self.launch_commands(dev.compute_queue(), kargs, v - 1, v, global_size,
                                     local_size, wait)
            dev.submit_timeline(q, v)
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz

    def launch_commands(self, q: "HWQueue", kargs: "KernArgs | Value", before: "Value",
                        value: "Value", global_size: Sequence[int], local_size: Sequence[int],
                        wait: bool) -> "HWQueue":
        """Appends what a launch sends to `q`: the wait for timeline value `before`, the kernel
        with its argument block (timed between `_t0` and `_t1` with `wait`) and the release of
        `value`; values may be variables, for commands kept and patched per launch."""
        tl = self.device.timeline_signal
        q = q.wait(tl, before).memory_barrier()
        if wait:
            q.timestamp(self._t0)
        q.exec(self, kargs, global_size, local_size)
        if wait:
            q.timestamp(self._t1)
        return q.signal(tl, value)

    def kernargs_size(self) -> int:
        """Bytes of one launch's argument block (the driver's ABI: parameters plus what the
        hardware reads beside them)."""
        raise NotImplementedError(f"{type(self).__name__} must implement kernargs_size")

    def _fill_block(self, va: int, view: memoryview, global_size: tuple[int, int, int],
                    local_size: tuple[int, int, int]) -> KernArgs:
        raise NotImplementedError(f"{type(self).__name__} must implement _fill_block")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r} on {self.device.name})"
